package align

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/plumbline/plumbline/internal/vocab"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// RAID health rules: md's own statement of an array's and its members'
// state (Layer.raid_health) becomes findings. They say nothing about
// alignment: they never change the verdict (healthRules), only add to
// what a volume's judgement reports.
const (
	RuleRAIDMemberFaulty  = "raid-member-faulty"
	RuleRAIDMemberRemoved = "raid-member-removed"
	RuleRAIDMemberBlocked = "raid-member-blocked"
	RuleRAIDMemberErrors  = "raid-member-errors"
	RuleRAIDDegraded      = "raid-degraded"
	RuleRAIDNotRunning    = "raid-not-running"
	RuleRAIDReadOnly      = "raid-read-only"
	RuleRAIDRebuilding    = "raid-rebuilding"
	RuleRAIDCheckRunning  = "raid-check-running"
	RuleRAIDMismatches    = "raid-mismatches"
)

// healthRules are the rules that judge health, not alignment.
var healthRules = [...]string{
	RuleRAIDMemberFaulty, RuleRAIDMemberRemoved, RuleRAIDMemberBlocked, RuleRAIDMemberErrors,
	RuleRAIDDegraded, RuleRAIDNotRunning, RuleRAIDReadOnly, RuleRAIDRebuilding,
	RuleRAIDCheckRunning, RuleRAIDMismatches,
}

// IsHealthRule says whether rule judges RAID health rather than alignment:
// its findings do not make a volume misaligned.
func IsHealthRule(rule string) bool { return slices.Contains(healthRules[:], rule) }

// raidHealth adds the health findings of every md layer of v, once per
// array.
func raidHealth(f *findings, v *plumblinev1.Volume) {
	seen := map[string]bool{}
	for _, l := range v.GetLayers() {
		h := l.GetRaidHealth()
		if h == nil || seen[l.GetDevice()] {
			continue
		}
		seen[l.GetDevice()] = true
		a := arrayOf(l)
		a.state(f)
		a.members(f)
		if a.running() {
			a.degraded(f)
		}
		a.sync(f)
		a.mismatches(f)
	}
}

// array is one md layer under judgement, with its members sorted out.
type array struct {
	l    *plumblinev1.Layer
	h    *plumblinev1.RaidHealth
	name string // "md0 (raid5)"
	// faulty are the listed members md has failed; spares those in no
	// role; held the roles (slots) a working member fills.
	faulty, spares []string
	held           map[uint32]bool
	inSync         int
	// slotsKnown is false when a working member's role is not known:
	// empty slots cannot be counted.
	slotsKnown bool
}

func arrayOf(l *plumblinev1.Layer) *array {
	a := &array{l: l, h: l.GetRaidHealth(), held: map[uint32]bool{}, slotsKnown: true}
	a.name = l.GetDevice()
	if lv := l.GetRaidLevel(); lv != "" {
		a.name += " (" + lv + ")"
	}
	for _, m := range a.h.GetMembers() {
		st := m.GetState()
		switch {
		case slices.Contains(st, vocab.MDFaulty):
			a.faulty = append(a.faulty, m.GetDevice())
		case slices.Contains(st, vocab.MDJournal):
		case m.Slot != nil:
			a.held[m.GetSlot()] = true
			if slices.Contains(st, vocab.MDInSync) {
				a.inSync++
			}
		case slices.Contains(st, vocab.MDSpare):
			a.spares = append(a.spares, m.GetDevice())
		default:
			a.slotsKnown = false
		}
	}
	return a
}

// running says whether the array is started: an inactive array's members
// hold no roles (each reads spare) until it runs, so no role is empty.
func (a *array) running() bool {
	st := a.h.GetArrayState()
	return st != vocab.MDInactive && st != vocab.MDClear
}

// emptySlots lists the roles below raid_disks no working member fills;
// ok is false when that cannot be told.
func (a *array) emptySlots() (empty []uint32, ok bool) {
	n := a.l.GetRaidDisks()
	if n == 0 || !a.slotsKnown || len(a.h.GetMembers()) == 0 || !a.running() {
		return nil, false
	}
	for s := uint32(0); s < n && len(empty) < 64; s++ {
		if !a.held[s] {
			empty = append(empty, s)
		}
	}
	return empty, true
}

