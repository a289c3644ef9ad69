package geometry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
	"google.golang.org/protobuf/proto"
)

// recorder sees every file, link and directory discovery reads; the capture
// test uses it to copy exactly those into a fixture tree.
type recorder interface {
	file(path string, data []byte)
	link(path, target string)
	dir(path string)
}

// maxChainDepth bounds how deep the device chain is followed.
const maxChainDepth = 16

// sectorBytes is the unit of sysfs start, size and md offsets: always 512,
// whatever the device's logical sector size.
const sectorBytes = 512

// pseudoFSTypes are file systems never reported as volumes, even when the
// mount table gives them a block device number. The value is the reason
// Result.Filtered gives; "" for kernel interfaces that are never a volume
// and are not listed at all.
var pseudoFSTypes = map[string]string{
	"proc": "", "sysfs": "", "devtmpfs": "", "autofs": "", "cgroup": "", "cgroup2": "", "devpts": "", "mqueue": "",
	"debugfs": "", "tracefs": "", "securityfs": "", "pstore": "", "bpf": "", "configfs": "", "fusectl": "",
	"hugetlbfs": "", "efivarfs": "", "binfmt_misc": "", "swap": "", "nsfs": "", "rpc_pipefs": "",
	"tmpfs": FilterInMemory, "ramfs": FilterInMemory,
	"overlay": FilterNoBlockDevice, "nfs": FilterNoBlockDevice, "nfs4": FilterNoBlockDevice, "cifs": FilterNoBlockDevice,
	"smb3": FilterNoBlockDevice, "smbfs": FilterNoBlockDevice, "ceph": FilterNoBlockDevice,
}

type discoverer struct {
	opts  Options
	sys   string // cleaned SysfsRoot
	rec   recorder
	cache map[string][]*plumblinev1.Layer

	lvmLoaded bool
	lvm       map[string]lvmMatch // by dm name
	lvmVGErr  map[string]string   // VG name -> why its backup could not be used

	blockDevs    map[string]string         // kernel name -> sysfs dir, for declared devices
	declared     map[string]DeclaredDevice // by kernel name of a whole disk
	declaredUsed map[string]bool
	warnings     []string
}

type lvmMatch struct {
	vg lvmVG
	lv lvmLV
}

func newDiscoverer(opts Options, rec recorder) *discoverer {
	return &discoverer{
		opts:         opts,
		sys:          filepath.Clean(opts.SysfsRoot),
		rec:          rec,
		cache:        map[string][]*plumblinev1.Layer{},
		declared:     map[string]DeclaredDevice{},
		declaredUsed: map[string]bool{},
	}
}

