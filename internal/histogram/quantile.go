package histogram

import "math"

// Quantile returns the q-quantile of the observations, in seconds. It is
// the one quantile rule in Plumbline: the inventory API's latency fields,
// the baseline the evaluator judges and the agent's probe command all call
// it, so one histogram shows one median everywhere.
//
// The rule, for 0 < q < 1:
//
//   - The rank is q × Count. Walking the zero bucket and then the buckets in
//     ascending order, the quantile lies in the first bucket where the
//     running count reaches the rank (a rank equal to the running count at
//     a bucket's end picks that bucket, so the answer is its upper bound).
//   - In the zero bucket the quantile is 0.
//   - Inside a bucket (lo, hi] holding c observations, of which the rank
//     needs the first k, the quantile is lo × (hi/lo)^(k/c): interpolated
//     log-linearly (exponentially), as if the observations were spread
//     evenly over log(v) inside the bucket. At k = c it is hi exactly.
//   - The result is clamped to the exact minimum and maximum, which the
//     histogram keeps: a quantile never lies outside the observed range,
//     so a run whose ops all sat in one bucket reports values inside that
//     range, and the top bucket (whose upper bound can lie far above the
//     largest op; for the longest time.Duration it lies above what a
//     Duration can hold) reports at most the maximum.
//
// q <= 0 is the minimum, q >= 1 the maximum; an empty histogram gives 0 and
// a NaN q gives NaN.
//
// Why log-linear: the buckets are exponential, each spanning the same
// factor 2^(1/8), so they are equal in width on a log scale; spreading a
// bucket's observations evenly over log(v) is the same as assuming they
// would fill the buckets of a finer histogram of this kind evenly, the
// assumption consistent with the layout at every scale. It is also the
// rule Prometheus' histogram_quantile applies to native histograms with
// exponential buckets, so PromQL over the buckets the server exposes gives
// the API's number, except where the clamp to the exact minimum and
// maximum (which Prometheus does not keep) applies. Linear interpolation
// would differ by at most 0.1% in a bucket this narrow, but would match
// neither; taking the bucket's upper bound (the API's old rule) overstates
// a quantile by up to 9%, and the nearest rank over raw samples (the
// agent's old rule) is not available once runs are merged.
func (h *Histogram) Quantile(q float64) float64 {
	if h == nil || h.count == 0 {
		return 0
	}
	lo, hi := h.min.Seconds(), h.max.Seconds()
	switch {
	case math.IsNaN(q):
		return math.NaN()
	case q <= 0:
		return lo
	case q >= 1:
		return hi
	}
	rank := q * float64(h.count)
	cum := float64(h.zeroCount)
	if cum >= rank {
		return min(max(0, lo), hi)
	}
	for _, b := range h.Buckets() {
		c := float64(b.Count)
		if cum+c >= rank {
			v := interpolate(LowerBound(b.Index), UpperBound(b.Index), (rank-cum)/c)
			return min(max(v, lo), hi)
		}
		cum += c
	}
	// Unreachable for a histogram whose buckets add up to its count (which
	// Observe, Merge and FromSnapshot ensure).
	return hi
}

// Median is Quantile(0.5), in seconds.
func (h *Histogram) Median() float64 { return h.Quantile(0.5) }

// interpolate is the point a fraction f of the way through the bucket
// (lo, hi] on a log scale, lo × (hi/lo)^f, exactly hi at f = 1. A bucket
// whose lower bound underflows to 0 (an index far below any Duration's)
// falls back to linear interpolation.
func interpolate(lo, hi, f float64) float64 {
	switch {
	case f >= 1:
		return hi
	case !(lo > 0):
		return lo + (hi-lo)*f
	}
	return lo * math.Pow(hi/lo, f)
}

// CountOver returns how many observations lie in buckets wholly above
// threshold seconds (bucket lower bound >= threshold): the slow-op count.
// Every op it counts took longer than threshold; the ops of the one bucket
// that straddles threshold are not counted, so an op up to one bucket
// (~9%) over threshold may be missed, none at or under it is counted. The
// zero bucket never counts; a threshold at or below 0 counts every other
// observation, a NaN threshold none.
func (h *Histogram) CountOver(threshold float64) uint64 {
	if h == nil {
		return 0
	}
	n := uint64(0)
	for i, c := range h.buckets {
		if LowerBound(i) >= threshold {
			n += c
		}
	}
	return n
}
