package ingest

import (
	"math"
	"slices"

	"github.com/plumbline/plumbline/internal/server/store"
	"github.com/plumbline/plumbline/internal/vocab"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// arraysOf are the md arrays below a volume whose raid_disks the kernel
// stated (sysfs), with how many of those disks have no working member:
// part of the judged record (inventory_arrays), shown as
// plumbline_volume_raid_missing_members. When the agent sent md's own
// health (Layer.raid_health) the count is of the roles no in-sync member
// fills, so a member md failed but still lists counts as missing, as does
// one removed; without it, of the roles no listed member fills.
func arraysOf(v *plumblinev1.Volume) []store.RAIDArray {
	var out []store.RAIDArray
	seen := map[string]bool{}
	for _, l := range v.GetLayers() {
		if vocab.LayerKind(l.GetKind()) != vocab.LayerRAID || vocab.Source(l.GetSources()["raid_disks"]) != vocab.SourceSysfs || l.GetRaidDisks() == 0 || seen[l.GetDevice()] {
			continue
		}
		seen[l.GetDevice()] = true
		working := len(l.GetBelow())
		if h := l.GetRaidHealth(); h != nil {
			working = inSyncRoles(h)
		}
		missing := int(l.GetRaidDisks()) - working
		out = append(out, store.RAIDArray{Device: l.GetDevice(), Missing: max(missing, 0), Sync: arraySync(l.GetRaidHealth())})
	}
	return out
}

// inSyncRoles counts the roles of an array that an in-sync member fills:
// not faulty, not a spare, not a journal, not a replacement still being
// rebuilt (it is not in_sync until it is done). A role two in-sync members
// fill (a finished replacement beside its original) counts once.
func inSyncRoles(h *plumblinev1.RaidHealth) int {
	slots := map[uint32]bool{}
	n := 0
	for _, m := range h.GetMembers() {
		st := m.GetState()
		if !slices.Contains(st, vocab.MDInSync) || slices.ContainsFunc(st, func(s string) bool {
			return s == vocab.MDFaulty || s == vocab.MDSpare || s == vocab.MDJournal
		}) {
			continue
		}
		switch {
		case m.Slot == nil:
			n++
		case !slots[m.GetSlot()]:
			slots[m.GetSlot()] = true
			n++
		}
	}
	return n
}

// arraySync is an array's running sync action as its md health states it
// (zero when none runs, or the agent sent no md health): the exporter's
// sync progress and speed series. Figures beyond int64 (never from md)
// are left out.
func arraySync(h *plumblinev1.RaidHealth) store.ArraySync {
	act := h.GetSyncAction()
	if act == "" || act == vocab.MDIdle || act == vocab.MDFrozen {
		return store.ArraySync{}
	}
	s := store.ArraySync{Action: act}
	if done, total := h.GetSyncCompletedSectors(), h.GetSyncTotalSectors(); total > 0 && total <= math.MaxInt64 && done <= total {
		s.DoneSectors, s.TotalSectors = int64(done), int64(total)
	}
	if bps := h.GetSyncSpeedBytesPerSecond(); bps <= math.MaxInt64 {
		s.SpeedBytesPerSecond = int64(bps)
	}
	return s
}
