package geometry

// Linux discovery, one file per thing it reads: mounts_linux.go (the
// mount table and which mounts are volumes), filesystem_linux.go (statfs,
// mount options, superblocks), blockdev_linux.go (block devices and their
// sysfs attributes), dm_linux.go, lvm_linux.go (LVM metadata backups),
// md_linux.go, declared_linux.go (declared hardware arrays) and
// sysfs_linux.go (bounded, recorded reads). This file walks each volume's
// device chain. Paths are built from the roots in root.go.

import (
	"context"
	"fmt"
	"slices"
	"sort"

	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
	"google.golang.org/protobuf/proto"
)

// maxChainDepth bounds how deep the device chain is followed.
const maxChainDepth = 16

// sectorBytes is the unit of sysfs start, size and md offsets: always 512,
// whatever the device's logical sector size.
const sectorBytes = 512

type discoverer struct {
	opts  Options
	roots // where sysfs, procfs, /dev and the LVM backups are read
	rec   recorder
	cache map[root][]*plumblinev1.Layer

	index *blockIndex // nil when /sys/dev/block lists the block devices

	lvmLoaded bool
	lvm       map[string]lvmMatch // by dm name
	lvmVGErr  map[string]string   // VG name -> why its backup could not be used

	blockDevs    map[string]root           // kernel name -> sysfs dir, for declared devices
	declared     map[string]DeclaredDevice // by kernel name of a whole disk
	declaredUsed map[string]bool
	warnings     []string
}

func newDiscoverer(opts Options, rec recorder) *discoverer {
	return &discoverer{
		opts:         opts,
		roots:        newRoots(opts),
		rec:          rec,
		cache:        map[root][]*plumblinev1.Layer{},
		declared:     map[string]DeclaredDevice{},
		declaredUsed: map[string]bool{},
	}
}

func discover(ctx context.Context, opts Options, rec recorder) (Result, error) {
	d := newDiscoverer(opts, rec)
	if opts.SysfsRoot == "" {
		return Result{}, fmt.Errorf("sysfs root not set: %w", ErrRoot)
	}
	if err := d.openBlockDevices(); err != nil {
		return Result{}, err
	}
	mounts, err := d.readMounts()
	if err != nil {
		return Result{}, err
	}
	d.resolveDeclared()

	cands, filtered := d.candidates(mounts)
	var res Result
	for _, c := range cands {
		if err := ctx.Err(); err != nil {
			return Result{}, err
		}
		res.Volumes = append(res.Volumes, d.volume(c.m, c.dir, c.err))
	}
	for _, decl := range opts.Declared {
		name := d.declaredName(decl)
		if _, ok := d.declared[name]; ok && !d.declaredUsed[name] {
			d.warnings = append(d.warnings, fmt.Sprintf("declared device %s (%s) is beneath no discovered volume", decl.Device, name))
		}
	}
	res.Warnings = d.warnings
	res.Filtered = filtered
	return res, nil
}

// volume builds one Volume: the file-system layer, then the device chain.
func (d *discoverer) volume(m mountInfo, dir root, linkErr error) *plumblinev1.Volume {
	fsl := d.filesystemLayer(m, dir)
	v := &plumblinev1.Volume{
		MountPoint: m.MountPoint,
		Device:     m.Source,
		Layers:     []*plumblinev1.Layer{fsl},
	}
	if linkErr != nil {
		addUnknown(fsl, "below", linkErr.Error())
	} else {
		fsl.Below = []string{dir.Base()}
		fsl.Sources["below"] = SourceSysfs
		v.Layers = append(v.Layers, d.chain(dir, nil, 0)...)
	}
	v.Filesystem = &plumblinev1.Filesystem{
		Type:             fsl.FsType,
		BlockSizeBytes:   fsl.BlockSizeBytes,
		StripeUnitBytes:  fsl.StripeUnitBytes,
		StripeWidthBytes: fsl.StripeWidthBytes,
		Uuid:             fsl.Uuid,
		SizeBytes:        fsl.SizeBytes,
		MountOptions:     joinOptions(m.Options, m.SuperOptions),
		Sources:          map[string]string{},
	}
	for _, f := range []string{"fs_type", "block_size_bytes", "stripe_unit_bytes", "stripe_width_bytes", "uuid", "size_bytes"} {
		if s, ok := fsl.Sources[f]; ok {
			name := f
			if f == "fs_type" {
				name = "type"
			}
			v.Filesystem.Sources[name] = s
		}
	}
	v.Filesystem.Sources["mount_options"] = SourceMountTable
	for _, u := range fsl.Unknown {
		if u.Field == "below" || u.Field == "offset_bytes" {
			continue
		}
		v.Filesystem.Unknown = append(v.Filesystem.Unknown, proto.Clone(u).(*plumblinev1.Unknown))
	}
	return v
}

