// Package histogram is Plumbline's mergeable latency histogram: the sparse
// exponential buckets of a Prometheus native histogram with one fixed
// schema (Schema = 3, 8 buckets per power of two, each bucket ≈ 9% wide),
// plus the exact count, sum, minimum and maximum of the observed durations.
//
// The bucket layout is client_golang's: bucket index i holds the values v
// with UpperBound(i-1) < v <= UpperBound(i), where UpperBound(i) =
// 2^(i / 2^Schema) seconds. Values at or below ZeroThreshold (and zero or
// negative durations) land in the zero bucket. Because every agent uses the
// same schema and the same index function, histograms from different runs,
// volumes or hosts merge by adding bucket counts, with no loss: Merge is
// exact, and the server can re-expose the buckets as a Prometheus native
// histogram (see Spans) without re-bucketing.
//
// Observations are time.Durations; the sum is kept in integer nanoseconds,
// so merging is exact for the sum too (float sums are not associative).
//
// The package is also the one place latency is read out of a histogram:
// Quantile (and Median) is the quantile rule the inventory API, the
// baseline and the agent's probe command all show, and CountOver the
// slow-op count. The bytes of a histogram (the wire message, also the form
// the store keeps) are mapped in internal/wire: EncodeHistogram and
// DecodeHistogram.
package histogram

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"sort"
	"time"
)

// Schema is the native-histogram schema every Plumbline histogram uses:
// the bucket growth factor is 2^(2^-Schema) = 2^(1/8) ≈ 1.0905.
const Schema = 3

// ZeroThreshold (seconds) is client_golang's default zero-bucket width,
// 2^-128: observations at or below it count in the zero bucket.
const ZeroThreshold = 2.938735877055719e-39

// bucketsPerPowerOfTwo is 2^Schema.
const bucketsPerPowerOfTwo = 1 << Schema

// fracBounds are the upper bounds of the 8 buckets inside one power of two,
// expressed, as math.Frexp returns it, as a fraction in [0.5, 1):
// fracBounds[k] ≈ 2^(k/8) / 2. These are client_golang's
// nativeHistogramBounds[3] literals, copied verbatim (three of them are one
// ulp below the correctly rounded value); using the very same floats is what
// makes Index agree with client_golang for every input, boundaries included.
var fracBounds = [bucketsPerPowerOfTwo]float64{
	0.5, 0.5452538663326288, 0.5946035575013605, 0.6484197773255048,
	0.7071067811865475, 0.7711054127039704, 0.8408964152537144, 0.9170040432046711,
}

// Index returns the bucket index of a positive value v (in seconds), the
// same key client_golang's native histogram computes for schema 3: the
// smallest i with v <= UpperBound(i). It must not be called for values at
// or below ZeroThreshold, which belong to the zero bucket.
func Index(v float64) int32 {
	frac, exp := math.Frexp(v)
	// frac is in [0.5, 1); the smallest k with fracBounds[k] >= frac picks
	// the bucket inside the power of two; k == 8 means the next power's
	// first bucket, which the arithmetic below handles as well.
	k := sort.SearchFloat64s(fracBounds[:], frac)
	return int32(k + (exp-1)*bucketsPerPowerOfTwo)
}

// UpperBound returns the inclusive upper bound, in seconds, of bucket i:
// 2^(i/8). It is exact for every i that is a multiple of 8 and agrees with
// the boundaries Index uses for the others.
func UpperBound(i int32) float64 {
	// Split i into whole powers of two and a remainder in [0, 8).
	p := int(i) >> Schema // floor division, also for negative i
	k := int(i) - p*bucketsPerPowerOfTwo
	return math.Ldexp(fracBounds[k], p+1)
}

// LowerBound returns the exclusive lower bound of bucket i, which is
// UpperBound(i-1).
func LowerBound(i int32) float64 { return UpperBound(i - 1) }

// Histogram is a latency distribution. The zero value is an empty histogram
// ready to use. It is not safe for concurrent use; give each goroutine its
// own and Merge them.
type Histogram struct {
	count     uint64
	zeroCount uint64
	sum       time.Duration // exact; overflows only past 292 years of latency
	min, max  time.Duration
	buckets   map[int32]uint64
}

