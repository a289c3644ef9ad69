package geometry

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
	"google.golang.org/protobuf/proto"
)

// maxMDMembers bounds the member directories read for one array (the
// server refuses longer lists).
const maxMDMembers = 1024

// mdRedundant says whether md offers the sync attributes (degraded,
// sync_action, sync_completed, mismatch_cnt, ...) for level: only the
// levels with redundancy have them. An unreadable level is tried.
func mdRedundant(level string) bool {
	switch level {
	case "raid0", "linear", "multipath", "faulty", "container":
		return false
	}
	return true
}

// readMDHealth reads an md array's health as the kernel states it:
// array_state, the sync attributes and every listed member.
func (d *discoverer) readMDHealth(l *plumblinev1.Layer, md root, level string) {
	h := &plumblinev1.RaidHealth{}
	before := len(l.Unknown)
	if s, err := d.readMDWordFile(md.Path("array_state")); err == nil {
		h.ArrayState = s
	} else {
		addUnknown(l, "raid_health.array_state", d.reason(md.Path("array_state"), err))
	}
	if mdRedundant(level) {
		d.readMDSync(l, h, md)
	}
	h.Members = d.readMDMembers(l, md)
	if !mdHealthRead(h) {
		// A kernel (or a captured tree) without the attributes: what
		// /proc/mdstat says, else one unknown, not one per file.
		l.Unknown = l.Unknown[:before]
		mh, err := d.mdstatHealth(l.GetDevice())
		if err != nil {
			addUnknown(l, "raid_health", d.rel(string(md))+": neither array_state nor any member's state is readable; "+d.reason(d.proc.Path("mdstat"), err))
			return
		}
		l.RaidHealth = mh
		l.Sources["raid_health"] = SourceMDStat
		return
	}
	l.RaidHealth = h
	l.Sources["raid_health"] = SourceSysfs
}

// mdHealthRead says whether any state was read: the array's, its sync
// action's or a member's.
func mdHealthRead(h *plumblinev1.RaidHealth) bool {
	if h.ArrayState != "" || h.SyncAction != "" || h.Degraded != nil {
		return true
	}
	for _, m := range h.Members {
		if len(m.State) > 0 || m.Slot != nil {
			return true
		}
	}
	return false
}

func (d *discoverer) readMDWordFile(p string) (string, error) {
	b, err := d.readFile(p)
	if err != nil {
		return "", err
	}
	return parseMDWord(b)
}

// readMDSync reads the attributes md offers for levels with redundancy.
func (d *discoverer) readMDSync(l *plumblinev1.Layer, h *plumblinev1.RaidHealth, md root) {
	unknown := func(field, p string, err error) { addUnknown(l, "raid_health."+field, d.reason(p, err)) }
	b, err := d.readFile(md.Path("degraded"))
	var n uint64
	if err == nil {
		n, err = parseSysfsUint(b)
	}
	if err == nil && n > 1<<31 {
		err = fmt.Errorf("%d degraded members", n)
	}
	if err != nil {
		unknown("degraded", md.Path("degraded"), err)
	} else {
		h.Degraded = proto.Uint32(uint32(n))
	}
	if s, err := d.readMDWordFile(md.Path("sync_action")); err == nil {
		h.SyncAction = s
	} else {
		unknown("sync_action", md.Path("sync_action"), err)
	}
	if b, err := d.readFile(md.Path("sync_completed")); err == nil {
		h.SyncCompletedSectors, h.SyncTotalSectors, h.SyncDelayed, err = parseMDSyncCompleted(b)
		if err != nil {
			unknown("sync_completed_sectors", md.Path("sync_completed"), err)
		}
	} else {
		unknown("sync_completed_sectors", md.Path("sync_completed"), err)
	}
	if b, err := d.readFile(md.Path("sync_speed")); err == nil {
		if h.SyncSpeedBytesPerSecond, err = parseMDSyncSpeed(b); err != nil {
			unknown("sync_speed_bytes_per_second", md.Path("sync_speed"), err)
		}
	} else {
		unknown("sync_speed_bytes_per_second", md.Path("sync_speed"), err)
	}
	if b, err := d.readFile(md.Path("mismatch_cnt")); err == nil {
		if n, err := parseSysfsUint(b); err == nil {
			h.MismatchSectors = proto.Uint64(n)
		} else {
			unknown("mismatch_sectors", md.Path("mismatch_cnt"), err)
		}
	} else {
		unknown("mismatch_sectors", md.Path("mismatch_cnt"), err)
	}
	// Kernels before 3.12 have no last_sync_action; "none" until an
	// action has run.
	if s, err := d.readMDWordFile(md.Path("last_sync_action")); err == nil {
		if s != "none" {
			h.LastSyncAction = s
		}
	} else {
		unknown("last_sync_action", md.Path("last_sync_action"), err)
	}
}

// readMDMembers reads every member md lists (dev-* directories), faulty
// ones included: a member the kernel failed stays listed until it is
// removed, and is counted there, not by its absence.
func (d *discoverer) readMDMembers(l *plumblinev1.Layer, md root) []*plumblinev1.RaidMember {
	ents, err := os.ReadDir(string(md))
	if err != nil {
		addUnknown(l, "raid_health.members", d.reason(string(md), err))
		return nil
	}
	d.recDir(string(md))
	var out []*plumblinev1.RaidMember
	for _, e := range ents {
		name, ok := strings.CutPrefix(e.Name(), "dev-")
		if !ok || !e.IsDir() {
			continue
		}
		if _, err := parseSysfsString([]byte(name)); err != nil {
			addUnknown(l, "raid_health.members", fmt.Sprintf("%s: member name %v", d.rel(md.Path(e.Name())), err))
			continue
		}
		if len(out) == maxMDMembers {
			addUnknown(l, "raid_health.members", fmt.Sprintf("%s lists more than %d members; the rest are not read", d.rel(string(md)), maxMDMembers))
			break
		}
		out = append(out, d.readMDMember(l, md.Sub(e.Name()), name))
	}
	return out
}

// readMDMember reads one member's state, slot, errors and bad blocks.
func (d *discoverer) readMDMember(l *plumblinev1.Layer, dir root, name string) *plumblinev1.RaidMember {
	m := &plumblinev1.RaidMember{Device: name}
	field := func(f string) string { return "raid_health.members[" + name + "]." + f }
	b, err := d.readFile(dir.Path("state"))
	if err == nil {
		m.State, err = parseMDMemberState(b)
	}
	if err != nil {
		addUnknown(l, field("state"), d.reason(dir.Path("state"), err))
	}
	b, err = d.readFile(dir.Path("slot"))
	if err == nil {
		var slot uint32
		switch slot, err = parseMDSlot(b); {
		case err == nil:
			m.Slot = proto.Uint32(slot)
		case errors.Is(err, errMDNone):
			err = nil
		}
	}
	if err != nil {
		addUnknown(l, field("slot"), d.reason(dir.Path("slot"), err))
	}
	b, err = d.readFile(dir.Path("errors"))
	if err == nil {
		m.Errors, err = parseSysfsUint(b)
	}
	if err != nil {
		addUnknown(l, field("errors"), d.reason(dir.Path("errors"), err))
	}
	// bad_blocks came with kernel 3.1; older kernels keep no list.
	b, err = d.readFileLimit(dir.Path("bad_blocks"), maxBadBlocksBytes)
	if err == nil {
		m.BadBlocks, m.BadBlockSectors, err = parseMDBadBlocks(b)
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		addUnknown(l, field("bad_blocks"), d.reason(dir.Path("bad_blocks"), err))
	}
	return m
}