// chain returns the layer of the device at sysfs dir followed, depth first,
// by the layers of the devices below it.
func (d *discoverer) chain(dir root, stack []root, depth int) []*plumblinev1.Layer {
	if cached, ok := d.cache[dir]; ok {
		out := make([]*plumblinev1.Layer, len(cached))
		for i, l := range cached {
			out[i] = proto.Clone(l).(*plumblinev1.Layer)
		}
		d.markDeclared(out)
		return out
	}
	l, belowDirs := d.deviceLayer(dir)
	out := []*plumblinev1.Layer{l}
	stack = append(stack, dir)
	for _, bd := range belowDirs {
		if depth+1 >= maxChainDepth || slices.Contains(stack, bd) {
			addUnknown(l, "below", fmt.Sprintf("device chain loops or is deeper than %d at %s", maxChainDepth, d.rel(string(bd))))
			continue
		}
		out = append(out, d.chain(bd, stack, depth+1)...)
	}
	stored := make([]*plumblinev1.Layer, len(out))
	for i, x := range out {
		stored[i] = proto.Clone(x).(*plumblinev1.Layer)
	}
	d.cache[dir] = stored
	d.markDeclared(out)
	return out
}

func (d *discoverer) markDeclared(ls []*plumblinev1.Layer) {
	for _, l := range ls {
		if _, ok := d.declared[l.Device]; ok && l.Source == SourceDeclared {
			d.declaredUsed[l.Device] = true
		}
	}
}

// deviceLayer reads one block device and returns its layer and the sysfs
// dirs of the devices directly below it.
func (d *discoverer) deviceLayer(dir root) (*plumblinev1.Layer, []root) {
	name := dir.Base()
	l := &plumblinev1.Layer{Device: name, Source: SourceSysfs, Sources: map[string]string{}}
	d.recDir(string(dir))
	d.readSize(l, dir)
	d.readAlignmentOffset(l, dir)

	var below []root
	switch {
	case d.isPartition(dir):
		l.Kind = KindPartition
		parent := dir.Parent()
		d.readPartitionNumber(l, dir)
		d.readUint(l, "offset_bytes", dir.Path("start"), sectorBytes, zeroValue, SourceSysfs, func(v uint64) { l.OffsetBytes = proto.Uint64(v) })
		addUnknown(l, "partition_table", "the table type is not in sysfs; it needs a read of the device")
		d.readQueue(l, parent.Sub("queue"), false)
		if d.exists(parent.Path("dev")) {
			below = []root{parent}
			l.Below = []string{parent.Base()}
			l.Sources["below"] = SourceSysfs
		} else {
			addUnknown(l, "below", "parent "+d.rel(string(parent))+" is not a block device")
		}
	case d.exists(dir.Path("dm")):
		d.readDM(l, dir)
		d.readQueue(l, dir.Sub("queue"), false)
		below = d.slaves(l, dir)
	case d.exists(dir.Path("md")):
		l.Kind = KindRAID
		d.readQueue(l, dir.Sub("queue"), false)
		below = d.slaves(l, dir)
		d.readMD(l, dir)
	default:
		l.Kind = KindDisk
		d.readQueue(l, dir.Sub("queue"), true)
		d.readModelSerial(l, dir)
		if decl, ok := d.declared[name]; ok {
			d.applyDeclared(l, decl)
		}
		// A whole device may still sit on others (loop on a file has
		// none; bcache, zram and friends list slaves).
		below = d.slaves(l, dir)
	}
	sort.Strings(l.Below)
	return l, below
}
