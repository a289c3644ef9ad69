//go:build linux

package main

import (
	"math"
	"testing"

	"github.com/plumbline/plumbline/internal/lab/dblab"
)

// A report inside what the views allow over its interval is 0 off; one
// beyond is off by its distance from the nearer bound, in latency or in
// count, whichever is larger.
func TestRangeError(t *testing.T) {
	t.Parallel()
	inner := dblab.Delta{Count: 90, Nanos: 90e6}   // 90 ops, 1 ms each
	outer := dblab.Delta{Count: 110, Nanos: 140e6} // with the ends' ops
	for _, tc := range []struct {
		name  string
		count uint64
		ms    float64 // reported mean
		want  float64
	}{
		{"inside", 100, 1.1, 0},
		{"at the low bound", 100, 90.0 / 110, 0},
		{"latency above", 100, 140.0 / 90 * 1.5, 0.5},
		{"latency below", 100, 90.0 / 110 / 2, 0.5},
		{"count above", 132, 1.1, 0.2},
	} {
		r := reported{count: tc.count, nanos: tc.ms * 1e6 * float64(tc.count), measured: true}
		_, _, e := rangeError(r, inner, outer)
		if math.Abs(e-tc.want) > 1e-9 {
			t.Errorf("%s: error %.4f, want %.4f", tc.name, e, tc.want)
		}
	}
	// No sample inside the interval: no upper bound on the latency.
	if _, hi, e := rangeError(reported{count: 5, nanos: 5e9, measured: true}, dblab.Delta{}, outer); !math.IsInf(hi, 1) || e != 0 {
		t.Errorf("without an inner delta: hi %v, error %v; want +Inf, 0", hi, e)
	}
}
