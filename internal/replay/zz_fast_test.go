package replay

import (
	"flag"
	"fmt"
	"testing"
	"time"

	"github.com/plumbline/plumbline/internal/baseline"
	"github.com/plumbline/plumbline/internal/evaluator"
	"github.com/plumbline/plumbline/internal/store"
)

var zzCfg = flag.String("zz.cfg", "", "")

func fastReplay(t *testing.T, cfg baseline.Config, seeds int) map[string]map[string]int {
	out := map[string]map[string]int{}
	for _, rec := range loadRecordings(t) {
		sig := map[string]int{}
		for seed := range seeds {
			vols := fleet(rec, 3*time.Minute)
			for vi, v := range vols {
				for ki, k := range kinds {
					atoms := v.Noise.Atoms[k]
					w := newWalker(atoms, 3*time.Minute, uint64(seed)<<16+uint64(vi*len(kinds)+ki+1), v.Offset+ki*len(atoms)/7)
					d, _ := baseline.NewDetector(cfg)
					prev := baseline.Status("")
					n := int(days(7) / (3 * time.Minute))
					for i := range n {
						h := w.next(5)
						r := &store.ProbeRun{ProbeResult: store.ProbeResult{Ops: h.Count(), IOPSCap: replayIOPSCap, Duration: pacedDuration(h, replayIOPSCap)}}
						s := d.ObserveRun(t0.Add(time.Duration(i)*3*time.Minute), evaluator.RunOf(r, h), baseline.Refs{})
						if s.Status == baseline.Degraded && prev != baseline.Degraded {
							sig[string(s.Signal)]++
							if *zzCfg != "" {
								o := d.Of(s.Signal)
								fmt.Printf("  %s %s %s value %.2fms base %.2fms\n", rec.Source, k, s.Signal, o.Value*1e3, o.History.Baseline*1e3)
							}
						}
						prev = s.Status
					}
				}
			}
		}
		out[rec.Source] = sig
	}
	return out
}

func TestZZFast(t *testing.T) {
	_ = 0
	type S = baseline.SignalConfig
	cfgs := []struct {
		name string
		c    baseline.Config
	}{
		{"defaults", baseline.Config{}},
		{"tail6", baseline.Config{Tail: S{Sustain: 6}}},
		{"tail7", baseline.Config{Tail: S{Sustain: 7}}},
	}
	for _, c := range cfgs {
		if *zzCfg != "" && *zzCfg != c.name {
			continue
		}
		start := time.Now()
		fmt.Printf("FAST %-12s %v (%s)\n", c.name, fastReplay(t, c.c, 8), time.Since(start).Round(time.Millisecond))
	}
}
