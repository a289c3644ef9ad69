package histogram

import (
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestFracBoundsArePowersOfTwo(t *testing.T) {
	t.Parallel()
	for k, b := range fracBounds {
		want := math.Exp2(float64(k)/bucketsPerPowerOfTwo) / 2
		if d := math.Abs(b - want); d > 3*(math.Nextafter(want, 2)-want) {
			t.Errorf("fracBounds[%d] = %v, want 2^(%d/8)/2 = %v (off by more than 3 ulp)", k, b, k, want)
		}
	}
	// client_golang's literal for 1/sqrt(2) (schema 1 and 3).
	if fracBounds[4] != 0.7071067811865475 {
		t.Errorf("fracBounds[4] = %v, want 0.7071067811865475", fracBounds[4])
	}
}

func TestIndexBoundaries(t *testing.T) {
	t.Parallel()
	tests := []struct {
		v    float64
		want int32
	}{
		{1, 0},    // 2^0 is the upper bound of bucket 0
		{2, 8},    // 2^1 upper bound of bucket 8
		{0.5, -8}, // 2^-1
		{math.Nextafter(1, 2), 1},
		{math.Nextafter(1, 0), 0},
		{1.0905077326652577, 1},
		{0.001, -79}, // 1 ms: 2^(-80/8) = 2^-10 = 0.0009765625 < 0.001 <= 2^(-79/8)
		{0.0009765625, -80},
	}
	for _, tt := range tests {
		if got := Index(tt.v); got != tt.want {
			t.Errorf("Index(%v) = %d, want %d", tt.v, got, tt.want)
		}
	}
}

// Every value must lie inside the bounds of the bucket Index gives it.
func TestIndexWithinBounds(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for range 100000 {
		v := math.Exp2(r.Float64()*80 - 60) // 1e-18 s .. 1e6 s
		i := Index(v)
		if !(LowerBound(i) < v && v <= UpperBound(i)) {
			t.Fatalf("Index(%v) = %d, but bucket is (%v, %v]", v, i, LowerBound(i), UpperBound(i))
		}
	}
	for i := int32(-300); i < 300; i++ {
		if got := Index(UpperBound(i)); got != i {
			t.Errorf("Index(UpperBound(%d) = %v) = %d", i, UpperBound(i), got)
		}
		if got := Index(math.Nextafter(UpperBound(i), math.Inf(1))); got != i+1 {
			t.Errorf("Index(just above UpperBound(%d)) = %d, want %d", i, got, i+1)
		}
	}
}

func observeAll(ds []time.Duration) *Histogram {
	h := &Histogram{}
	for _, d := range ds {
		h.Observe(d)
	}
	return h
}

func randomDurations(r *rand.Rand, n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		// log-uniform between 1 µs and 10 s, plus some zeros
		if r.IntN(100) == 0 {
			continue
		}
		out[i] = time.Duration(math.Exp(r.Float64()*math.Log(1e7)) * 1e3)
	}
	return out
}

func TestMergeIsExact(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	for trial := range 50 {
		a := randomDurations(r, r.IntN(2000))
		b := randomDurations(r, r.IntN(2000))
		ha, hb := observeAll(a), observeAll(b)
		whole := observeAll(append(append([]time.Duration{}, a...), b...))
		merged := &Histogram{}
		merged.Merge(ha)
		merged.Merge(hb)
		if !merged.Equal(whole) {
			t.Fatalf("trial %d: merge differs from one run over both sets:\n%s", trial,
				cmp.Diff(whole.Snapshot(), merged.Snapshot()))
		}
		// Order does not matter either.
		other := &Histogram{}
		other.Merge(hb)
		other.Merge(ha)
		if !other.Equal(whole) {
			t.Fatalf("trial %d: merge(b, a) differs", trial)
		}
	}
}

