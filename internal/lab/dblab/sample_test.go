//go:build linux

package dblab

import (
	"testing"
	"time"

	"github.com/plumbline/plumbline/internal/vocab"
)

// Bracket's inner span lies within [from, to] less the guard, its outer
// span around it plus the guard; without samples beyond both ends it says
// so; without a sample inside, the inner delta is empty.
func TestBracket(t *testing.T) {
	t.Parallel()
	k := Key{Location: vocab.LocationData, Op: vocab.DBOpRead}
	t0 := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	var h History
	for i := range 9 { // a sample every 250 ms, the i-th having counted 10·i ops of 1 ms each
		h.Add(Sample{At: t0.Add(time.Duration(i) * 250 * time.Millisecond), Counters: map[Key]Counter{k: {Count: uint64(10 * i), Nanos: float64(10*i) * 1e6}}})
	}
	count := func(ds []Delta) uint64 {
		for _, d := range ds {
			if d.Key == k {
				return d.Count
			}
		}
		return 0
	}
	for _, tc := range []struct {
		name         string
		from, to     time.Duration // after t0
		guard        time.Duration
		inner, outer uint64
		ok           bool
	}{
		{"between samples", 300 * time.Millisecond, 1200 * time.Millisecond, 10 * time.Millisecond, 20, 40, true},    // inner 500–1000, outer 250–1250
		{"on samples, guarded", 500 * time.Millisecond, 1000 * time.Millisecond, 10 * time.Millisecond, 0, 40, true}, // inner 750–750, outer 250–1250
		{"on samples, no guard", 500 * time.Millisecond, 1000 * time.Millisecond, 0, 20, 20, true},
		{"no sample before", 0, 1000 * time.Millisecond, 10 * time.Millisecond, 0, 0, false},
		{"no sample after", 1000 * time.Millisecond, 2000 * time.Millisecond, 10 * time.Millisecond, 0, 0, false},
	} {
		inner, outer, ok, err := h.Bracket(t0.Add(tc.from), t0.Add(tc.to), tc.guard)
		if err != nil || ok != tc.ok || count(inner) != tc.inner || count(outer) != tc.outer {
			t.Errorf("%s: inner %d, outer %d, ok %v, err %v; want %d, %d, %v", tc.name, count(inner), count(outer), ok, err, tc.inner, tc.outer, tc.ok)
		}
	}
}
