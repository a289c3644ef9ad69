// Package wire converts between Plumbline's internal types and the protobuf
// wire format (proto/plumbline/v1), and validates what arrives from the
// wire. The server calls it on every record it receives, so every decoder
// here treats its input as untrusted: a malformed message is an error that
// says what is wrong, never a panic.
package wire

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/bits"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/plumbline/plumbline/internal/histogram"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// ErrInvalidHistogram is wrapped by every error HistogramFromProto returns.
var ErrInvalidHistogram = errors.New("invalid histogram")

// Bucket indexes a histogram of time.Duration observations can hold: the
// bucket of 1 ns, histogram.Index(time.Duration(1).Seconds()), and the
// bucket of the longest Duration, histogram.Index(math.MaxInt64 ns) —
// constants, so nothing can change them; TestBucketIndexConstants checks them
// against histogram.Index. Observe puts nothing outside this range, so an
// index outside it is a forged message; the range also bounds the number of
// buckets a valid message can carry.
const (
	MinBucketIndex int32 = -239
	MaxBucketIndex int32 = 265
)

// MaxBuckets is the most buckets a valid Histogram message holds (one per
// index from MinBucketIndex to MaxBucketIndex).
const MaxBuckets = int(MaxBucketIndex-MinBucketIndex) + 1

// HistogramToProto returns the wire form of h (nil: an empty histogram).
func HistogramToProto(h *histogram.Histogram) *plumblinev1.Histogram {
	if h == nil {
		h = &histogram.Histogram{}
	}
	s := h.Snapshot()
	out := &plumblinev1.Histogram{
		Schema:               s.Schema,
		ZeroThresholdSeconds: s.ZeroThreshold,
		ZeroCount:            s.ZeroCount,
		Count:                s.Count,
		SumNanoseconds:       s.SumNanos,
		MinNanoseconds:       s.MinNanos,
		MaxNanoseconds:       s.MaxNanos,
	}
	if len(s.Buckets) > 0 {
		out.Buckets = make([]*plumblinev1.HistogramBucket, len(s.Buckets))
		for i, b := range s.Buckets {
			out.Buckets[i] = &plumblinev1.HistogramBucket{Index: b.Index, Count: b.Count}
		}
	}
	return out
}

// HistogramFromProto validates an untrusted wire histogram and rebuilds it.
// A nil message is an error (a probe result without its distribution).
// Besides what histogram.FromSnapshot checks (schema, counts adding up), it
// refuses what no sequence of Observe calls could have produced:
//   - a zero threshold other than histogram.ZeroThreshold;
//   - more than MaxBuckets buckets, an index outside [MinBucketIndex,
//     MaxBucketIndex], indexes not strictly ascending, a zero count;
//   - counts whose total overflows;
//   - min, max or sum set on an empty histogram; a negative min (hence
//     any negative latency); min > max;
//   - a sum outside [count·min, count·max];
//   - a min or max that does not fall in the lowest or highest populated
//     bucket (or the zero bucket), i.e. extremes that contradict the buckets.
//
// Every accepted message converts back (HistogramToProto) to an equal one.
func HistogramFromProto(p *plumblinev1.Histogram) (*histogram.Histogram, error) {
	if p == nil {
		return nil, fmt.Errorf("%w: missing", ErrInvalidHistogram)
	}
	if err := checkHistogram(p); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidHistogram, err)
	}
	s := histogram.Snapshot{
		Schema:        p.GetSchema(),
		ZeroThreshold: p.GetZeroThresholdSeconds(),
		ZeroCount:     p.GetZeroCount(),
		Count:         p.GetCount(),
		SumNanos:      p.GetSumNanoseconds(),
		MinNanos:      p.GetMinNanoseconds(),
		MaxNanos:      p.GetMaxNanoseconds(),
		Buckets:       make([]histogram.Bucket, len(p.GetBuckets())),
	}
	for i, b := range p.GetBuckets() {
		s.Buckets[i] = histogram.Bucket{Index: b.GetIndex(), Count: b.GetCount()}
	}
	h, err := histogram.FromSnapshot(s)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidHistogram, err)
	}
	return h, nil
}

// EncodeHistogram returns the bytes of h's wire message, the form the
// store keeps a histogram in (probe results, baselines).
func EncodeHistogram(h *histogram.Histogram) ([]byte, error) {
	return proto.Marshal(HistogramToProto(h))
}

// DecodeHistogram is the one decoder of a stored histogram: it unmarshals
// the bytes EncodeHistogram (or an agent) produced and validates them as
// HistogramFromProto does. No bytes at all are an error, not an empty
// histogram (a record that never carried one).
func DecodeHistogram(b []byte) (*histogram.Histogram, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("%w: no bytes", ErrInvalidHistogram)
	}
	var p plumblinev1.Histogram
	if err := proto.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidHistogram, err)
	}
	return HistogramFromProto(&p)
}

