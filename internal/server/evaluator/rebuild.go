package evaluator

import (
	"time"

	"github.com/plumbline/plumbline/internal/histogram"
	"github.com/plumbline/plumbline/internal/server/baseline"
	"github.com/plumbline/plumbline/internal/server/store"
)

// Rebuild-aware baselines: a run the agent marked as made while an md
// array under its volume was resyncing, recovering or reshaping
// (ProbeResult.array_activity) is not fed to the volume's detector — it
// neither moves the degraded state nor enters the history — and the
// volume's state says "rebuilding, 43% done" with the array, action, speed
// and time left, until a later run comes without the mark. Its latency
// still goes into the volume's cumulative histogram (the latency series
// show what the probes saw). A check or repair is judged as usual.

// rebuildAt is a volume's rebuild as its latest marked run said it.
type rebuildAt struct {
	rebuild baseline.Rebuild
	at      time.Time // that run's start
}

// rebuildOf is the rebuild a run's mark names: the least advanced of the
// arrays that rebuild, or false when none does.
func rebuildOf(r *store.ProbeRun) (baseline.Rebuild, bool) {
	var out baseline.Rebuild
	found := false
	for _, a := range r.ArrayActivity {
		if !baseline.IsRebuild(a.Action) {
			continue
		}
		rb := baseline.Rebuild{Device: a.Device, Action: a.Action, DoneSectors: a.DoneSectors, TotalSectors: a.TotalSectors, SpeedBytesPerSecond: a.SpeedBytesPerSecond}
		if !found || lessAdvanced(rb, out) {
			out, found = rb, true
		}
	}
	return out, found
}

// lessAdvanced orders rebuilds by progress, an unknown progress first.
func lessAdvanced(a, b baseline.Rebuild) bool {
	pa, oka := a.Progress()
	pb, okb := b.Progress()
	if oka != okb {
		return !oka
	}
	return pa < pb
}

// noteRebuild notes what a marked run says of its volume's rebuild, any
// run the agent marked: one the busy guard skipped (a rebuild keeps the
// disks busy) says so as well as one that did I/O. A late run (older than
// the volume's last marked one) changes nothing.
func (e *Evaluator) noteRebuild(r *store.ProbeRun) {
	rb, ok := rebuildOf(r)
	if !ok {
		return
	}
	if e.rebuilds == nil {
		e.rebuilds, e.rebuildsTouched = map[volKey]rebuildAt{}, map[volKey]bool{}
	}
	vk := volKey{r.AgentID, r.MountPoint}
	cur, had := e.rebuilds[vk]
	if had && r.StartedAt.Before(cur.at) {
		return
	}
	rb.Since = r.StartedAt
	if had && cur.rebuild.Device == rb.Device && cur.rebuild.Action == rb.Action {
		rb.Since = cur.rebuild.Since
	}
	e.rebuilds[vk] = rebuildAt{rb, r.StartedAt}
	e.rebuildsTouched[vk] = true
}

// rebuildRun reports whether run r, which did I/O, is a rebuild's run,
// kept from the detector (its latency h goes into the cumulative
// histogram only). A run without the mark, no older than the volume's last
// marked run, ends the rebuild: the agent saw no sync action at its start
// or its end.
func (e *Evaluator) rebuildRun(r *store.ProbeRun, h *histogram.Histogram) bool {
	if _, ok := rebuildOf(r); ok {
		e.mergeOnly(r, h)
		return true
	}
	vk := volKey{r.AgentID, r.MountPoint}
	if cur, had := e.rebuilds[vk]; had && !r.StartedAt.Before(cur.at) {
		delete(e.rebuilds, vk)
		e.rebuildsTouched[vk] = true
	}
	return false
}

// mergeOnly adds a rebuild's run to its volume and kind's cumulative
// histogram without judging it.
func (e *Evaluator) mergeOnly(r *store.ProbeRun, h *histogram.Histogram) {
	k := key{volKey{r.AgentID, r.MountPoint}, r.Kind}
	en := e.entries[k]
	if en == nil {
		d, _ := baseline.NewDetector(e.opts.Config)
		// A volume first seen during a rebuild: learning, its history
		// empty until the rebuild ends.
		en = &entry{det: d, hist: &histogram.Histogram{}, row: store.ProbeBaseline{AgentID: r.AgentID, MountPoint: r.MountPoint, Kind: r.Kind,
			Status: string(baseline.Learning)}}
		e.entries[k] = en
	}
	if err := en.hist.Merge(h); err != nil {
		e.opts.Logger.Warn("probe run left out of the volume's latency histogram", "agent", r.AgentID, "mount_point", r.MountPoint,
			"kind", r.Kind, "sequence", r.Sequence, "err", err)
		return
	}
	if r.StartedAt.After(en.row.LastRun) {
		en.row.LastRun = r.StartedAt
	}
	en.dirty = true
}

// addRebuildVolumes adds the volumes whose rebuild started, moved on or
// ended since the last call to vols, the volumes to summarise.
func (e *Evaluator) addRebuildVolumes(vols map[volKey]bool) {
	for vk := range e.rebuildsTouched {
		vols[vk] = true
		delete(e.rebuildsTouched, vk)
	}
}

// withRebuild says a rebuilding volume's state: rebuilding, with the
// rebuild first in the reason (and what the kinds say after it).
func (e *Evaluator) withRebuild(st *store.BaselineState, vk volKey) {
	rb, ok := e.rebuilds[vk]
	if !ok {
		return
	}
	st.State = string(baseline.Rebuilding)
	reason := rb.rebuild.String()
	if st.Reason != "" {
		reason += "; " + st.Reason
	}
	st.Reason = reason
}
