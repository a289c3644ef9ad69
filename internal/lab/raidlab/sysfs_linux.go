//go:build linux

package raidlab

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// There is no md driver here, so a lab with member devices writes the
// sysfs tree md would have: under State.Sysfs, shaped like /sys, the
// array's loop device as an md array (md/level, raid_disks, chunk_size,
// layout, array_state, degraded, sync_action, dev-*/state, slot, rd*,
// slaves/) and each member's loop device with the array in holders/, a
// device/serial and device/model, and the queue limits an md array of
// that shape sets. Plain attributes (dev, size, queue/...) are copied
// from the real sysfs entries of the loop devices and the array's
// partitions. The tree's dev/block/MAJ:MIN links are the real device
// numbers, so that a reader of the real /proc/self/mountinfo and
// /proc/diskstats finds the lab's devices in it. State.DevRoot is a device
// directory to go with it: disk/by-id links to the members (relative,
// ../../loopN, as udev writes them) and loopN links to the real /dev
// nodes. Every fault rewrites the md state (Lab.Fault). Labs may share
// one tree (Config.TreeRoot); each removes its own devices on Close.

// copied are the attributes copied from a device's real sysfs directory.
var copied = []string{
	"dev", "size", "ro", "removable", "alignment_offset", "discard_alignment",
	"queue/logical_block_size", "queue/physical_block_size", "queue/hw_sector_size",
	"queue/minimum_io_size", "queue/optimal_io_size", "queue/rotational",
	"queue/max_sectors_kb", "queue/nr_requests",
}

// copiedPart are the attributes copied from a partition's directory.
var copiedPart = []string{"dev", "partition", "start", "size", "ro", "alignment_offset", "discard_alignment"}

// sysfsWriter writes one lab's tree.
type sysfsWriter struct {
	real, root string // the real /sys/class/block and the tree
	errs       []error
}

// WriteSysfs (re)writes the lab's sysfs tree and by-id links from the
// real devices and the array's state. Partitions made since the last
// write appear in it.
func (l *Lab) WriteSysfs() error {
	if len(l.Members) == 0 {
		return errors.New("raidlab: the sysfs tree needs member devices")
	}
	if l.Sysfs == "" {
		root := l.tree
		if root == "" {
			root = l.dir
		}
		l.Sysfs, l.DevRoot = filepath.Join(root, "sys"), filepath.Join(root, "dev")
		if err := l.writeState(); err != nil {
			return err
		}
	}
	w := &sysfsWriter{real: "/sys/class/block", root: l.Sysfs}
	arr := filepath.Base(l.Device)
	st := l.arr.Stats()
	w.device(arr, "")
	w.devLink(l.DevRoot, arr)
	for _, p := range w.partitions(arr) {
		w.partition(arr, p)
		w.devLink(l.DevRoot, p)
	}
	for m, dev := range l.Members {
		name := filepath.Base(dev)
		w.device(name, "")
		w.link(filepath.Join("devices/virtual/block", arr, "slaves", name), filepath.Join("../..", name))
		w.link(filepath.Join("devices/virtual/block", name, "holders", arr), filepath.Join("../..", arr))
		w.file(filepath.Join("devices/virtual/block", name, "device/serial"), l.Serial(m))
		w.file(filepath.Join("devices/virtual/block", name, "device/model"), "raidlab "+l.Preset)
		w.file(filepath.Join("devices/virtual/block", name, "queue/rotational"), rotational(st.Preset))
		w.devLink(l.DevRoot, name)
		w.byID(l.DevRoot, l.ByIDName(m), name)
	}
	w.queue(arr, st)
	w.md(arr, l.Members, st)
	return errors.Join(w.errs...)
}

// Serial is member m's serial number in the lab's sysfs tree.
func (l *Lab) Serial(m int) string { return fmt.Sprintf("RAIDLAB-%s-M%d", l.ID, m) }

// ByIDName is member m's link name in State.DevRoot/disk/by-id.
func (l *Lab) ByIDName(m int) string { return "raidlab-" + l.Preset + "_" + l.Serial(m) }

func rotational(preset string) string {
	if p, err := LookupPreset(preset); err == nil && p.AvgRotation > 0 {
		return "1"
	}
	return "0"
}

