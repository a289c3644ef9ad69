package replay

import (
	"fmt"
	"testing"
	"time"

	"github.com/plumbline/plumbline/internal/evaluator"
	"github.com/plumbline/plumbline/internal/histogram"
)

func countOver(h *histogram.Histogram, bar float64) int {
	n := 0
	for _, b := range h.Buckets() {
		if histogram.LowerBound(b.Index) >= bar {
			n += int(b.Count)
		}
	}
	return n
}

func TestZZAnalysis(t *testing.T) {
	for _, rec := range loadRecordings(t) {
		for _, k := range kinds {
			w := newWalker(rec.Atoms[k], 3*time.Minute, 1, 0)
			const runs = 3360 * 2
			mults := []float64{4, 6, 8, 16}
			hits := make([][]int, len(mults))
			var meds []float64
			var global float64
			for i := range runs {
				h := w.next(5)
				m := evaluator.Median(h)
				meds = append(meds, m)
				if i == 100 {
					global = m
				}
				for j, mu := range mults {
					hits[j] = append(hits[j], countOver(h, mu*m))
				}
			}
			_ = global
			for j, mu := range mults {
				var any, tot, w4ge2, w4ge3, w4ge4, max4 int
				for i, c := range hits[j] {
					if c > 0 {
						any++
					}
					tot += c
					if i >= 3 {
						s := 0
						for q := i - 3; q <= i; q++ {
							s += min(hits[j][q], 2)
						}
						if s >= 2 {
							w4ge2++
						}
						if s >= 3 {
							w4ge3++
						}
						if s >= 4 {
							w4ge4++
						}
						max4 = max(max4, s)
					}
				}
				fmt.Printf("%s %s x%g: runs with slow %.4f, rate/op %.5f, 4-run(cap2) >=2 %d >=3 %d >=4 %d max %d\n", rec.Source, k, mu, float64(any)/runs, float64(tot)/runs/50, w4ge2, w4ge3, w4ge4, max4)
			}
		}
	}
}
