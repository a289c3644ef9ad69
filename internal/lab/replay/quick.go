package replay

import (
	"fmt"
	"time"

	"github.com/plumbline/plumbline/internal/server/baseline"
	"github.com/plumbline/plumbline/internal/server/evaluator"
	"github.com/plumbline/plumbline/internal/server/store"
)

// Quick replays days of a recording through bare detectors: volumes
// volumes, each walking the recording from its own place (as Run's do)
// for every kind it holds, on sch, each run paced at the agent's IOPS cap
// and judged by a fresh baseline.Detector of cfg against the volume's own
// history alone (what PlumblineVolumeDegraded fires on; no store, no
// cohort, no prior). It returns the degraded transitions by the signal
// that named them. Run is the whole path; Quick is for comparing detector
// settings over many seeds in seconds (bench/tails -noise).
func Quick(rec *Recording, sch Schedule, cfg baseline.Config, volumes int, days float64, seed uint64) (map[baseline.Signal]int, error) {
	if _, err := baseline.NewDetector(cfg); err != nil {
		return nil, err
	}
	if sch.Every <= 0 || sch.Ops < 1 || volumes < 1 || rec.AtomOps < 1 {
		return nil, fmt.Errorf("replay: quick: want a positive schedule, volume count and atom size")
	}
	out := map[baseline.Signal]int{}
	n := int(time.Duration(days*24*float64(time.Hour)) / sch.Every)
	perRun := max(1, (sch.Ops+rec.AtomOps/2)/rec.AtomOps)
	start := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	kinds := rec.Kinds()
	for vi := range volumes {
		for ki, k := range kinds {
			atoms := rec.Atoms[k]
			w := newWalker(atoms, sch.Every, seed<<16+uint64(vi*len(kinds)+ki+1), vi*len(atoms)/volumes+ki*len(atoms)/7)
			d, _ := baseline.NewDetector(cfg)
			prev := baseline.Status("")
			for i := range n {
				h := w.next(perRun)
				r := &store.ProbeRun{ProbeResult: store.ProbeResult{Ops: h.Count(), IOPSCap: replayIOPSCap, Duration: pacedDuration(h, replayIOPSCap)}}
				s := d.ObserveRun(start.Add(time.Duration(i)*sch.Every), evaluator.RunOf(r, h), baseline.Refs{})
				if s.Status == baseline.Degraded && prev != baseline.Degraded {
					out[s.Signal]++
				}
				prev = s.Status
			}
		}
	}
	return out, nil
}