// device writes name's directory (or a partition's, below parent).
func (w *sysfsWriter) device(name, parent string) {
	rel := filepath.Join("devices/virtual/block", parent, name)
	src := filepath.Join(w.real, name)
	attrs := copied
	if parent != "" {
		attrs = copiedPart
	}
	for _, a := range attrs {
		b, err := os.ReadFile(filepath.Join(src, a))
		if err != nil {
			continue // an attribute this kernel lacks
		}
		w.file(filepath.Join(rel, a), strings.TrimSpace(string(b)))
	}
	b, err := os.ReadFile(filepath.Join(src, "dev"))
	if err != nil {
		w.errs = append(w.errs, fmt.Errorf("raidlab: sysfs tree: %w", err))
		return
	}
	w.link(filepath.Join("dev/block", strings.TrimSpace(string(b))), filepath.Join("../..", rel))
	w.link(filepath.Join("class/block", name), filepath.Join("../..", rel))
	if parent == "" {
		w.link(filepath.Join("block", name), filepath.Join("..", rel))
	}
}

func (w *sysfsWriter) partitions(name string) []string {
	ents, _ := os.ReadDir(filepath.Join(w.real, name))
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), name+"p") {
			out = append(out, e.Name())
		}
	}
	return out
}

func (w *sysfsWriter) partition(parent, name string) { w.device(name, parent) }

// queue writes the limits md sets on an array of this shape: the chunk
// as the minimum I/O size, a full stripe of data as the optimal one.
func (w *sysfsWriter) queue(arr string, st Stats) {
	g := Geometry{Level: st.Level, Members: st.Members, StripeUnit: st.StripeUnit}
	q := filepath.Join("devices/virtual/block", arr, "queue")
	w.file(filepath.Join(q, "rotational"), rotational(st.Preset))
	if !g.striped() {
		return
	}
	w.file(filepath.Join(q, "minimum_io_size"), strconv.FormatInt(g.StripeUnit, 10))
	w.file(filepath.Join(q, "optimal_io_size"), strconv.FormatInt(g.StripeUnit*int64(g.dataDisks()), 10))
}

// dataDisks is how many members hold distinct data in a stripe.
func (g Geometry) dataDisks() int {
	switch g.Level {
	case RAID1, Single:
		return 1
	case RAID5:
		return g.Members - 1
	case RAID10:
		return g.Members / 2
	}
	return g.Members
}

// file writes one attribute atomically (a reader never sees it half
// written).
func (w *sysfsWriter) file(rel, content string) {
	p := filepath.Join(w.root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		w.errs = append(w.errs, err)
		return
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, []byte(content+"\n"), 0o644); err != nil {
		w.errs = append(w.errs, err)
		return
	}
	if err := os.Rename(tmp, p); err != nil {
		w.errs = append(w.errs, err)
	}
}

// link makes rel a symbolic link to target, replacing what was there.
func (w *sysfsWriter) link(rel, target string) {
	p := filepath.Join(w.root, rel)
	if got, err := os.Readlink(p); err == nil && got == target {
		return
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		w.errs = append(w.errs, err)
		return
	}
	os.Remove(p)
	if err := os.Symlink(target, p); err != nil {
		w.errs = append(w.errs, err)
	}
}

// byID makes devRoot/disk/by-id/link a link to ../../name, as udev's
// /dev/disk/by-id links are.
func (w *sysfsWriter) byID(devRoot, link, name string) {
	sub := &sysfsWriter{root: devRoot}
	sub.link(filepath.Join("disk/by-id", link), filepath.Join("../..", name))
	w.errs = append(w.errs, sub.errs...)
}

// devLink makes devRoot/name a link to the real /dev/name.
func (w *sysfsWriter) devLink(devRoot, name string) {
	sub := &sysfsWriter{root: devRoot}
	sub.link(name, filepath.Join("/dev", name))
	w.errs = append(w.errs, sub.errs...)
}

