package geometry

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
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
	byDev  map[string]string // "MAJ:MIN" -> dir
	byName map[string]string // kernel name -> dir
}

// devBlockDir is /sys/dev/block under the sysfs root.
func (d *discoverer) devBlockDir() string { return filepath.Join(d.sys, "dev", "block") }

// openBlockDevices checks that the sysfs root lists block devices, and
// indexes them by hand on kernels without /sys/dev/block.
func (d *discoverer) openBlockDevices() error {
	blockDir := d.devBlockDir()
	st, err := os.Stat(blockDir)
	present := err == nil && st.IsDir()
	if present && !emptyDir(blockDir) {
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
			filepath.Join(d.sys, "block"), filepath.Join(d.sys, "class", "block"))
	}
	d.index = idx
	return nil
}

// scanBlockDevices indexes /sys/block/* and /sys/class/block/* and the
// disks' child directories by the MAJ:MIN in their dev files.
func (d *discoverer) scanBlockDevices() *blockIndex {
	idx := &blockIndex{byDev: map[string]string{}, byName: map[string]string{}}
	add := func(dir string) bool {
		b, err := d.readFile(filepath.Join(dir, "dev"))
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
			idx.byName[filepath.Base(dir)] = dir
		}
		return true
	}
	for _, top := range []string{filepath.Join(d.sys, "block"), filepath.Join(d.sys, "class", "block")} {
		ents, err := os.ReadDir(top)
		if err != nil {
			continue
		}
		d.recDir(top)
		for _, e := range ents {
			p := filepath.Join(top, e.Name())
			dir := p
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
			kids, err := os.ReadDir(dir)
			if err != nil {
				continue
			}
			for _, k := range kids {
				if k.IsDir() && k.Type()&fs.ModeSymlink == 0 && d.exists(filepath.Join(dir, k.Name(), "dev")) {
					add(filepath.Join(dir, k.Name()))
				}
			}
		}
	}
	return idx
}

// deviceDir is the sysfs directory of block device MAJ:MIN; the error
// wraps fs.ErrNotExist when sysfs has no such block device.
func (d *discoverer) deviceDir(major, minor uint32) (string, error) {
	key := fmt.Sprintf("%d:%d", major, minor)
	if d.index != nil {
		if dir, ok := d.index.byDev[key]; ok {
			return dir, nil
		}
		return "", fs.ErrNotExist
	}
	return d.resolveLink(filepath.Join(d.devBlockDir(), key))
}

// blockDevices maps every block device's kernel name to its directory.
func (d *discoverer) blockDevices() map[string]string {
	out := map[string]string{}
	if d.index != nil {
		for n, dir := range d.index.byName {
			out[n] = dir
		}
		return out
	}
	ents, err := os.ReadDir(d.devBlockDir())
	if err != nil {
		return out
	}
	for _, e := range ents {
		if dir, err := d.resolveLink(filepath.Join(d.devBlockDir(), e.Name())); err == nil {
			out[filepath.Base(dir)] = dir
		}
	}
	return out
}

