package geometry

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
	"google.golang.org/protobuf/proto"
)

// How block devices are found on kernels of every age:
//
//   - /sys/dev/block/MAJ:MIN links every block device to its directory
//     (Linux 2.6.27 and later). It is used whenever it exists.
//   - Older kernels have only /sys/block/<disk> (a directory, or from
//     2.6.25 a link into /sys/devices) with the disk's partitions as child
//     directories, and /sys/class/block from 2.6.25. There every device
//     directory with a dev file is indexed by the MAJ:MIN in it.
//
// A partition is told apart from a whole device the way libblkid does it,
// since the partition attribute only exists from 2.6.28 on: the partition
// file; else, for a device with a start file (every partition has one),
// DEVTYPE in its uevent, or without one, whether its directory sits inside
// another block device's directory (a disk's child). Its number comes from the partition file, else uevent PARTN, else
// the digits that end its name after the disk's name (sda1, nvme0n1p2).

// blockIndex maps device numbers to sysfs device directories when
// /sys/dev/block is missing.
type blockIndex struct {
	byDev  map[string]root // "MAJ:MIN" -> dir
	byName map[string]root // kernel name -> dir
}

// devBlockDir is /sys/dev/block under the sysfs root.
func (d *discoverer) devBlockDir() root { return d.sys.Sub("dev", "block") }

// openBlockDevices checks that the sysfs root lists block devices, and
// indexes them by hand on kernels without /sys/dev/block.
func (d *discoverer) openBlockDevices() error {
	blockDir := d.devBlockDir()
	st, err := os.Stat(string(blockDir))
	present := err == nil && st.IsDir()
	if present && !emptyDir(string(blockDir)) {
		return nil
	}
	if err == nil && !present {
		err = errors.New("not a directory")
	}
	idx := d.scanBlockDevices()
	if len(idx.byDev) == 0 {
		if present {
			return nil // an empty /sys/dev/block: a host with no block devices
		}
		return fmt.Errorf("read %s: %w: %w (and neither %s nor %s lists a block device)", blockDir, ErrRoot, err,
			d.sys.Path("block"), d.sys.Path("class", "block"))
	}
	d.index = idx
	return nil
}

// scanBlockDevices indexes /sys/block/* and /sys/class/block/* and the
// disks' child directories by the MAJ:MIN in their dev files.
func (d *discoverer) scanBlockDevices() *blockIndex {
	idx := &blockIndex{byDev: map[string]root{}, byName: map[string]root{}}
	add := func(dir root) bool {
		b, err := d.readFile(dir.Path("dev"))
		if err != nil {
			return false
		}
		s, err := parseSysfsString(b)
		if err != nil {
			return false
		}
		ma, mi, err := parseDevNumber(s)
		if err != nil {
			return false
		}
		key := fmt.Sprintf("%d:%d", ma, mi)
		if _, ok := idx.byDev[key]; !ok {
			idx.byDev[key] = dir
			idx.byName[dir.Base()] = dir
		}
		return true
	}
	for _, top := range []root{d.sys.Sub("block"), d.sys.Sub("class", "block")} {
		ents, err := os.ReadDir(string(top))
		if err != nil {
			continue
		}
		d.recDir(string(top))
		for _, e := range ents {
			p := top.Path(e.Name())
			dir := root(p)
			if e.Type()&fs.ModeSymlink != 0 {
				var err error
				if dir, err = d.resolveLink(p); err != nil {
					continue
				}
			} else if !e.IsDir() {
				continue
			}
			if !add(dir) {
				continue
			}
			// A disk's partitions are its child directories with a dev file.
			kids, err := os.ReadDir(string(dir))
			if err != nil {
				continue
			}
			for _, k := range kids {
				if k.IsDir() && k.Type()&fs.ModeSymlink == 0 && d.exists(dir.Path(k.Name(), "dev")) {
					add(dir.Sub(k.Name()))
				}
			}
		}
	}
	return idx
}

// deviceDir is the sysfs directory of block device MAJ:MIN; the error
// wraps fs.ErrNotExist when sysfs has no such block device.
func (d *discoverer) deviceDir(major, minor uint32) (root, error) {
	key := fmt.Sprintf("%d:%d", major, minor)
	if d.index != nil {
		if dir, ok := d.index.byDev[key]; ok {
			return dir, nil
		}
		return "", fs.ErrNotExist
	}
	return d.resolveLink(d.devBlockDir().Path(key))
}

// blockDevices maps every block device's kernel name to its directory.
func (d *discoverer) blockDevices() map[string]root {
	out := map[string]root{}
	if d.index != nil {
		for n, dir := range d.index.byName {
			out[n] = dir
		}
		return out
	}
	ents, err := os.ReadDir(string(d.devBlockDir()))
	if err != nil {
		return out
	}
	for _, e := range ents {
		if dir, err := d.resolveLink(d.devBlockDir().Path(e.Name())); err == nil {
			out[dir.Base()] = dir
		}
	}
	return out
}

