package exporter

import (
	"fmt"
	"math"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/plumbline/plumbline/internal/histogram"
	"github.com/plumbline/plumbline/internal/server/store"
	"github.com/plumbline/plumbline/internal/wire"
)

// The classic bucket sets of the probe latency histograms, by the name
// the server's metrics.classic_histogram_buckets takes. Every set keeps the
// native buckets (schema 3, ~9% wide, one series per histogram in a
// Prometheus that ingests native histograms) and _sum/_count; the set only
// decides what a Prometheus ingesting classic histograms stores.
const (
	// ClassicFine: 18 bounds, a factor of two apart (FineClassicBuckets).
	ClassicFine = "fine"
	// ClassicCoarse: 6 bounds, a factor of eight apart
	// (CoarseClassicBuckets). The default.
	ClassicCoarse = "coarse"
	// ClassicNone: no classic bounds, only +Inf, _sum and _count.
	ClassicNone = "none"
)

// ClassicBucketSets are the names ClassicBucketsNamed knows, default first.
func ClassicBucketSets() []string { return []string{ClassicCoarse, ClassicFine, ClassicNone} }

// ClassicBucketsNamed returns the classic bucket bounds of a named set
// ("" is the default, coarse); none is an empty, non-nil slice.
func ClassicBucketsNamed(name string) ([]float64, error) {
	switch name {
	case "", ClassicCoarse:
		return CoarseClassicBuckets(), nil
	case ClassicFine:
		return FineClassicBuckets(), nil
	case ClassicNone:
		return []float64{}, nil
	}
	return nil, fmt.Errorf("classic histogram buckets %q: want one of %s", name, strings.Join(ClassicBucketSets(), ", "))
}

// DefaultClassicBuckets returns the default classic bucket bounds:
// CoarseClassicBuckets.
func DefaultClassicBuckets() []float64 { return CoarseClassicBuckets() }

// FineClassicBuckets returns the powers of two from 2^-14 ≈ 61 µs (below
// it only cache hits and the fastest flash) to 2^3 = 8 s (beyond is a
// stalled device; +Inf counts it), 18 bounds, so a heatmap of the classic
// buckets shows where a distribution sits within a factor of two: NVMe
// reads (~100 µs), SSD (~200 µs), synced log writes (0.1–5 ms), a rotating
// disk's random I/O (4–15 ms), queueing beyond. A histogram costs 21
// classic series (18 bounds, +Inf, _sum, _count): a volume with three probe
// kinds 63.
func FineClassicBuckets() []float64 { return powersOfTwo(-14, 3, 1) }

// CoarseClassicBuckets returns the powers of eight from 2^-13 ≈ 122 µs to
// 2^2 = 4 s, 6 bounds that put each class of storage answer in its own
// bucket — NVMe (≤ 122 µs), SSD and SAN (≤ 0.98 ms), synced writes and
// short seeks (≤ 7.8 ms), a rotating disk's random I/O (≤ 62.5 ms),
// queueing (≤ 0.5 s), a stall (≤ 4 s, +Inf beyond) — so histogram_quantile
// over the classic series still tells the classes apart. A histogram costs
// 9 classic series: a volume with three probe kinds 27.
func CoarseClassicBuckets() []float64 { return powersOfTwo(-13, 2, 3) }

// powersOfTwo returns 2^from, 2^(from+step), ... up to 2^to: bounds of
// the schema-3 native buckets, so each classic count is exact.
func powersOfTwo(from, to, step int) []float64 {
	var b []float64
	for e := from; e <= to; e += step {
		b = append(b, math.Ldexp(1, e))
	}
	return b
}

// checkClassicBuckets: ascending schema-3 bucket bounds.
func checkClassicBuckets(bounds []float64) error {
	for i, b := range bounds {
		if !(b > 0) || math.IsInf(b, 0) || histogram.UpperBound(histogram.Index(b)) != b {
			return fmt.Errorf("exporter: classic bucket %g: want a schema-3 bucket bound 2^(i/8)", b)
		}
		if i > 0 && b <= bounds[i-1] {
			return fmt.Errorf("exporter: classic buckets must ascend (%g after %g)", b, bounds[i-1])
		}
	}
	return nil
}