// state judges md/array_state.
func (a *array) state(f *findings) {
	dev := a.l.GetDevice()
	switch a.h.GetArrayState() {
	case vocab.MDInactive, vocab.MDClear:
		f.add(RuleRAIDNotRunning, Critical,
			fmt.Sprintf("md array %s is %s: it is not running and no I/O reaches it (assembly stopped short, usually for want of members)", a.name, a.h.GetArrayState()),
			fmt.Sprintf("look at mdadm --detail /dev/%s and mdadm --examine of each member; start it with mdadm --run /dev/%s if enough members are present, else re-assemble (mdadm --assemble --scan) once the missing disks are back", dev, dev))
	case vocab.MDBroken:
		f.add(RuleRAIDNotRunning, Critical,
			fmt.Sprintf("md array %s is broken: a member it cannot do without is missing, and reads of the data on it fail", a.name),
			fmt.Sprintf("bring the missing member back (cabling, controller, dmesg), then mdadm --stop /dev/%s and re-assemble; if the disk is gone the data on it is too: restore from backup", dev))
	case vocab.MDReadonly:
		f.add(RuleRAIDReadOnly, Warning,
			fmt.Sprintf("md array %s is read-only: every write to it fails", a.name),
			fmt.Sprintf("if nobody set it read-only on purpose: mdadm --readwrite /dev/%s", dev))
	case vocab.MDReadAuto:
		f.add(RuleRAIDReadOnly, Warning,
			fmt.Sprintf("md array %s is auto-read-only (read-auto): it turns writable at its first write, and a pending resync or recovery does not start until then", a.name),
			fmt.Sprintf("mdadm --readwrite /dev/%s starts it now (and any pending resync or recovery with it)", dev))
	}
}

// members judges each listed member's state, errors and bad blocks, and
// the roles no listed member fills.
func (a *array) members(f *findings) {
	dev := a.l.GetDevice()
	for _, name := range a.faulty {
		f.add(RuleRAIDMemberFaulty, Critical,
			fmt.Sprintf("member %s of md array %s is faulty: md failed it and no longer reads or writes it; it stays listed until it is removed, so a count of listed members misses it (array_state still reads %s)", name, a.name, orWord(a.h.GetArrayState(), "unknown")),
			fmt.Sprintf("mdadm /dev/%s --remove /dev/%s, replace the disk (check smartctl -a and dmesg first), then mdadm /dev/%s --add the new one; recovery starts by itself", dev, name, dev))
	}
	if empty, ok := a.emptySlots(); ok && len(empty) > len(a.faulty) {
		gone := len(empty) - len(a.faulty)
		f.add(RuleRAIDMemberRemoved, Critical,
			fmt.Sprintf("md array %s has %d roles and %d of them (slots %s) have no member at all: %d member(s) were removed or never came back, and md lists nothing for them", a.name, a.l.GetRaidDisks(), len(empty), slotList(empty), gone),
			fmt.Sprintf("find the missing disk(s) (mdadm --detail /dev/%s, dmesg); re-add a returning one with mdadm /dev/%s --re-add, or add a replacement with mdadm /dev/%s --add", dev, dev, dev))
	}
	for _, m := range a.h.GetMembers() {
		a.member(f, m)
	}
}

