package replay

import (
	"testing"

	"github.com/plumbline/plumbline/internal/histogram"
)

// TestRecordedTailNoise measures how loud the recorded noise's tails are,
// in the terms of a stall detector that counts slow operations: the share
// of operations at least 16× their 50-op run's median (a 100 ms stall on a
// ~6 ms sas15k op is ~17×) and the share of runs holding one. The lab
// recording's healthy runs hold one in 7–9% of runs; a RAID 1 member
// stalling 3% of its ops (0.75 stalled ops per 50-op run: the mirror
// serves half the reads) in ~57%. "3 of 4 runs" catches that stall within
// 4 runs about half the time, and on 9% noise comes true by chance in
// 0.27% of the runs checked — ~9 a week per volume and kind at 3,360 runs
// a week, before the noise's clustering (README, "Degradation: median,
// tail, mean, rate").
func TestRecordedTailNoise(t *testing.T) {
	t.Parallel()
	for _, rec := range loadRecordings(t) {
		for _, k := range kinds {
			atoms := rec.Atoms[k]
			perRun := max(1, 50/rec.AtomOps)
			var runs, withSlow, ops, slow int
			for i := 0; i+perRun <= len(atoms); i += perRun {
				h := &histogram.Histogram{}
				for _, a := range atoms[i : i+perRun] {
					if err := h.Merge(a.Hist); err != nil {
						t.Fatal(err)
					}
				}
				n := int(h.CountOver(16 * h.Median()))
				runs++
				ops += int(h.Count())
				slow += n
				if n > 0 {
					withSlow++
				}
			}
			perOp, perRunShare := float64(slow)/float64(ops), float64(withSlow)/float64(runs)
			t.Logf("%s %s: %d runs of 50 ops, ops >= 16x their run's median: %.2f%% (%.2f per run), runs holding one: %.1f%%",
				rec.Source, k, runs, 100*perOp, 50*perOp, 100*perRunShare)
			if rec.Source == "lab-sas15k-raid1" && k == "random-read" && perOp < 0.005 {
				t.Errorf("%s %s: %.2f%% of ops >= 16x their run's median, want the recorded noise's >= 0.5%%", rec.Source, k, 100*perOp)
			}
		}
	}
}