// nativeHist is a histogram as the exposition shows it: classic buckets
// (cumulative counts at the classic bounds) and schema-3 native buckets.
type nativeHist struct {
	count   uint64
	sum     float64 // seconds
	zero    uint64
	classic []uint64
	spans   []histogram.Span
	deltas  []int64
}

// classicBounds are the classic bucket bounds of the histograms and their
// le label values as the text format writes them (formatted once).
type classicBounds struct {
	bounds []float64
	le     [][]byte
}

func newClassicBounds(bounds []float64) classicBounds {
	c := classicBounds{bounds: bounds, le: make([][]byte, len(bounds))}
	for i, b := range bounds {
		c.le[i] = appendFloat(nil, b)
	}
	return c
}

// encodeHistogram encodes one histogram of family f: the text lines
// (classic buckets, +Inf, _sum, _count) and the Metric message with its
// native buckets, field by field as proto.Marshal writes a dto.Metric.
func (f *family) encodeHistogram(fam int, values []string, cb classicBounds, h *nativeHist) *series {
	s := &series{fam: fam, key: f.key(values)}
	s.text = f.histogramText(values, cb, h)
	m := appendHistogram(make([]byte, 0, 48+24*len(cb.bounds)+12*len(h.spans)+4*len(h.deltas)), cb.bounds, h)
	labels := f.metricSize(values) - protowire.SizeTag(2) - protowire.SizeBytes(protowire.SizeTag(1)+protowire.SizeFixed64())
	pb := make([]byte, 0, labels+protowire.SizeTag(7)+protowire.SizeBytes(len(m)))
	pb = f.appendLabels(pb, values)
	pb = protowire.AppendTag(pb, 7, protowire.BytesType) // Metric.histogram
	s.pb = protowire.AppendBytes(pb, m)
	return s
}

// histogramText is a histogram's text lines. The label pairs are escaped
// once and copied into every line.
func (f *family) histogramText(values []string, cb classicBounds, h *nativeHist) []byte {
	pairs := make([]byte, 0, f.lineSize(values))
	for i, j := range f.order {
		if i > 0 {
			pairs = append(pairs, ',')
		}
		pairs = append(pairs, f.labelNames[i]...)
		pairs = append(pairs, `="`...)
		pairs = appendEscaped(pairs, values[j], true)
		pairs = append(pairs, '"')
	}
	text := make([]byte, 0, (len(cb.bounds)+3)*(len(f.name)+len(pairs)+48))
	bucket := func(le []byte, v uint64) {
		text = append(text, f.name...)
		text = append(text, "_bucket{"...)
		text = append(text, pairs...)
		if len(pairs) > 0 {
			text = append(text, ',')
		}
		text = append(text, `le="`...)
		text = append(text, le...)
		text = append(text, `"} `...)
		text = appendFloat(text, float64(v))
		text = append(text, '\n')
	}
	for i := range cb.bounds {
		bucket(cb.le[i], h.classic[i])
	}
	bucket([]byte("+Inf"), h.count)
	for _, x := range []struct {
		suffix string
		v      float64
	}{{"_sum", h.sum}, {"_count", float64(h.count)}} {
		text = append(text, f.name...)
		text = append(text, x.suffix...)
		if len(pairs) > 0 {
			text = append(text, '{')
			text = append(text, pairs...)
			text = append(text, '}')
		}
		text = append(text, ' ')
		text = appendFloat(text, x.v)
		text = append(text, '\n')
	}
	return text
}