func checkHistogram(p *plumblinev1.Histogram) error {
	if p.GetSchema() != histogram.Schema {
		return fmt.Errorf("schema %d: only schema %d is supported", p.GetSchema(), histogram.Schema)
	}
	// Compare bit patterns: NaN never equals anything, and -0 is not 2^-128.
	if math.Float64bits(p.GetZeroThresholdSeconds()) != math.Float64bits(histogram.ZeroThreshold) {
		return fmt.Errorf("zero threshold %g s: want %g", p.GetZeroThresholdSeconds(), histogram.ZeroThreshold)
	}
	bs := p.GetBuckets()
	total, err := bucketTotal(p.GetZeroCount(), bs)
	if err != nil {
		return err
	}
	n := p.GetCount()
	if total != n {
		return fmt.Errorf("buckets hold %d observations, count says %d", total, n)
	}
	lo, hi, sum := p.GetMinNanoseconds(), p.GetMaxNanoseconds(), p.GetSumNanoseconds()
	if n == 0 {
		if lo != 0 || hi != 0 || sum != 0 {
			return fmt.Errorf("empty histogram with min %d, max %d, sum %d ns: want 0", lo, hi, sum)
		}
		return nil
	}
	if lo < 0 {
		return fmt.Errorf("min %d ns: a latency is never negative", lo)
	}
	if lo > hi {
		return fmt.Errorf("min %d ns > max %d ns", lo, hi)
	}
	// count·min <= sum <= count·max, exactly (the products overflow int64).
	bn := new(big.Int).SetUint64(n)
	bsum := big.NewInt(sum)
	if bsum.Cmp(new(big.Int).Mul(bn, big.NewInt(lo))) < 0 || bsum.Cmp(new(big.Int).Mul(bn, big.NewInt(hi))) > 0 {
		return fmt.Errorf("sum %d ns outside [count·min, count·max] = [%d·%d, %d·%d]", sum, n, lo, n, hi)
	}
	// The extremes must sit in the outermost populated buckets, exactly
	// where Observe would have put them.
	bucketOf := func(d int64) (int32, bool) { // false: the zero bucket
		v := time.Duration(d).Seconds()
		if v <= histogram.ZeroThreshold {
			return 0, false
		}
		return histogram.Index(v), true
	}
	if i, ok := bucketOf(lo); p.GetZeroCount() > 0 {
		if ok {
			return fmt.Errorf("min %d ns with %d observations in the zero bucket: want min <= 0", lo, p.GetZeroCount())
		}
	} else if !ok || i != bs[0].GetIndex() {
		return fmt.Errorf("min %d ns is not in the lowest bucket %d", lo, bs[0].GetIndex())
	}
	if i, ok := bucketOf(hi); len(bs) > 0 {
		if !ok || i != bs[len(bs)-1].GetIndex() {
			return fmt.Errorf("max %d ns is not in the highest bucket %d", hi, bs[len(bs)-1].GetIndex())
		}
	} else if ok {
		return fmt.Errorf("max %d ns with no bucket above zero", hi)
	}
	return nil
}

// bucketTotal checks the populated buckets (bounded in number, indexes in
// range and strictly ascending, no empty one) and returns their count with
// the zero bucket's, refusing a sum that overflows.
func bucketTotal(zero uint64, bs []*plumblinev1.HistogramBucket) (uint64, error) {
	if len(bs) > MaxBuckets {
		return 0, fmt.Errorf("%d buckets: at most %d", len(bs), MaxBuckets)
	}
	total := zero
	for i, b := range bs {
		if b == nil {
			return 0, fmt.Errorf("bucket %d is empty", i)
		}
		idx := b.GetIndex()
		if idx < MinBucketIndex || idx > MaxBucketIndex {
			return 0, fmt.Errorf("bucket index %d: want %d to %d", idx, MinBucketIndex, MaxBucketIndex)
		}
		if i > 0 && idx <= bs[i-1].GetIndex() {
			return 0, fmt.Errorf("bucket index %d after %d: want strictly ascending", idx, bs[i-1].GetIndex())
		}
		if b.GetCount() == 0 {
			return 0, fmt.Errorf("bucket %d has count 0: list populated buckets only", idx)
		}
		var carry uint64
		total, carry = bits.Add64(total, b.GetCount(), 0)
		if carry != 0 {
			return 0, errors.New("bucket counts overflow")
		}
	}
	return total, nil
}