// Observe records one duration.
func (h *Histogram) Observe(d time.Duration) {
	if h.count == 0 || d < h.min {
		h.min = d
	}
	if h.count == 0 || d > h.max {
		h.max = d
	}
	h.count++
	h.sum += d
	v := d.Seconds()
	if v <= ZeroThreshold {
		h.zeroCount++
		return
	}
	if h.buckets == nil {
		h.buckets = make(map[int32]uint64)
	}
	h.buckets[Index(v)]++
}

// ErrOverflow is returned by Merge when a count or the sum would no longer
// fit: the histogram is left as it was.
var ErrOverflow = errors.New("histogram overflow")

// Merge adds every observation of o to h. The result is exactly the
// histogram that observing both sample sets into one would have produced.
// When the merged count, zero count, a bucket count or the sum would
// overflow, Merge changes nothing and returns an error wrapping
// ErrOverflow (a sum past 2^63-1 ns is 292 years of latency: only forged
// input gets there).
func (h *Histogram) Merge(o *Histogram) error {
	if o == nil || o.count == 0 {
		return nil
	}
	if _, carry := bits.Add64(h.count, o.count, 0); carry != 0 {
		return fmt.Errorf("%w: count %d + %d", ErrOverflow, h.count, o.count)
	}
	if _, carry := bits.Add64(h.zeroCount, o.zeroCount, 0); carry != 0 {
		return fmt.Errorf("%w: zero count %d + %d", ErrOverflow, h.zeroCount, o.zeroCount)
	}
	sum, ok := addDuration(h.sum, o.sum)
	if !ok {
		return fmt.Errorf("%w: sum %d ns + %d ns does not fit in 2^63-1 ns", ErrOverflow, int64(h.sum), int64(o.sum))
	}
	for i, c := range o.buckets {
		if _, carry := bits.Add64(h.buckets[i], c, 0); carry != 0 {
			return fmt.Errorf("%w: bucket %d count %d + %d", ErrOverflow, i, h.buckets[i], c)
		}
	}
	if h.count == 0 || o.min < h.min {
		h.min = o.min
	}
	if h.count == 0 || o.max > h.max {
		h.max = o.max
	}
	h.count += o.count
	h.zeroCount += o.zeroCount
	h.sum = sum
	if len(o.buckets) > 0 && h.buckets == nil {
		h.buckets = make(map[int32]uint64, len(o.buckets))
	}
	for i, c := range o.buckets {
		h.buckets[i] += c
	}
	return nil
}

// addDuration is a + b, and false when that overflows.
func addDuration(a, b time.Duration) (time.Duration, bool) {
	s := a + b
	// Overflow iff both operands have the same sign and the sum's differs.
	if (a >= 0) == (b >= 0) && (s >= 0) != (a >= 0) {
		return 0, false
	}
	return s, true
}

// Count is the number of observations.
func (h *Histogram) Count() uint64 { return h.count }

// ZeroCount is the number of observations in the zero bucket.
func (h *Histogram) ZeroCount() uint64 { return h.zeroCount }

// Sum is the exact total of all observations.
func (h *Histogram) Sum() time.Duration { return h.sum }

// Min is the smallest observation (0 for an empty histogram).
func (h *Histogram) Min() time.Duration { return h.min }

// Max is the largest observation (0 for an empty histogram).
func (h *Histogram) Max() time.Duration { return h.max }

// Mean is Sum/Count (0 for an empty histogram).
func (h *Histogram) Mean() time.Duration {
	if h.count == 0 {
		return 0
	}
	return h.sum / time.Duration(h.count)
}

// Bucket is one populated bucket: Count observations v with
// LowerBound(Index) < v <= UpperBound(Index).
type Bucket struct {
	Index int32  `json:"index"`
	Count uint64 `json:"count"`
}

// Buckets returns the populated buckets in ascending index order.
func (h *Histogram) Buckets() []Bucket {
	out := make([]Bucket, 0, len(h.buckets))
	for i, c := range h.buckets {
		out = append(out, Bucket{Index: i, Count: c})
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Index < out[b].Index })
	return out
}