// A merge whose sum or counts would overflow changes nothing and says so
// (issue 11: the sum wrapped negative and the series vanished).
func TestMergeOverflow(t *testing.T) {
	t.Parallel()
	big := time.Duration(math.MaxInt64/2 + 1)
	h := observeAll([]time.Duration{big})
	before := h.Snapshot()
	if err := h.Merge(observeAll([]time.Duration{big})); !errors.Is(err, ErrOverflow) {
		t.Fatalf("Merge of two sums of 2^62 ns = %v, want ErrOverflow", err)
	}
	if d := cmp.Diff(before, h.Snapshot()); d != "" {
		t.Fatalf("a failed Merge changed the histogram:\n%s", d)
	}
	full, err := FromSnapshot(Snapshot{Schema: Schema, ZeroCount: math.MaxUint64, Count: math.MaxUint64})
	if err != nil {
		t.Fatal(err)
	}
	if err := full.Merge(observeAll([]time.Duration{0})); !errors.Is(err, ErrOverflow) {
		t.Fatalf("Merge past 2^64-1 observations = %v, want ErrOverflow", err)
	}
	if err := h.Merge(observeAll([]time.Duration{time.Second})); err != nil || h.Count() != 2 {
		t.Fatalf("Merge that fits = %v (count %d), want it merged", err, h.Count())
	}
}

func TestMergeEmpty(t *testing.T) {
	t.Parallel()
	h := observeAll([]time.Duration{5 * time.Millisecond})
	h.Merge(&Histogram{})
	h.Merge(nil)
	e := &Histogram{}
	e.Merge(h)
	if !e.Equal(h) || e.Min() != 5*time.Millisecond || e.Max() != 5*time.Millisecond {
		t.Errorf("merge into empty = %+v, want %+v", e.Snapshot(), h.Snapshot())
	}
}

func TestExactStats(t *testing.T) {
	t.Parallel()
	h := observeAll([]time.Duration{3, 1, 2, 0, 10})
	want := Snapshot{Schema: 3, ZeroThreshold: ZeroThreshold, ZeroCount: 1, Count: 5, SumNanos: 16, MinNanos: 0, MaxNanos: 10,
		Buckets: []Bucket{{Index(1e-9), 1}, {Index(2e-9), 1}, {Index(3e-9), 1}, {Index(1e-8), 1}}}
	if diff := cmp.Diff(want, h.Snapshot()); diff != "" {
		t.Errorf("Snapshot() mismatch (-want +got):\n%s", diff)
	}
	if h.Mean() != 3 {
		t.Errorf("Mean() = %v, want 3ns", h.Mean())
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	t.Parallel()
	h := observeAll(randomDurations(rand.New(rand.NewPCG(5, 6)), 5000))
	b, err := json.Marshal(h.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	var s Snapshot
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	back, err := FromSnapshot(s)
	if err != nil {
		t.Fatal(err)
	}
	if !back.Equal(h) {
		t.Errorf("round trip differs:\n%s", cmp.Diff(h.Snapshot(), back.Snapshot()))
	}
	s.Count++
	if _, err := FromSnapshot(s); err == nil {
		t.Error("FromSnapshot accepted a count that the buckets do not add up to")
	}
	s.Count--
	s.Schema = 2
	if _, err := FromSnapshot(s); err == nil {
		t.Error("FromSnapshot accepted schema 2")
	}
}

func TestSpans(t *testing.T) {
	t.Parallel()
	h := &Histogram{}
	// indexes 0, 1, 3 (gap of one: same span), 10 (gap of six: new span)
	for _, i := range []int32{0, 1, 1, 3, 10, 10, 10} {
		h.Observe(time.Duration(UpperBound(i) * 1e9))
	}
	// Durations are integer nanoseconds, so recompute the indexes they land in.
	var idx []int32
	for _, b := range h.Buckets() {
		idx = append(idx, b.Index)
	}
	spans, deltas := h.Spans()
	// Expand spans+deltas back into (index, count) and compare with Buckets.
	var got []Bucket
	var at int32
	var count int64
	d := 0
	for n, s := range spans {
		if n == 0 {
			at = s.Offset
		} else {
			at += s.Offset
		}
		for range s.Length {
			count += deltas[d]
			d++
			if count != 0 {
				got = append(got, Bucket{Index: at, Count: uint64(count)})
			}
			at++
		}
	}
	if diff := cmp.Diff(h.Buckets(), got); diff != "" {
		t.Errorf("Spans() does not decode to Buckets() (indexes %v): %s", idx, diff)
	}
	if len(spans) != 2 {
		t.Errorf("Spans() = %v, want 2 spans", spans)
	}
}

func BenchmarkObserve(b *testing.B) {
	h := &Histogram{}
	d := 123456 * time.Nanosecond
	for b.Loop() {
		h.Observe(d)
		d += 7
	}
}
