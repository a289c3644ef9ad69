package histogram

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// seconds is d in seconds, as the quantiles are.
func seconds(d time.Duration) float64 { return d.Seconds() }

// relErr is |got/want − 1|.
func relErr(got, want float64) float64 { return math.Abs(got/want - 1) }

func TestQuantileEmpty(t *testing.T) {
	t.Parallel()
	var nilHist *Histogram
	for _, h := range []*Histogram{{}, nilHist} {
		for _, q := range []float64{0, 0.5, 0.99, 1} {
			if got := h.Quantile(q); got != 0 {
				t.Errorf("empty Quantile(%v) = %v, want 0", q, got)
			}
		}
		if got := h.Median(); got != 0 {
			t.Errorf("empty Median() = %v, want 0", got)
		}
		if got := h.CountOver(0); got != 0 {
			t.Errorf("empty CountOver(0) = %d, want 0", got)
		}
	}
}

// The quantile whose rank ends a bucket is that bucket's upper bound,
// exactly; q <= 0 and q >= 1 are the exact extremes.
func TestQuantileAtBucketBounds(t *testing.T) {
	t.Parallel()
	h := &Histogram{}
	for range 50 {
		h.Observe(900 * time.Microsecond) // bucket -80: (2^(-81/8), 2^-10] s
	}
	for range 50 {
		h.Observe(time.Millisecond) // bucket -79
	}
	if Index(0.0009) != -80 || Index(0.001) != -79 {
		t.Fatalf("fixture: 900 µs in bucket %d, 1 ms in %d; want -80, -79", Index(0.0009), Index(0.001))
	}
	tests := []struct {
		q, want float64
	}{
		{0.5, 0x1p-10}, // rank 50 ends bucket -80: its upper bound, 2^-10 s
		{0, 0.0009},    // the minimum
		{-1, 0.0009},
		{1, 0.001}, // the maximum
		{2, 0.001},
	}
	for _, tt := range tests {
		if got := h.Quantile(tt.q); got != tt.want {
			t.Errorf("Quantile(%v) = %v, want %v", tt.q, got, tt.want)
		}
	}
	if got := h.Quantile(math.NaN()); !math.IsNaN(got) {
		t.Errorf("Quantile(NaN) = %v, want NaN", got)
	}
	// A fifth of the way through bucket -79's ranks: a fifth of the way
	// through it on a log scale (993.7 µs, under the 1 ms maximum).
	lo, hi := LowerBound(-79), UpperBound(-79)
	if got, want := h.Quantile(0.6), lo*math.Pow(hi/lo, 0.2); relErr(got, want) > 1e-15 || got >= 0.001 {
		t.Errorf("Quantile(0.6) = %v, want %v", got, want)
	}
}