// isPartition says whether the block device at dir is a partition (see
// the comment at the top of this file).
func (d *discoverer) isPartition(dir root) bool {
	if d.exists(dir.Path("partition")) {
		return true
	}
	if !d.exists(dir.Path("start")) {
		return false // every kernel gives a partition its start
	}
	if ue := d.uevent(dir); ue != nil {
		switch ue["DEVTYPE"] {
		case "partition":
			return true
		case "disk":
			return false
		}
	}
	return d.exists(dir.Parent().Path("dev"))
}

// uevent reads dir/uevent; nil when it is absent or unreadable.
func (d *discoverer) uevent(dir root) map[string]string {
	b, err := d.readFile(dir.Path("uevent"))
	if err != nil {
		return nil
	}
	return parseUevent(b)
}

// readPartitionNumber sets a partition's number from the partition file,
// uevent PARTN, or its name, in that order.
func (d *discoverer) readPartitionNumber(l *plumblinev1.Layer, dir root) {
	p := dir.Path("partition")
	if _, err := os.Stat(p); err == nil {
		d.readUint(l, "partition_number", p, 1, zeroValue, SourceSysfs, func(v uint64) { l.PartitionNumber = uint32(v) })
		return
	}
	if v, ok := d.uevent(dir)["PARTN"]; ok {
		if n, err := strconv.ParseUint(v, 10, 32); err == nil && n > 0 {
			l.PartitionNumber = uint32(n)
			l.Sources["partition_number"] = SourceSysfs
			return
		}
	}
	if n, ok := partitionNumberFromName(dir.Base(), dir.Parent().Base()); ok {
		l.PartitionNumber = n
		l.Sources["partition_number"] = SourceDeviceName
		return
	}
	addUnknown(l, "partition_number", fmt.Sprintf("%s: absent, no PARTN in uevent, and the name %s does not end in a number", d.rel(p), dir.Base()))
}

func (d *discoverer) readSize(l *plumblinev1.Layer, dir root) {
	d.readUint(l, "size_bytes", dir.Path("size"), sectorBytes, zeroUnknown, SourceSysfs, func(v uint64) { l.SizeBytes = v })
}

func (d *discoverer) readAlignmentOffset(l *plumblinev1.Layer, dir root) {
	p := dir.Path("alignment_offset")
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
func (d *discoverer) readQueue(l *plumblinev1.Layer, q root, rotational bool) {
	// Before 2.6.31 the logical sector was only queue/hw_sector_size.
	d.readUintOr(l, "logical_sector_bytes", q.Path("logical_block_size"), q.Path("hw_sector_size"), zeroUnknown, SourceSysfs,
		func(v uint64) { l.LogicalSectorBytes = uint32(v) })
	d.readUint(l, "physical_sector_bytes", q.Path("physical_block_size"), 1, zeroUnknown, SourceSysfs, func(v uint64) { l.PhysicalSectorBytes = uint32(v) })
	d.readUint(l, "min_io_bytes", q.Path("minimum_io_size"), 1, zeroUnknown, SourceKernelHint, func(v uint64) { l.MinIoBytes = uint32(v) })
	d.readUint(l, "opt_io_bytes", q.Path("optimal_io_size"), 1, zeroUnknown, SourceKernelHint, func(v uint64) { l.OptIoBytes = uint32(v) })
	if rotational {
		p := q.Path("rotational")
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

func (d *discoverer) readModelSerial(l *plumblinev1.Layer, dir root) {
	if s, err := d.readString(dir.Path("device", "model")); err == nil {
		l.Model = s
		l.Sources["model"] = SourceSysfs
	} else {
		addUnknown(l, "model", d.reason(dir.Path("device", "model"), err))
	}
	var tried []string
	for _, p := range []string{
		dir.Path("device", "serial"),
		dir.Path("serial"),
		dir.Path("wwid"),
		dir.Path("device", "wwid"),
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
func (d *discoverer) slaves(l *plumblinev1.Layer, dir root) []root {
	sd := dir.Path("slaves")
	ents, err := os.ReadDir(sd)
	if err != nil {
		if l.Kind != KindDisk {
			addUnknown(l, "below", d.reason(sd, err))
		}
		return nil
	}
	d.recDir(sd)
	var out []root
	for _, e := range ents {
		target, err := d.resolveLink(filepath.Join(sd, e.Name()))
		if err != nil {
			addUnknown(l, "below", err.Error())
			continue
		}
		out = append(out, target)
		l.Below = append(l.Below, target.Base())
	}
	slices.Sort(out)
	if len(out) > 0 {
		l.Sources["below"] = SourceSysfs
	}
	return out
}