// member judges one member's blocked state and its error history.
func (a *array) member(f *findings, m *plumblinev1.RaidMember) {
	st, name := m.GetState(), m.GetDevice()
	if slices.Contains(st, vocab.MDBlocked) {
		f.add(RuleRAIDMemberBlocked, Critical,
			fmt.Sprintf("member %s of md array %s is blocked: writes to the array wait until md (or its metadata handler) records a failure on it", name, a.name),
			fmt.Sprintf("look at dmesg for %s; if mdmon or mdadm --monitor is not running for external metadata, start it; mdadm /dev/%s --fail /dev/%s releases the writes", name, a.l.GetDevice(), name))
	}
	var what []string
	if n := m.GetErrors(); n > 0 {
		what = append(what, fmt.Sprintf("%d read error(s) corrected", n))
	}
	if n := m.GetBadBlocks(); n > 0 {
		what = append(what, fmt.Sprintf("%d bad-block range(s) (%d sectors) recorded, whose data now lives only on the other members", n, m.GetBadBlockSectors()))
	}
	if slices.Contains(st, vocab.MDWriteError) {
		what = append(what, "a write error seen")
	}
	if slices.Contains(st, vocab.MDWantReplacement) {
		what = append(what, "marked for replacement")
	}
	if len(what) == 0 || slices.Contains(st, vocab.MDFaulty) {
		return
	}
	f.add(RuleRAIDMemberErrors, Warning,
		fmt.Sprintf("member %s of md array %s is still in use but has %s: a disk that is starting to fail", name, a.name, strings.Join(what, ", ")),
		fmt.Sprintf("check smartctl -a /dev/%s and plan its replacement: add a spare and mdadm /dev/%s --replace /dev/%s copies it while the array keeps its redundancy", name, a.l.GetDevice(), name))
}

func slotList(s []uint32) string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = fmt.Sprint(v)
	}
	return strings.Join(out, ", ")
}

// progress describes a running sync action: "43% done (… of … sectors),
// 120 MiB/s, about 1h5m left", or that it waits.
func progress(h *plumblinev1.RaidHealth) string {
	if h.GetSyncDelayed() {
		return "delayed: it waits for another array on the same disks, or for sync_max"
	}
	done, total := h.GetSyncCompletedSectors(), h.GetSyncTotalSectors()
	if total == 0 {
		return "progress not reported"
	}
	s := fmt.Sprintf("%s done (%s of %s)", pct(float64(done)/float64(total)), human(sectorBytes(done)), human(sectorBytes(total)))
	if sp := h.GetSyncSpeedBytesPerSecond(); sp > 0 {
		secs := float64(total-done) * 512 / float64(sp)
		if secs > maxETA.Seconds() {
			return s + fmt.Sprintf(", %s/s, more than %s left", human(sp), maxETA)
		}
		s += fmt.Sprintf(", %s/s, %s left", human(sp), eta(time.Duration(secs*float64(time.Second))))
	}
	return s
}

// eta writes a time left in minutes: "about 1h23m", "under a minute".
func eta(d time.Duration) string {
	if d < time.Minute {
		return "under a minute"
	}
	return "about " + strings.TrimSuffix(d.Round(time.Minute).String(), "0s")
}

// maxETA bounds the time left a message states.
const maxETA = 1000 * time.Hour

// sectorBytes is n 512-byte sectors in bytes, saturated at 2^64-1.
func sectorBytes(n uint64) uint64 {
	if n > ^uint64(0)/512 {
		return ^uint64(0)
	}
	return n * 512
}

// degraded judges md/degraded (or, without it, the roles no in-sync
// member fills): how much redundancy is left.
func (a *array) degraded(f *findings) {
	n := a.l.GetRaidDisks()
	var d uint32
	switch {
	case a.h.Degraded != nil:
		d = a.h.GetDegraded()
	case n > 0 && a.slotsKnown && len(a.h.GetMembers()) > 0 && uint32(a.inSync) < n && !noRedundancy(a.l.GetRaidLevel()):
		d = n - uint32(a.inSync)
	}
	if d == 0 {
		return
	}
	msg := fmt.Sprintf("md array %s is degraded: %d of its %d members missing or not in sync, %s", a.name, d, n, redundancyLeft(a.l.GetRaidLevel(), n, d))
	switch act := a.h.GetSyncAction(); {
	case act == vocab.MDRecover || act == vocab.MDResync:
		msg += "; recovery is running, " + progress(a.h)
	case act == vocab.MDFrozen:
		msg += "; recovery is frozen (sync_action reads frozen) and will not start by itself"
	case len(a.spares) == 0:
		msg += "; no spare is listed, so no recovery can start"
	}
	dev := a.l.GetDevice()
	fix := fmt.Sprintf("replace the failed disk: mdadm /dev/%s --add /dev/sdX starts recovery; keep heavy maintenance (backups, checks) off the array until it is in sync", dev)
	if a.h.GetSyncAction() == vocab.MDFrozen {
		fix = fmt.Sprintf("echo idle > /sys/block/%s/md/sync_action lets recovery start; ", dev) + fix
	}
	f.add(RuleRAIDDegraded, Critical, msg, fix)
}