// removeTree removes the lab's own devices from its tree (which other labs
// may share): their directories and links, and the member's by-id links.
func (l *Lab) removeTree() {
	if l.Sysfs == "" {
		return
	}
	names := append([]string{filepath.Base(l.Device)}, l.Members...)
	parts, _ := filepath.Glob(filepath.Join(l.Sysfs, "devices/virtual/block", names[0], names[0]+"p*"))
	for _, p := range parts {
		names = append(names, filepath.Base(p))
	}
	for _, n := range names {
		n = filepath.Base(n)
		dir := filepath.Join(l.Sysfs, "class/block", n)
		if target, err := filepath.EvalSymlinks(dir); err == nil {
			if b, err := os.ReadFile(filepath.Join(target, "dev")); err == nil {
				os.Remove(filepath.Join(l.Sysfs, "dev/block", strings.TrimSpace(string(b))))
			}
		}
		os.Remove(dir)
		os.Remove(filepath.Join(l.Sysfs, "block", n))
		os.Remove(filepath.Join(l.DevRoot, n))
	}
	for _, n := range names {
		os.RemoveAll(filepath.Join(l.Sysfs, "devices/virtual/block", filepath.Base(n)))
	}
	for m := range l.Members {
		os.Remove(filepath.Join(l.DevRoot, "disk/by-id", l.ByIDName(m)))
	}
}

// mdLevel and mdLayout are md's names and layout numbers for the lab's
// levels (raid5 left-symmetric: 2; raid10 near 2: 0x102).
func mdLevel(l Level) (level string, layout int) {
	switch l {
	case RAID5:
		return "raid5", 2
	case RAID10:
		return "raid10", 0x102
	case Single:
		return "linear", 0
	}
	return string(l), 0
}

// md writes the array's md/ directory from its state: every member
// in_sync, a failed one faulty (slot none, counted in degraded), a
// rebuild as md shows a recovery (sync_action recover, the member
// rebuilt a spare in its slot, its background rate as sync_speed).
func (w *sysfsWriter) md(arr string, members []string, st Stats) {
	md := filepath.Join("devices/virtual/block", arr, "md")
	level, layout := mdLevel(st.Level)
	memberKiB := Geometry{Level: st.Level, Members: st.Members, StripeUnit: st.StripeUnit, Size: st.Size}.MemberSize() / 1024
	chunk := st.StripeUnit
	if st.Level == RAID1 || st.Level == Single {
		chunk = 0
	}
	degraded, action, speed := 0, "idle", "none"
	for m, dev := range members {
		name := filepath.Base(dev)
		ms := st.MemberStats[m]
		dir := filepath.Join(md, "dev-"+name)
		state, slot := "in_sync", strconv.Itoa(m)
		switch {
		case ms.Failed:
			state, slot = "faulty", "none"
			degraded++
		case ms.RebuildWrite:
			state = "spare"
			degraded++
			action = "recover"
			speed = strconv.FormatInt(int64(float64(rebuildLen)/ms.RebuildEvery.Seconds())/1024, 10)
		}
		w.file(filepath.Join(dir, "state"), state)
		w.file(filepath.Join(dir, "slot"), slot)
		w.file(filepath.Join(dir, "errors"), "0")
		w.file(filepath.Join(dir, "offset"), "0")
		w.file(filepath.Join(dir, "size"), strconv.FormatInt(memberKiB, 10))
		w.file(filepath.Join(dir, "bad_blocks"), "")
		w.link(filepath.Join(dir, "block"), filepath.Join("../../../", name))
		rd := filepath.Join(w.root, md, "rd"+strconv.Itoa(m))
		os.Remove(rd)
		if slot != "none" {
			w.link(filepath.Join(md, "rd"+slot), "dev-"+name)
		}
	}
	if st.Level == RAID0 || st.Level == Single {
		degraded = 0 // md has no degraded file for these; 0 keeps readers simple
	}
	completed := "none"
	if action != "idle" {
		completed = "0 / " + strconv.FormatInt(memberKiB*2, 10)
	}
	for name, v := range map[string]string{
		"level": level, "raid_disks": strconv.Itoa(st.Members), "chunk_size": strconv.FormatInt(chunk, 10),
		"layout": strconv.Itoa(layout), "metadata_version": "1.2", "component_size": strconv.FormatInt(memberKiB, 10),
		"array_state": "clean", "degraded": strconv.Itoa(degraded), "sync_action": action,
		"sync_completed": completed, "sync_speed": speed, "mismatch_cnt": "0", "last_sync_action": "none",
	} {
		w.file(filepath.Join(md, name), v)
	}
}