// Span is a run of consecutive buckets in Prometheus' sparse encoding:
// Offset is the gap (in buckets) from the end of the previous span (for the
// first span: the starting index) and Length the number of buckets in it.
type Span struct {
	Offset int32
	Length uint32
}

// Spans encodes the positive buckets the way a Prometheus native histogram
// carries them (io.prometheus.client.Histogram positive_span and
// positive_delta): spans of consecutive indexes, and each bucket's count
// as the delta from the previous bucket's count. Gaps of one or two empty
// buckets are kept inside a span as zero counts, as client_golang does.
func (h *Histogram) Spans() ([]Span, []int64) {
	var spans []Span
	var deltas []int64
	var prevCount int64
	var next int32 // index just past the last emitted bucket
	for n, b := range h.Buckets() {
		gap := b.Index - next
		switch {
		case n == 0:
			spans = append(spans, Span{Offset: b.Index})
		case gap <= 2:
			for range gap {
				spans[len(spans)-1].Length++
				deltas = append(deltas, -prevCount)
				prevCount = 0
			}
		default:
			spans = append(spans, Span{Offset: gap})
		}
		spans[len(spans)-1].Length++
		deltas = append(deltas, int64(b.Count)-prevCount)
		prevCount = int64(b.Count)
		next = b.Index + 1
	}
	return spans, deltas
}

// Snapshot is the serialisable form of a Histogram (JSON, and later the
// wire format). FromSnapshot turns it back into a Histogram.
type Snapshot struct {
	Schema        int32    `json:"schema"`
	ZeroThreshold float64  `json:"zero_threshold_seconds"`
	ZeroCount     uint64   `json:"zero_count"`
	Count         uint64   `json:"count"`
	SumNanos      int64    `json:"sum_nanoseconds"`
	MinNanos      int64    `json:"min_nanoseconds"`
	MaxNanos      int64    `json:"max_nanoseconds"`
	Buckets       []Bucket `json:"buckets"`
}

// Snapshot returns the serialisable form of h.
func (h *Histogram) Snapshot() Snapshot {
	return Snapshot{
		Schema:        Schema,
		ZeroThreshold: ZeroThreshold,
		ZeroCount:     h.zeroCount,
		Count:         h.count,
		SumNanos:      int64(h.sum),
		MinNanos:      int64(h.min),
		MaxNanos:      int64(h.max),
		Buckets:       h.Buckets(),
	}
}

// FromSnapshot rebuilds a Histogram, refusing a snapshot of another schema
// or one whose bucket counts do not add up to its count.
func FromSnapshot(s Snapshot) (*Histogram, error) {
	if s.Schema != Schema {
		return nil, fmt.Errorf("histogram schema %d: only schema %d is supported", s.Schema, Schema)
	}
	h := &Histogram{
		count:     s.Count,
		zeroCount: s.ZeroCount,
		sum:       time.Duration(s.SumNanos),
		min:       time.Duration(s.MinNanos),
		max:       time.Duration(s.MaxNanos),
	}
	total := s.ZeroCount
	for _, b := range s.Buckets {
		if b.Count == 0 {
			continue
		}
		if h.buckets == nil {
			h.buckets = make(map[int32]uint64, len(s.Buckets))
		}
		if _, dup := h.buckets[b.Index]; dup {
			return nil, fmt.Errorf("histogram bucket %d listed twice", b.Index)
		}
		h.buckets[b.Index] = b.Count
		total += b.Count
	}
	if total != s.Count {
		return nil, fmt.Errorf("histogram buckets hold %d observations, count says %d", total, s.Count)
	}
	return h, nil
}

// Equal reports whether two histograms hold exactly the same distribution.
func (h *Histogram) Equal(o *Histogram) bool {
	if h.count != o.count || h.zeroCount != o.zeroCount || h.sum != o.sum ||
		h.min != o.min || h.max != o.max || len(h.buckets) != len(o.buckets) {
		return false
	}
	for i, c := range h.buckets {
		if o.buckets[i] != c {
			return false
		}
	}
	return true
}