func discover(ctx context.Context, opts Options, rec recorder) (Result, error) {
	d := newDiscoverer(opts, rec)
	if opts.SysfsRoot == "" {
		return Result{}, fmt.Errorf("sysfs root not set: %w", ErrRoot)
	}
	blockDir := filepath.Join(d.sys, "dev", "block")
	if st, err := os.Stat(blockDir); err != nil || !st.IsDir() {
		if err == nil {
			err = errors.New("not a directory")
		}
		return Result{}, fmt.Errorf("read %s: %w: %w", blockDir, ErrRoot, err)
	}
	mi := filepath.Join(opts.ProcfsRoot, "self", "mountinfo")
	raw, err := os.ReadFile(mi)
	if err != nil {
		return Result{}, fmt.Errorf("read %s: %w: %w", mi, ErrRoot, err)
	}
	d.recFile(mi, raw)
	mounts, bad := parseMountInfo(raw)
	for _, e := range bad {
		d.warnings = append(d.warnings, e.Error())
	}
	d.resolveDeclared()

	type candidate struct {
		m   mountInfo
		dir string // resolved sysfs device dir, "" when the link is odd
		err error
	}
	var cands []candidate
	byDev := map[[2]uint32]int{}
	var filtered []Filtered
	filter := func(m mountInfo, reason string) {
		filtered = append(filtered, Filtered{MountPoint: m.MountPoint, FSType: m.FSType, Source: m.Source, Reason: reason})
	}
	for _, m := range mounts {
		if ok, reason := d.selected(m); !ok {
			if reason != "" {
				filter(m, reason)
			}
			continue
		}
		if m.Major == 0 {
			filter(m, FilterNoBlockDevice)
			continue
		}
		link := filepath.Join(blockDir, fmt.Sprintf("%d:%d", m.Major, m.Minor))
		dir, err := d.resolveLink(link)
		if errors.Is(err, fs.ErrNotExist) {
			filter(m, FilterUnknownDevice) // not a block device this sysfs knows
			continue
		}
		c := candidate{m: m, dir: dir, err: err}
		key := [2]uint32{m.Major, m.Minor}
		if i, ok := byDev[key]; ok {
			if preferMount(m, cands[i].m) {
				filter(cands[i].m, FilterDuplicate)
				cands[i] = c
			} else {
				filter(m, FilterDuplicate)
			}
			continue
		}
		byDev[key] = len(cands)
		cands = append(cands, c)
	}

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

// preferMount says whether a is a better representative of a device than
// b: a mount of the file system's root beats a bind mount of a
// subdirectory, then the shorter mount point wins.
func preferMount(a, b mountInfo) bool {
	if (a.Root == "/") != (b.Root == "/") {
		return a.Root == "/"
	}
	return len(a.MountPoint) < len(b.MountPoint)
}

// selected says whether m is a volume candidate, and if not, why (a
// Filtered reason, or "" for a kernel interface never mentioned).
func (d *discoverer) selected(m mountInfo) (bool, string) {
	if reason, ok := pseudoFSTypes[m.FSType]; ok {
		return false, reason
	}
	if m.FSType == "fuse" || strings.HasPrefix(m.FSType, "fuse.") {
		return false, FilterNoBlockDevice
	}
	o := d.opts
	switch {
	case len(o.IncludeMountPoints) > 0 && !matchAny(o.IncludeMountPoints, m.MountPoint),
		matchAny(o.ExcludeMountPoints, m.MountPoint),
		len(o.IncludeFSTypes) > 0 && !containsString(o.IncludeFSTypes, m.FSType),
		containsString(o.ExcludeFSTypes, m.FSType):
		return false, FilterExcluded
	}
	return true, ""
}

func matchAny(globs []string, s string) bool {
	for _, g := range globs {
		if ok, _ := path.Match(g, s); ok {
			return true
		}
	}
	return false
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// volume builds one Volume: the file-system layer, then the device chain.
func (d *discoverer) volume(m mountInfo, dir string, linkErr error) *plumblinev1.Volume {
	fsl := d.filesystemLayer(m, dir)
	v := &plumblinev1.Volume{
		MountPoint: m.MountPoint,
		Device:     m.Source,
		Layers:     []*plumblinev1.Layer{fsl},
	}
	if linkErr != nil {
		addUnknown(fsl, "below", linkErr.Error())
	} else {
		fsl.Below = []string{filepath.Base(dir)}
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

// joinOptions joins the per-mount and super options, each option once
// ("rw" is in both).
func joinOptions(a, b string) string {
	var out []string
	seen := map[string]bool{}
	for _, o := range strings.Split(a+","+b, ",") {
		if o != "" && !seen[o] {
			seen[o] = true
			out = append(out, o)
		}
	}
	return strings.Join(out, ",")
}

// filesystemLayer reads what the mount table, statfs and the superblock say
// about the mounted file system.
func (d *discoverer) filesystemLayer(m mountInfo, dir string) *plumblinev1.Layer {
	l := &plumblinev1.Layer{
		Kind:        KindFilesystem,
		Device:      m.Source,
		FsType:      m.FSType,
		OffsetBytes: proto.Uint64(0),
		Source:      SourceMountTable,
		Sources: map[string]string{
			// The mount table places the file system at the start of
			// its device.
			"offset_bytes": SourceMountTable,
			"fs_type":      SourceMountTable,
		},
	}
	if d.opts.StatMounts {
		if bs, err := statBlockSize(m.MountPoint); err != nil {
			addUnknown(l, "block_size_bytes", err.Error())
		} else {
			l.BlockSizeBytes = bs
			l.Sources["block_size_bytes"] = SourceStatfs
			l.Source = SourceStatfs
		}
	}

	// Stripe hints from the mount options.
	opts := joinOptions(m.Options, m.SuperOptions)
	switch m.FSType {
	case "xfs":
		if v, ok := mountOption(opts, "sunit"); ok {
			if n, err := strconv.ParseUint(v, 10, 32); err == nil && n > 0 {
				l.StripeUnitBytes = n * sectorBytes
				l.Sources["stripe_unit_bytes"] = SourceMountOptions
			}
		}
		if v, ok := mountOption(opts, "swidth"); ok {
			if n, err := strconv.ParseUint(v, 10, 32); err == nil && n > 0 {
				l.StripeWidthBytes = n * sectorBytes
				l.Sources["stripe_width_bytes"] = SourceMountOptions
			}
		}
	}
	ext4Stripe := uint64(0)
	if strings.HasPrefix(m.FSType, "ext") {
		if v, ok := mountOption(opts, "stripe"); ok {
			if n, err := strconv.ParseUint(v, 10, 32); err == nil && n > 0 {
				ext4Stripe = n
			}
		}
	}

	if d.opts.ReadSuperblocks && dir != "" {
		d.readSuperblock(l, m, filepath.Base(dir))
	}
	if ext4Stripe > 0 && l.Sources["stripe_width_bytes"] != SourceSuperblock {
		if l.BlockSizeBytes == 0 {
			addUnknown(l, "stripe_width_bytes", fmt.Sprintf("mount option stripe=%d is in file-system blocks and the block size is unknown", ext4Stripe))
		} else {
			l.StripeWidthBytes = ext4Stripe * uint64(l.BlockSizeBytes)
			l.Sources["stripe_width_bytes"] = SourceMountOptions
		}
	}
	if l.BlockSizeBytes == 0 && !hasUnknown(l, "block_size_bytes") {
		switch {
		case !d.opts.StatMounts && !d.opts.ReadSuperblocks:
			addUnknown(l, "block_size_bytes", "statfs and superblock reads are off (captured tree)")
		default:
			addUnknown(l, "block_size_bytes", "no source gave the block size of "+m.FSType)
		}
	}
	if l.StripeUnitBytes == 0 && !hasUnknown(l, "stripe_unit_bytes") {
		addUnknown(l, "stripe_unit_bytes", "no stripe unit hint in the mount options"+superblockWord(l))
	}
	if l.StripeWidthBytes == 0 && !hasUnknown(l, "stripe_width_bytes") {
		addUnknown(l, "stripe_width_bytes", "no stripe width hint in the mount options"+superblockWord(l))
	}
	return l
}

func superblockWord(l *plumblinev1.Layer) string {
	if l.Source == SourceSuperblock {
		return " or the superblock"
	}
	return ""
}

// readSuperblock reads the first 4 KiB of the mounted device (by its
// kernel name under DevRoot) and takes block size, stripe hints, uuid and
// size from it. The superblock wins over mount options.
func (d *discoverer) readSuperblock(l *plumblinev1.Layer, m mountInfo, kname string) {
	devPath := filepath.Join(d.opts.DevRoot, kname)
	buf, err := readDeviceHead(devPath, m.Major, m.Minor, superblockReadBytes)
	if err != nil {
		addUnknown(l, "uuid", "superblock: "+err.Error())
		return
	}
	if d.rec != nil {
		d.rec.file(devPath, buf)
	}
	sb, known, err := parseSuperblock(m.FSType, buf)
	if !known {
		addUnknown(l, "uuid", "no superblock parser for "+m.FSType)
		return
	}
	if err != nil {
		addUnknown(l, "uuid", fmt.Sprintf("%s: %v", devPath, err))
		return
	}
	l.Source = SourceSuperblock
	l.BlockSizeBytes = sb.BlockSize
	l.Sources["block_size_bytes"] = SourceSuperblock
	if sb.UUID != "" {
		l.Uuid = sb.UUID
		l.Sources["uuid"] = SourceSuperblock
	}
	if sb.Size != 0 {
		l.SizeBytes = sb.Size
		l.Sources["size_bytes"] = SourceSuperblock
	}
	if sb.StripeUnit != 0 {
		l.StripeUnitBytes = sb.StripeUnit
		l.Sources["stripe_unit_bytes"] = SourceSuperblock
	}
	if sb.StripeWidth != 0 {
		l.StripeWidthBytes = sb.StripeWidth
		l.Sources["stripe_width_bytes"] = SourceSuperblock
	}
}

// chain returns the layer of the device at sysfs dir followed, depth first,
// by the layers of the devices below it.
func (d *discoverer) chain(dir string, stack []string, depth int) []*plumblinev1.Layer {
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
		if depth+1 >= maxChainDepth || containsString(stack, bd) {
			addUnknown(l, "below", fmt.Sprintf("device chain loops or is deeper than %d at %s", maxChainDepth, d.rel(bd)))
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
func (d *discoverer) deviceLayer(dir string) (*plumblinev1.Layer, []string) {
	name := filepath.Base(dir)
	l := &plumblinev1.Layer{Device: name, Source: SourceSysfs, Sources: map[string]string{}}
	d.recDir(dir)
	d.readSize(l, dir)
	d.readAlignmentOffset(l, dir)

	var below []string
	switch {
	case d.exists(filepath.Join(dir, "partition")):
		l.Kind = KindPartition
		parent := filepath.Dir(dir)
		d.readUint(l, "partition_number", filepath.Join(dir, "partition"), 1, SourceSysfs, func(v uint64) { l.PartitionNumber = uint32(v) })
		d.readUint(l, "offset_bytes", filepath.Join(dir, "start"), sectorBytes, SourceSysfs, func(v uint64) { l.OffsetBytes = proto.Uint64(v) })
		addUnknown(l, "partition_table", "the table type is not in sysfs; it needs a read of the device")
		d.readQueue(l, filepath.Join(parent, "queue"), false)
		if d.exists(filepath.Join(parent, "dev")) {
			below = []string{parent}
			l.Below = []string{filepath.Base(parent)}
			l.Sources["below"] = SourceSysfs
		} else {
			addUnknown(l, "below", "parent "+d.rel(parent)+" is not a block device")
		}
	case d.exists(filepath.Join(dir, "dm")):
		d.readDM(l, dir)
		d.readQueue(l, filepath.Join(dir, "queue"), false)
		below = d.slaves(l, dir)
	case d.exists(filepath.Join(dir, "md")):
		l.Kind = KindRAID
		d.readQueue(l, filepath.Join(dir, "queue"), false)
		below = d.slaves(l, dir)
		d.readMD(l, dir)
	default:
		l.Kind = KindDisk
		d.readQueue(l, filepath.Join(dir, "queue"), true)
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

func (d *discoverer) readSize(l *plumblinev1.Layer, dir string) {
	d.readUint(l, "size_bytes", filepath.Join(dir, "size"), sectorBytes, SourceSysfs, func(v uint64) { l.SizeBytes = v })
}

func (d *discoverer) readAlignmentOffset(l *plumblinev1.Layer, dir string) {
	p := filepath.Join(dir, "alignment_offset")
	b, err := d.readFile(p)
	if err == nil {
		var v int64
		v, err = parseSysfsInt(b)
		if err == nil {
			l.AlignmentOffsetBytes = proto.Int64(v)
			l.Sources["alignment_offset_bytes"] = SourceSysfs
			return
		}
	}
	addUnknown(l, "alignment_offset_bytes", d.reason(p, err))
}

// readQueue reads queue/ sector sizes and I/O hints.
func (d *discoverer) readQueue(l *plumblinev1.Layer, q string, rotational bool) {
	d.readUint(l, "logical_sector_bytes", filepath.Join(q, "logical_block_size"), 1, SourceSysfs, func(v uint64) { l.LogicalSectorBytes = uint32(v) })
	d.readUint(l, "physical_sector_bytes", filepath.Join(q, "physical_block_size"), 1, SourceSysfs, func(v uint64) { l.PhysicalSectorBytes = uint32(v) })
	d.readUint(l, "min_io_bytes", filepath.Join(q, "minimum_io_size"), 1, SourceKernelHint, func(v uint64) { l.MinIoBytes = uint32(v) })
	d.readUint(l, "opt_io_bytes", filepath.Join(q, "optimal_io_size"), 1, SourceKernelHint, func(v uint64) { l.OptIoBytes = uint32(v) })
	if rotational {
		p := filepath.Join(q, "rotational")
		b, err := d.readFile(p)
		if err == nil {
			var v uint64
			if v, err = parseSysfsUint(b); err == nil && v <= 1 {
				l.Rotational = proto.Bool(v == 1)
				l.Sources["rotational"] = SourceSysfs
				return
			} else if err == nil {
				err = fmt.Errorf("value %d is not 0 or 1", v)
			}
		}
		addUnknown(l, "rotational", d.reason(p, err))
	}
}

func (d *discoverer) readModelSerial(l *plumblinev1.Layer, dir string) {
	if s, err := d.readString(filepath.Join(dir, "device", "model")); err == nil {
		l.Model = s
		l.Sources["model"] = SourceSysfs
	} else {
		addUnknown(l, "model", d.reason(filepath.Join(dir, "device", "model"), err))
	}
	var tried []string
	for _, p := range []string{
		filepath.Join(dir, "device", "serial"),
		filepath.Join(dir, "serial"),
		filepath.Join(dir, "wwid"),
		filepath.Join(dir, "device", "wwid"),
	} {
		if s, err := d.readString(p); err == nil {
			l.Serial = s
			l.Sources["serial"] = SourceSysfs
			return
		}
		tried = append(tried, d.rel(p))
	}
	addUnknown(l, "serial", "none of "+strings.Join(tried, ", ")+" is readable")
}

// slaves lists the devices below dir from its slaves/ directory.
func (d *discoverer) slaves(l *plumblinev1.Layer, dir string) []string {
	sd := filepath.Join(dir, "slaves")
	ents, err := os.ReadDir(sd)
	if err != nil {
		if l.Kind != KindDisk {
			addUnknown(l, "below", d.reason(sd, err))
		}
		return nil
	}
	d.recDir(sd)
	var out []string
	for _, e := range ents {
		target, err := d.resolveLink(filepath.Join(sd, e.Name()))
		if err != nil {
			addUnknown(l, "below", err.Error())
			continue
		}
		out = append(out, target)
		l.Below = append(l.Below, filepath.Base(target))
	}
	sort.Strings(out)
	if len(out) > 0 {
		l.Sources["below"] = SourceSysfs
	}
	return out
}

// readDM reads a device-mapper device: name, uuid, and for LVM the
// metadata backup.
func (d *discoverer) readDM(l *plumblinev1.Layer, dir string) {
	l.Kind = KindDM
	if s, err := d.readString(filepath.Join(dir, "dm", "name")); err == nil {
		l.Name = s
		l.Sources["name"] = SourceSysfs
	} else {
		addUnknown(l, "name", d.reason(filepath.Join(dir, "dm", "name"), err))
	}
	if s, err := d.readString(filepath.Join(dir, "dm", "uuid")); err == nil {
		l.Uuid = s
		l.Sources["uuid"] = SourceSysfs
	} else if !errors.Is(err, errEmpty) {
		addUnknown(l, "uuid", d.reason(filepath.Join(dir, "dm", "uuid"), err))
	}
	if !strings.HasPrefix(l.Uuid, "LVM-") {
		addUnknown(l, "offset_bytes", "device-mapper tables are not in sysfs (they need the DM_TABLE_STATUS ioctl)")
		addUnknown(l, "dm_target", "device-mapper tables are not in sysfs (they need the DM_TABLE_STATUS ioctl)")
		return
	}
	l.Kind = KindLVM
	if l.Name == "" {
		addUnknown(l, "offset_bytes", "the dm name is unreadable, so the LV cannot be found in LVM metadata")
		return
	}
	d.loadLVM()
	match, ok := d.lvm[l.Name]
	if !ok {
		vg, _, _ := splitDMName(l.Name)
		reason := fmt.Sprintf("no LVM metadata backup for VG %s in %s", vg, d.opts.LVMBackupDir)
		if why, bad := d.lvmVGErr[vg]; bad {
			reason = why
		}
		addUnknown(l, "offset_bytes", reason)
		addUnknown(l, "dm_target", reason)
		return
	}
	l.Source = SourceLVMMetadata
	off, err := match.vg.lvmDataOffset(match.lv)
	if err != nil {
		addUnknown(l, "offset_bytes", err.Error())
	} else {
		l.OffsetBytes = proto.Uint64(off)
		l.Sources["offset_bytes"] = SourceLVMMetadata
	}
	if len(match.lv.Segments) == 0 {
		addUnknown(l, "dm_target", "LV has no segments")
		return
	}
	seg := match.lv.Segments[0]
	switch {
	case seg.Type == "striped" && seg.StripeCount > 1:
		l.DmTarget = "striped"
		l.RaidLevel = "raid0"
		l.RaidDisks = uint32(seg.StripeCount)
		l.RaidDataDisks = uint32(seg.StripeCount)
		l.StripeUnitBytes = seg.StripeSize * lvmSectorBytes
		for _, f := range []string{"raid_level", "raid_disks", "raid_data_disks", "stripe_unit_bytes"} {
			l.Sources[f] = SourceLVMMetadata
		}
	case seg.Type == "striped":
		l.DmTarget = "linear"
	default:
		l.DmTarget = seg.Type
	}
	l.Sources["dm_target"] = SourceLVMMetadata
	if len(match.lv.Segments) > 1 {
		addUnknown(l, "dm_target", fmt.Sprintf("LV has %d segments; the first one is described", len(match.lv.Segments)))
	}
}

// loadLVM reads every metadata backup once per discovery.
func (d *discoverer) loadLVM() {
	if d.lvmLoaded {
		return
	}
	d.lvmLoaded = true
	d.lvm = map[string]lvmMatch{}
	d.lvmVGErr = map[string]string{}
	if d.opts.LVMBackupDir == "" {
		return
	}
	ents, err := os.ReadDir(d.opts.LVMBackupDir)
	if err != nil {
		return
	}
	d.recDir(d.opts.LVMBackupDir)
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		p := filepath.Join(d.opts.LVMBackupDir, e.Name())
		b, err := d.readFileLimit(p, lvmMaxBytes)
		if err != nil {
			d.lvmVGErr[e.Name()] = fmt.Sprintf("read %s: %v", p, err)
			continue
		}
		vgs, err := parseLVMMetadata(b)
		if err != nil {
			d.lvmVGErr[e.Name()] = fmt.Sprintf("%s: %v", p, err)
			continue
		}
		for _, vg := range vgs {
			for _, lv := range vg.LVs {
				d.lvm[lvmDMName(vg.Name, lv.Name)] = lvmMatch{vg: vg, lv: lv}
			}
		}
	}
}

// readMD reads an md array's level, chunk, members and data offset.
func (d *discoverer) readMD(l *plumblinev1.Layer, dir string) {
	md := filepath.Join(dir, "md")
	level, err := d.readString(filepath.Join(md, "level"))
	if err != nil {
		addUnknown(l, "raid_level", d.reason(filepath.Join(md, "level"), err))
	} else {
		l.RaidLevel = level
		l.Sources["raid_level"] = SourceSysfs
	}
	var disks uint64
	d.readUint(l, "raid_disks", filepath.Join(md, "raid_disks"), 1, SourceSysfs, func(v uint64) { disks = v; l.RaidDisks = uint32(v) })
	switch level {
	case "raid1", "linear", "multipath", "faulty":
		addUnknown(l, "stripe_unit_bytes", level+" has no chunk")
	default:
		d.readUint(l, "stripe_unit_bytes", filepath.Join(md, "chunk_size"), 1, SourceSysfs, func(v uint64) { l.StripeUnitBytes = v })
	}
	var copies uint64
	if level == "raid10" || level == "raid5" || level == "raid6" {
		p := filepath.Join(md, "layout")
		b, err := d.readFile(p)
		var n uint64
		if err == nil {
			n, err = parseSysfsUint(b)
		}
		if err != nil {
			addUnknown(l, "raid_layout", d.reason(p, err))
		} else if desc, c, ok := mdLayout(level, n); ok {
			l.RaidLayout = desc
			l.Sources["raid_layout"] = SourceSysfs
			copies = c
		} else {
			addUnknown(l, "raid_layout", fmt.Sprintf("%s layout %d is not one this reader knows", level, n))
		}
	}
	if level != "" && disks > 0 {
		if n, err := mdDataDisks(level, disks, copies); err != nil {
			addUnknown(l, "raid_data_disks", err.Error())
		} else {
			l.RaidDataDisks = uint32(n)
			l.Sources["raid_data_disks"] = SourceSysfs
		}
	}
	// md's data starts at each member's data offset; one offset for the
	// layer when all members agree.
	var offs []uint64
	var why []string
	for _, m := range l.Below {
		p := filepath.Join(md, "dev-"+m, "offset")
		b, err := d.readFile(p)
		var v uint64
		if err == nil {
			v, err = parseSysfsUint(b)
		}
		if err != nil {
			why = append(why, d.reason(p, err))
			continue
		}
		offs = append(offs, v)
	}
	switch {
	case len(why) > 0:
		addUnknown(l, "offset_bytes", strings.Join(why, "; "))
	case len(offs) == 0:
		addUnknown(l, "offset_bytes", "no member data offsets")
	default:
		for _, o := range offs[1:] {
			if o != offs[0] {
				addUnknown(l, "offset_bytes", fmt.Sprintf("members' data offsets differ: %v sectors", offs))
				return
			}
		}
		l.OffsetBytes = proto.Uint64(offs[0] * sectorBytes)
		l.Sources["offset_bytes"] = SourceSysfs
	}
}

// applyDeclared turns a whole disk the operator declared as a hardware
// array into a raid layer.
func (d *discoverer) applyDeclared(l *plumblinev1.Layer, decl DeclaredDevice) {
	applyDeclaredRAID(l, decl)
}

// resolveDeclared maps each declared device to the kernel name of a whole
// disk, warning about those that match nothing.
func (d *discoverer) resolveDeclared() {
	if len(d.opts.Declared) == 0 {
		return
	}
	d.blockDevs = map[string]string{}
	blockDir := filepath.Join(d.sys, "dev", "block")
	if ents, err := os.ReadDir(blockDir); err == nil {
		for _, e := range ents {
			if dir, err := d.resolveLink(filepath.Join(blockDir, e.Name())); err == nil {
				d.blockDevs[filepath.Base(dir)] = dir
			}
		}
	}
	for _, decl := range d.opts.Declared {
		if decl.Device == "" {
			d.warnings = append(d.warnings, fmt.Sprintf("declared device %s: matching by serial or model is Windows-only; on Linux name the disk (device: /dev/disk/by-id/...)", declaredLabel(decl)))
			continue
		}
		name := d.declaredName(decl)
		if name == "" {
			d.warnings = append(d.warnings, fmt.Sprintf("declared device %s matches no block device in %s", decl.Device, filepath.Join(d.sys, "dev", "block")))
			continue
		}
		if d.exists(filepath.Join(d.blockDevs[name], "partition")) {
			d.warnings = append(d.warnings, fmt.Sprintf("declared device %s (%s) is not a whole disk; declare the disk the array presents", decl.Device, name))
			continue
		}
		d.declared[name] = decl
	}
}

// declaredName is the kernel name of a declared device: /dev/sdb, a
// /dev/disk/by-id link resolved under DevRoot, or a bare kernel name; ""
// when it names no block device.
func (d *discoverer) declaredName(decl DeclaredDevice) string {
	known := func(n string) bool {
		_, ok := d.blockDevs[n]
		return ok
	}
	p := decl.Device
	if strings.HasPrefix(p, "/dev/") && d.opts.DevRoot != "" {
		host := filepath.Join(d.opts.DevRoot, strings.TrimPrefix(p, "/dev/"))
		for range 16 {
			target, err := os.Readlink(host)
			if err != nil {
				break
			}
			if filepath.IsAbs(target) {
				if !strings.HasPrefix(target, "/dev/") {
					break
				}
				host = filepath.Join(d.opts.DevRoot, strings.TrimPrefix(target, "/dev/"))
			} else {
				host = filepath.Join(filepath.Dir(host), target)
			}
		}
		if n := filepath.Base(host); known(n) {
			return n
		}
	}
	if n := filepath.Base(p); known(n) {
		return n
	}
	return ""
}

// resolveLink resolves a sysfs symlink; it must stay inside the sysfs root.
func (d *discoverer) resolveLink(link string) (string, error) {
	target, err := os.Readlink(link)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		return "", fmt.Errorf("read link %s: %w", d.rel(link), err)
	}
	if d.rec != nil {
		d.rec.link(link, target)
	}
	if filepath.IsAbs(target) {
		return "", fmt.Errorf("link %s -> %s is absolute; it must stay inside the sysfs root", d.rel(link), target)
	}
	res := filepath.Join(filepath.Dir(link), target)
	if r, err := filepath.Rel(d.sys, res); err != nil || r == ".." || strings.HasPrefix(r, "../") {
		return "", fmt.Errorf("link %s -> %s escapes the sysfs root", d.rel(link), target)
	}
	return res, nil
}

// readUint reads one sysfs number, scales it and hands it to set with its
// source, or records why it could not.
func (d *discoverer) readUint(l *plumblinev1.Layer, field, p string, scale uint64, src string, set func(uint64)) {
	b, err := d.readFile(p)
	var v uint64
	if err == nil {
		v, err = parseSysfsUint(b)
	}
	if err == nil && scale > 1 && v > ^uint64(0)/scale {
		err = fmt.Errorf("value %d overflows when scaled by %d", v, scale)
	}
	if err != nil {
		addUnknown(l, field, d.reason(p, err))
		return
	}
	v *= scale
	if v == 0 && field != "offset_bytes" && field != "partition_number" {
		addUnknown(l, field, d.rel(p)+": the kernel reports 0 (no value)")
		return
	}
	set(v)
	l.Sources[field] = src
}

func (d *discoverer) readString(p string) (string, error) {
	b, err := d.readFile(p)
	if err != nil {
		return "", err
	}
	return parseSysfsString(b)
}

func (d *discoverer) readFile(p string) ([]byte, error) {
	return d.readFileLimit(p, maxSysfsValue+1)
}

func (d *discoverer) readFileLimit(p string, limit int64) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	if int64(len(buf)) > limit {
		return nil, fmt.Errorf("read %s: longer than %d bytes", p, limit)
	}
	d.recFile(p, buf)
	return buf, nil
}

func (d *discoverer) exists(p string) bool {
	st, err := os.Stat(p)
	if err != nil {
		return false
	}
	if d.rec != nil {
		if st.IsDir() {
			d.rec.dir(p)
		} else if st.Mode().IsRegular() {
			if b, err := os.ReadFile(p); err == nil {
				d.rec.file(p, b)
			}
		}
	}
	return true
}

func (d *discoverer) recFile(p string, b []byte) {
	if d.rec != nil {
		d.rec.file(p, b)
	}
}

func (d *discoverer) recDir(p string) {
	if d.rec != nil {
		d.rec.dir(p)
	}
}

// rel names a path relative to the sysfs root for messages.
func (d *discoverer) rel(p string) string {
	if r, err := filepath.Rel(d.sys, p); err == nil && !strings.HasPrefix(r, "..") {
		return "sysfs " + r
	}
	return p
}

// reason is an unknown's reason for a failed read or parse of p.
func (d *discoverer) reason(p string, err error) string {
	var pe *fs.PathError
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return d.rel(p) + ": absent"
	case errors.As(err, &pe):
		return d.rel(p) + ": " + pe.Err.Error()
	case err == nil:
		return d.rel(p) + ": unreadable"
	}
	return d.rel(p) + ": " + err.Error()
}