// noRedundancy says whether level keeps no second copy (a missing member
// is "broken", not degraded).
func noRedundancy(level string) bool { return level == "raid0" || level == "linear" }

// redundancyLeft says what one more failure would do.
func redundancyLeft(level string, n, d uint32) string {
	switch level {
	case "raid1":
		if d+1 >= n {
			return "so one copy is left: the next failure loses the data"
		}
		return fmt.Sprintf("so %d copies are left", n-d)
	case "raid4", "raid5":
		return "so no redundancy is left: the next failure, or an unreadable sector on another member during recovery, loses data"
	case "raid6":
		if d == 1 {
			return "so one parity is left: the next failure leaves no redundancy"
		}
		return "so no redundancy is left: the next failure, or an unreadable sector during recovery, loses data"
	case "raid10":
		return "so some chunks have one copy left: the failure of their other copy loses data"
	}
	return "so redundancy is reduced"
}

// sync judges a running sync action: a rebuild (resync, recover, or a
// reshape the geometry does not already show) or a check.
func (a *array) sync(f *findings) {
	act, dev := a.h.GetSyncAction(), a.l.GetDevice()
	switch {
	case act == vocab.MDReshape && a.l.GetReshape() != nil:
		// reshapes() says it, with this progress.
	case vocab.MDSyncRebuilds(act):
		f.add(RuleRAIDRebuilding, Warning,
			fmt.Sprintf("md array %s is running %s: %s; the array is slower until it ends, and the data it has not reached yet is not redundant", a.name, syncWord(act), progress(a.h)),
			fmt.Sprintf("let it finish; it yields to other I/O down to /proc/sys/dev/raid/speed_limit_min (raise it to finish sooner, at the cost of latency); watch /proc/mdstat or /sys/block/%s/md/sync_completed", dev))
	case vocab.MDSyncScrubs(act):
		f.add(RuleRAIDCheckRunning, Info,
			fmt.Sprintf("md array %s is running a %s: %s; it reads every member and slows the array while it runs", a.name, act, progress(a.h)),
			fmt.Sprintf("nothing to do; to pause it outside quiet hours: echo idle > /sys/block/%s/md/sync_action", dev))
	}
}

func syncWord(act string) string {
	switch act {
	case vocab.MDRecover:
		return "a recovery (rebuilding a member)"
	case vocab.MDResync:
		return "a resync (making its copies consistent)"
	case vocab.MDReshape:
		return "a reshape"
	}
	return act
}

// mismatches judges md/mismatch_cnt after (or during) a check or repair.
func (a *array) mismatches(f *findings) {
	n := a.h.GetMismatchSectors()
	act := a.h.GetLastSyncAction()
	if vocab.MDSyncScrubs(a.h.GetSyncAction()) {
		act = a.h.GetSyncAction()
	}
	if n == 0 || !vocab.MDSyncScrubs(act) {
		return
	}
	dev := a.l.GetDevice()
	if act == vocab.MDRepair {
		f.add(RuleRAIDMismatches, Warning,
			fmt.Sprintf("the last repair of md array %s rewrote %d sectors whose copies or parity disagreed", a.name, n),
			fmt.Sprintf("run a check (echo check > /sys/block/%s/md/sync_action) to confirm it now reads 0, and look at the members' health (smartctl, dmesg): silent disagreement has a cause", dev))
		return
	}
	f.add(RuleRAIDMismatches, Warning,
		fmt.Sprintf("a check of md array %s found %d sectors whose copies or parity disagree: reads of them may return either version", a.name, n),
		fmt.Sprintf("find the cause first (smartctl -a on each member, dmesg, an unclean shutdown); then echo repair > /sys/block/%s/md/sync_action rewrites them (from the first copy or recomputed parity, which is not always the right one)", dev))
}