// isPartition says whether the block device at dir is a partition (see
// the comment at the top of this file).
func (d *discoverer) isPartition(dir string) bool {
	if d.exists(filepath.Join(dir, "partition")) {
		return true
	}
	if !d.exists(filepath.Join(dir, "start")) {
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
	return d.exists(filepath.Join(filepath.Dir(dir), "dev"))
}

// uevent reads dir/uevent; nil when it is absent or unreadable.
func (d *discoverer) uevent(dir string) map[string]string {
	b, err := d.readFile(filepath.Join(dir, "uevent"))
	if err != nil {
		return nil
	}
	return parseUevent(b)
}

// readPartitionNumber sets a partition's number from the partition file,
// uevent PARTN, or its name, in that order.
func (d *discoverer) readPartitionNumber(l *plumblinev1.Layer, dir string) {
	p := filepath.Join(dir, "partition")
	if _, err := os.Stat(p); err == nil {
		d.readUint(l, "partition_number", p, 1, SourceSysfs, func(v uint64) { l.PartitionNumber = uint32(v) })
		return
	}
	if v, ok := d.uevent(dir)["PARTN"]; ok {
		if n, err := strconv.ParseUint(v, 10, 32); err == nil && n > 0 {
			l.PartitionNumber = uint32(n)
			l.Sources["partition_number"] = SourceSysfs
			return
		}
	}
	if n, ok := partitionNumberFromName(filepath.Base(dir), filepath.Base(filepath.Dir(dir))); ok {
		l.PartitionNumber = n
		l.Sources["partition_number"] = SourceDeviceName
		return
	}
	addUnknown(l, "partition_number", fmt.Sprintf("%s: absent, no PARTN in uevent, and the name %s does not end in a number", d.rel(p), filepath.Base(dir)))
}

// readMounts reads the mount table: <procfs>/self/mountinfo, or on
// kernels before 2.6.26, which have none, <procfs>/mounts with each
// block device's number found in sysfs by the source's name.
func (d *discoverer) readMounts() ([]mountInfo, error) {
	mi := filepath.Join(d.opts.ProcfsRoot, "self", "mountinfo")
	raw, err := os.ReadFile(mi)
	if err == nil {
		d.recFile(mi, raw)
		mounts, bad := parseMountInfo(raw)
		for _, e := range bad {
			d.warnings = append(d.warnings, e.Error())
		}
		return mounts, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read %s: %w: %w", mi, ErrRoot, err)
	}
	pm := filepath.Join(d.opts.ProcfsRoot, "mounts")
	raw, err2 := os.ReadFile(pm)
	if err2 != nil {
		return nil, fmt.Errorf("read %s: %w: %w (and %s: %w)", mi, ErrRoot, err, pm, err2)
	}
	d.recFile(pm, raw)
	mounts, bad := parseProcMounts(raw)
	for _, e := range bad {
		d.warnings = append(d.warnings, e.Error())
	}
	devs := d.blockDevices()
	var unresolved []string
	for i := range mounts {
		m := &mounts[i]
		if _, pseudo := pseudoFSTypes[m.FSType]; pseudo || !strings.HasPrefix(m.Source, "/dev/") {
			continue
		}
		dir, ok := d.mountSourceDir(m.Source, devs)
		if ok {
			if b, err := d.readFile(filepath.Join(dir, "dev")); err == nil {
				if s, err := parseSysfsString(b); err == nil {
					if ma, mi, err := parseDevNumber(s); err == nil {
						m.Major, m.Minor = ma, mi
						continue
					}
				}
			}
		}
		m.Unresolved = true
		unresolved = append(unresolved, m.Source+" ("+m.MountPoint+")")
	}
	if len(unresolved) > 0 {
		d.warnings = append(d.warnings, fmt.Sprintf("%s has no mountinfo (Linux before 2.6.26) and %s names no block device sysfs knows: %s", d.opts.ProcfsRoot, pm, strings.Join(unresolved, ", ")))
	}
	return mounts, nil
}

// mountSourceDir finds the sysfs directory of a mount source from
// /proc/mounts: /dev/sda1 and /dev/md0 by kernel name, /dev/mapper/NAME by
// the dm name, links under DevRoot (/dev/disk/by-uuid/...) by following them.
func (d *discoverer) mountSourceDir(src string, devs map[string]string) (string, bool) {
	if name, ok := strings.CutPrefix(src, "/dev/mapper/"); ok {
		for _, dir := range devs {
			if n, err := d.readString(filepath.Join(dir, "dm", "name")); err == nil && n == name {
				return dir, true
			}
		}
	}
	if n, ok := d.devLinkName(src); ok {
		if dir, ok := devs[n]; ok {
			return dir, true
		}
	}
	dir, ok := devs[filepath.Base(src)]
	return dir, ok
}

// devLinkName follows a /dev path's symlinks under DevRoot (at most 16,
// never out of /dev) and returns the name it ends at: /dev/disk/by-id/x
// -> sdb. ok is false when the path is not under /dev or DevRoot is unset.
func (d *discoverer) devLinkName(p string) (string, bool) {
	if !strings.HasPrefix(p, "/dev/") || d.opts.DevRoot == "" {
		return "", false
	}
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
	return filepath.Base(host), true
}

// emptyDir says whether dir lists nothing (or cannot be listed).
func emptyDir(dir string) bool {
	f, err := os.Open(dir)
	if err != nil {
		return true
	}
	defer f.Close()
	names, _ := f.Readdirnames(1)
	return len(names) == 0
}