// Inside a bucket the quantile is lo·(hi/lo)^f, f the share of the
// bucket's count the rank needs.
func TestQuantileInterpolatesInsideABucket(t *testing.T) {
	t.Parallel()
	// 1 op in bucket -81, 100 in bucket -80, 1 in bucket -79, so the
	// extremes lie outside bucket -80 and never clamp inside it.
	h, err := FromSnapshot(Snapshot{Schema: Schema, Count: 102,
		SumNanos: 102 * 900_000, MinNanos: 850_000, MaxNanos: 1_000_000,
		Buckets: []Bucket{{Index: -81, Count: 1}, {Index: -80, Count: 100}, {Index: -79, Count: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	lo, hi := LowerBound(-80), UpperBound(-80)
	for _, k := range []int{1, 10, 25, 50, 75, 99, 100} {
		q := float64(1+k) / 102 // rank 1+k: the first k ops of bucket -80
		want := math.Exp(math.Log(lo) + float64(k)/100*(math.Log(hi)-math.Log(lo)))
		if got := h.Quantile(q); relErr(got, want) > 1e-14 {
			t.Errorf("Quantile(%d/102) = %v, want %v (%d%% of the way through bucket -80 on a log scale)", 1+k, got, want, k)
		}
	}
}

// A log-uniform distribution fills every bucket the way the rule assumes:
// the quantiles come out exact (to the nanosecond rounding of the
// samples). A uniform one stays within one bucket (9%) of the exact
// order statistic.
func TestQuantileOfKnownDistributions(t *testing.T) {
	t.Parallel()
	const n = 80_000
	logUniform := &Histogram{} // 2^-10 s to 1 s, bucket bounds both
	uniform := &Histogram{}    // 1 µs to 100 ms
	var uniformSamples []float64
	for k := range n {
		logUniform.Observe(time.Duration(1e9 * math.Exp2(-10+10*(float64(k)+0.5)/n)))
		d := time.Duration(k+1) * 1250 * time.Nanosecond
		uniform.Observe(d)
		uniformSamples = append(uniformSamples, d.Seconds())
	}
	for _, q := range []float64{0.01, 0.1, 0.25, 0.5, 0.9, 0.95, 0.99, 0.999} {
		if got, want := logUniform.Quantile(q), math.Exp2(-10+10*q); relErr(got, want) > 1e-4 {
			t.Errorf("log-uniform Quantile(%v) = %v, want %v", q, got, want)
		}
		exact := uniformSamples[int(math.Ceil(q*n))-1]
		if got := uniform.Quantile(q); relErr(got, exact) > math.Exp2(1.0/8)-1 {
			t.Errorf("uniform Quantile(%v) = %v, exact %v: more than one bucket apart", q, got, exact)
		}
	}
}

// With every op in one bucket, the clamp to the exact extremes keeps the
// quantiles inside the observed range; one op is every quantile.
func TestQuantileOneBucket(t *testing.T) {
	t.Parallel()
	h := &Histogram{}
	for k := range 100 {
		h.Observe(900*time.Microsecond + time.Duration(k)*500*time.Nanosecond) // 900 to 949.5 µs: bucket -80
	}
	if len(h.Buckets()) != 1 {
		t.Fatalf("fixture spans %d buckets, want 1", len(h.Buckets()))
	}
	lo, hi := LowerBound(-80), UpperBound(-80)
	tests := []struct {
		q, want float64
	}{
		{0.01, 0.0009},            // lo·(hi/lo)^0.01 is below the minimum
		{0.5, math.Sqrt(lo * hi)}, // the geometric midpoint, 935.2 µs
		{0.99, seconds(h.Max())},  // hi·… is above the maximum
		{0.999, 949.5e-6},         // the maximum
	}
	for _, tt := range tests {
		if got := h.Quantile(tt.q); relErr(got, tt.want) > 1e-15 {
			t.Errorf("Quantile(%v) = %v, want %v", tt.q, got, tt.want)
		}
	}
	one := &Histogram{}
	one.Observe(123456 * time.Nanosecond)
	for _, q := range []float64{0, 0.01, 0.5, 0.99, 1} {
		if got := one.Quantile(q); got != 123456e-9 {
			t.Errorf("one op of 123.456 µs: Quantile(%v) = %v", q, got)
		}
	}
}

// The zero bucket's quantiles are 0.
func TestQuantileZeroBucket(t *testing.T) {
	t.Parallel()
	h := &Histogram{}
	for range 60 {
		h.Observe(0)
	}
	for range 40 {
		h.Observe(time.Millisecond)
	}
	if got := h.Median(); got != 0 {
		t.Errorf("Median (60 zeros, 40 × 1 ms) = %v, want 0", got)
	}
	lo, hi := LowerBound(-79), UpperBound(-79)
	if got, want := h.Quantile(0.7), lo*math.Pow(hi/lo, 0.25); relErr(got, want) > 1e-15 {
		t.Errorf("Quantile(0.7) = %v, want a quarter of the way through bucket -79, %v", got, want)
	}
}

// The top bucket, the one the longest time.Duration falls in, has an
// upper bound above what a Duration can hold: the quantile interpolates
// inside it and is clamped to the exact maximum.
func TestQuantileTopBucket(t *testing.T) {
	t.Parallel()
	h := &Histogram{}
	h.Observe(time.Millisecond)
	h.Observe(math.MaxInt64)
	top := Index(seconds(math.MaxInt64))
	lo, hi := LowerBound(top), UpperBound(top)
	if !(hi > seconds(math.MaxInt64)) {
		t.Fatalf("fixture: bucket %d's upper bound %v is not above the longest Duration", top, hi)
	}
	if got, want := h.Quantile(0.75), math.Sqrt(lo*hi); relErr(got, want) > 1e-15 {
		t.Errorf("Quantile(0.75) = %v, want bucket %d's geometric midpoint %v", got, top, want)
	}
	if got := h.Quantile(0.99); got != seconds(math.MaxInt64) {
		t.Errorf("Quantile(0.99) = %v, want the maximum %v", got, seconds(math.MaxInt64))
	}
}

// On any histogram the quantile grows with q and stays within the exact
// extremes, and it agrees after a round trip through the snapshot.
func TestQuantileMonotone(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(7, 8))
	qs := []float64{0, 0.001, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999, 1}
	for range 200 {
		h := observeAll(randomDurations(r, 1+r.IntN(2000)))
		back, err := FromSnapshot(h.Snapshot())
		if err != nil {
			t.Fatal(err)
		}
		var got []float64
		for _, q := range qs {
			v := h.Quantile(q)
			if v < seconds(h.Min()) || v > seconds(h.Max()) {
				t.Fatalf("Quantile(%v) = %v outside [%v, %v]", q, v, h.Min(), h.Max())
			}
			if b := back.Quantile(q); b != v {
				t.Fatalf("Quantile(%v) = %v, after a snapshot round trip %v", q, v, b)
			}
			got = append(got, v)
		}
		if !slices.IsSorted(got) {
			t.Fatalf("quantiles %v at %v not ascending", got, qs)
		}
	}
}

// CountOver counts whole buckets above the threshold: never an op at or
// under it, and every op more than one bucket over it.
func TestCountOver(t *testing.T) {
	t.Parallel()
	h := &Histogram{}
	for _, d := range []time.Duration{0, 900 * time.Microsecond, time.Millisecond, time.Millisecond, 5 * time.Millisecond} {
		h.Observe(d)
	}
	tests := []struct {
		threshold float64
		want      uint64
	}{
		{LowerBound(-79), 3},                    // bucket -79 lies wholly above its lower bound
		{math.Nextafter(LowerBound(-79), 1), 1}, // now bucket -79 straddles it: only 5 ms
		{0.0009, 3},                             // inside bucket -80
		{0, 4},                                  // all but the zero bucket
		{-1, 4},
		{0.006, 0},
		{math.NaN(), 0},
	}
	for _, tt := range tests {
		if got := h.CountOver(tt.threshold); got != tt.want {
			t.Errorf("CountOver(%v) = %d, want %d", tt.threshold, got, tt.want)
		}
	}
	r := rand.New(rand.NewPCG(9, 10))
	for range 100 {
		ds := randomDurations(r, 1+r.IntN(2000))
		h := observeAll(ds)
		bar := math.Exp(r.Float64()*math.Log(1e7)) * 1e-6 // 1 µs to 10 s
		var over, wellOver uint64
		for _, d := range ds {
			if d.Seconds() > bar {
				over++
			}
			if d.Seconds() > bar*math.Exp2(1.0/8) {
				wellOver++
			}
		}
		if got := h.CountOver(bar); got > over || got < wellOver {
			t.Fatalf("CountOver(%v) = %d; %d ops are over it, %d more than a bucket over", bar, got, over, wellOver)
		}
	}
}

func BenchmarkQuantile(b *testing.B) {
	h := observeAll(randomDurations(rand.New(rand.NewPCG(1, 1)), 100_000))
	for b.Loop() {
		h.Quantile(0.99)
	}
}