// appendHistogram appends a dto.Histogram message: count, sum, the classic
// buckets at bounds, and the schema-3 native buckets.
func appendHistogram(m []byte, bounds []float64, h *nativeHist) []byte {
	m = protowire.AppendTag(m, 1, protowire.VarintType) // sample_count
	m = protowire.AppendVarint(m, h.count)
	m = protowire.AppendTag(m, 2, protowire.Fixed64Type) // sample_sum
	m = protowire.AppendFixed64(m, math.Float64bits(h.sum))
	for i, bound := range bounds { // bucket
		m = protowire.AppendTag(m, 3, protowire.BytesType)
		m = protowire.AppendVarint(m, uint64(protowire.SizeTag(1)+protowire.SizeVarint(h.classic[i])+protowire.SizeTag(2)+protowire.SizeFixed64()))
		m = protowire.AppendTag(m, 1, protowire.VarintType) // cumulative_count
		m = protowire.AppendVarint(m, h.classic[i])
		m = protowire.AppendTag(m, 2, protowire.Fixed64Type) // upper_bound
		m = protowire.AppendFixed64(m, math.Float64bits(bound))
	}
	m = protowire.AppendTag(m, 5, protowire.VarintType) // schema (sint32)
	m = protowire.AppendVarint(m, protowire.EncodeZigZag(int64(histogram.Schema)))
	m = protowire.AppendTag(m, 6, protowire.Fixed64Type) // zero_threshold
	m = protowire.AppendFixed64(m, math.Float64bits(histogram.ZeroThreshold))
	m = protowire.AppendTag(m, 7, protowire.VarintType) // zero_count
	m = protowire.AppendVarint(m, h.zero)
	for _, sp := range h.spans { // positive_span
		off := protowire.EncodeZigZag(int64(sp.Offset))
		m = protowire.AppendTag(m, 12, protowire.BytesType)
		m = protowire.AppendVarint(m, uint64(protowire.SizeTag(1)+protowire.SizeVarint(off)+protowire.SizeTag(2)+protowire.SizeVarint(uint64(sp.Length))))
		m = protowire.AppendTag(m, 1, protowire.VarintType) // offset (sint32)
		m = protowire.AppendVarint(m, off)
		m = protowire.AppendTag(m, 2, protowire.VarintType) // length
		m = protowire.AppendVarint(m, uint64(sp.Length))
	}
	for _, d := range h.deltas { // positive_delta (sint64, not packed: proto2)
		m = protowire.AppendTag(m, 13, protowire.VarintType)
		m = protowire.AppendVarint(m, protowire.EncodeZigZag(d))
	}
	return m
}

// histFacts is a probe latency histogram ready to expose (ok false: the
// stored histogram did not decode), built once per stored histogram.
type histFacts struct {
	runs uint64
	raw  []byte
	ok   bool
	nativeHist
}

func (c *Collector) histFactsOf(b store.MetricsBaseline) *histFacts {
	f := &histFacts{runs: b.Runs, raw: b.Histogram}
	if len(b.Histogram) == 0 {
		return f
	}
	h, err := wire.DecodeHistogram(b.Histogram)
	if err != nil {
		return f
	}
	f.ok = true
	f.count, f.sum, f.zero = h.Count(), h.Sum().Seconds(), h.ZeroCount()
	f.spans, f.deltas = h.Spans()
	f.classic = c.classicCounts(h.Buckets(), h.ZeroCount())
	if len(f.spans) == 0 {
		// An empty native histogram still says it is one.
		f.spans = []histogram.Span{{Offset: 0, Length: 0}}
	}
	return f
}

// classicCounts are the cumulative counts at the classic bounds, from the
// native buckets: buckets ascend, so each one's count goes to the first
// classic bound at or above it (none: only +Inf), then the counts
// accumulate from the zero bucket's.
func (c *Collector) classicCounts(buckets []histogram.Bucket, zero uint64) []uint64 {
	classic := make([]uint64, len(c.opts.ClassicBuckets))
	li := 0
	for _, b := range buckets {
		for li < len(classic) && b.Index > histogram.Index(c.opts.ClassicBuckets[li]) {
			li++
		}
		if li < len(classic) {
			classic[li] += b.Count
		}
	}
	cum := zero
	for i := range classic {
		cum += classic[i]
		classic[i] = cum
	}
	return classic
}
