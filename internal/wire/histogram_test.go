package wire

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/google/go-cmp/cmp"

	"github.com/plumbline/plumbline/internal/histogram"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

func observe(ds ...time.Duration) *histogram.Histogram {
	h := &histogram.Histogram{}
	for _, d := range ds {
		h.Observe(d)
	}
	return h
}

func randomHistogram(r *rand.Rand) *histogram.Histogram {
	h := &histogram.Histogram{}
	for range r.IntN(3000) {
		switch r.IntN(200) {
		case 0:
			h.Observe(0)
		case 1:
			h.Observe(time.Duration(math.MaxInt64 / 4096)) // huge, but the sum stays in range
		case 2:
			h.Observe(1) // 1 ns: the lowest bucket
		default: // log-uniform from 1 µs to 10 s
			h.Observe(time.Duration(math.Exp(r.Float64()*math.Log(1e7)) * 1e3))
		}
	}
	return h
}

func TestHistogramRoundTrip(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(5, 6))
	cases := []*histogram.Histogram{
		{},
		observe(0),
		observe(1),
		observe(time.Duration(math.MaxInt64)),
		observe(0, 3*time.Millisecond, 3*time.Millisecond, 2*time.Second),
	}
	for range 200 {
		cases = append(cases, randomHistogram(r))
	}
	for n, h := range cases {
		p := HistogramToProto(h)
		// Through the bytes, as the server sees it.
		b, err := proto.Marshal(p)
		if err != nil {
			t.Fatalf("case %d: Marshal: %v", n, err)
		}
		var q plumblinev1.Histogram
		if err := proto.Unmarshal(b, &q); err != nil {
			t.Fatalf("case %d: Unmarshal: %v", n, err)
		}
		got, err := HistogramFromProto(&q)
		if err != nil {
			t.Fatalf("case %d: HistogramFromProto(HistogramToProto(%+v)) error: %v", n, h.Snapshot(), err)
		}
		if !got.Equal(h) {
			t.Fatalf("case %d: round trip differs:\n%s", n, cmp.Diff(h.Snapshot(), got.Snapshot()))
		}
		// Spans for Prometheus are the same whichever side computes them.
		ws, wd := h.Spans()
		gs, gd := got.Spans()
		if d := cmp.Diff([]any{ws, wd}, []any{gs, gd}); d != "" {
			t.Fatalf("case %d: spans differ after the round trip:\n%s", n, d)
		}
	}
}

func TestHistogramToProtoNil(t *testing.T) {
	t.Parallel()
	got := HistogramToProto(nil)
	want := HistogramToProto(&histogram.Histogram{})
	if d := cmp.Diff(want, got, protocmp.Transform()); d != "" {
		t.Errorf("HistogramToProto(nil) differs from an empty histogram:\n%s", d)
	}
	if got.GetSchema() != 3 || got.GetZeroThresholdSeconds() != histogram.ZeroThreshold {
		t.Errorf("HistogramToProto(nil) = %v, want schema 3 and the default zero threshold", got)
	}
}

func TestHistogramFromProtoRejects(t *testing.T) {
	t.Parallel()
	ms := int64(time.Millisecond)
	i1ms := histogram.Index(time.Millisecond.Seconds())
	// valid: two observations of 1 ms.
	valid := func() *plumblinev1.Histogram {
		return HistogramToProto(observe(time.Millisecond, time.Millisecond))
	}
	if _, err := HistogramFromProto(valid()); err != nil {
		t.Fatalf("valid histogram refused: %v", err)
	}
	tooMany := valid()
	for i := range MaxBuckets + 1 {
		tooMany.Buckets = append(tooMany.Buckets, &plumblinev1.HistogramBucket{Index: MinBucketIndex + int32(i), Count: 1})
	}
	tests := []struct {
		name   string
		mutate func(*plumblinev1.Histogram)
	}{
		{"schema", func(p *plumblinev1.Histogram) { p.Schema = 4 }},
		{"zero threshold", func(p *plumblinev1.Histogram) { p.ZeroThresholdSeconds = 1e-3 }},
		{"zero threshold NaN", func(p *plumblinev1.Histogram) { p.ZeroThresholdSeconds = math.NaN() }},
		{"too many buckets", func(p *plumblinev1.Histogram) { p.Buckets = tooMany.Buckets }},
		{"index too high", func(p *plumblinev1.Histogram) { p.Buckets[0].Index = MaxBucketIndex + 1 }},
		{"index too low", func(p *plumblinev1.Histogram) { p.Buckets[0].Index = MinBucketIndex - 1 }},
		{"duplicate index", func(p *plumblinev1.Histogram) {
			p.Buckets = []*plumblinev1.HistogramBucket{{Index: i1ms, Count: 1}, {Index: i1ms, Count: 1}}
		}},
		{"descending", func(p *plumblinev1.Histogram) {
			p.Buckets = []*plumblinev1.HistogramBucket{{Index: i1ms, Count: 1}, {Index: i1ms - 1, Count: 1}}
		}},
		{"zero count bucket", func(p *plumblinev1.Histogram) {
			p.Buckets = append(p.Buckets, &plumblinev1.HistogramBucket{Index: i1ms + 1, Count: 0})
		}},
		{"count mismatch", func(p *plumblinev1.Histogram) { p.Count = 3 }},
		{"count overflow", func(p *plumblinev1.Histogram) {
			p.Buckets = []*plumblinev1.HistogramBucket{{Index: i1ms, Count: math.MaxUint64}, {Index: i1ms + 1, Count: 3}}
			p.Count = 2
		}},
		{"empty with sum", func(p *plumblinev1.Histogram) {
			p.Buckets, p.Count, p.MinNanoseconds, p.MaxNanoseconds = nil, 0, 0, 0
		}},
		{"min above max", func(p *plumblinev1.Histogram) { p.MinNanoseconds = p.MaxNanoseconds + 1 }},
		{"sum too large", func(p *plumblinev1.Histogram) { p.SumNanoseconds = 3 * ms }},
		{"sum too small", func(p *plumblinev1.Histogram) { p.SumNanoseconds = ms }},
		{"sum overflow shape", func(p *plumblinev1.Histogram) { p.SumNanoseconds = math.MinInt64 }},
		{"max outside top bucket", func(p *plumblinev1.Histogram) { p.MaxNanoseconds = 2 * ms; p.SumNanoseconds = 3 * ms }},
		{"min outside bottom bucket", func(p *plumblinev1.Histogram) { p.MinNanoseconds = ms / 2; p.SumNanoseconds = ms + ms/2 }},
		{"zero bucket but positive min", func(p *plumblinev1.Histogram) { p.ZeroCount = 1; p.Count = 3 }},
		{"only zero bucket but positive max", func(p *plumblinev1.Histogram) {
			p.Buckets, p.ZeroCount, p.MinNanoseconds, p.MaxNanoseconds, p.SumNanoseconds = nil, 2, 0, ms, ms
		}},
		{"nil bucket", func(p *plumblinev1.Histogram) { p.Buckets = append(p.Buckets, nil) }},
		// Issue 11: min = sum = -1e18 ns was accepted (the zero bucket).
		{"negative latency", func(p *plumblinev1.Histogram) {
			p.Buckets, p.Count, p.ZeroCount, p.MinNanoseconds, p.MaxNanoseconds, p.SumNanoseconds = nil, 1, 1, -1e18, -1e18, -1e18
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := valid()
			tt.mutate(p)
			if h, err := HistogramFromProto(p); !errors.Is(err, ErrInvalidHistogram) {
				t.Errorf("HistogramFromProto(%v) = %v, %v; want an ErrInvalidHistogram", p, h, err)
			}
		})
	}
	if _, err := HistogramFromProto(nil); !errors.Is(err, ErrInvalidHistogram) {
		t.Errorf("HistogramFromProto(nil) error = %v, want ErrInvalidHistogram", err)
	}
}

func TestBucketIndexRange(t *testing.T) {
	t.Parallel()
	if MinBucketIndex != histogram.Index(1e-9) || histogram.UpperBound(MaxBucketIndex) < float64(math.MaxInt64)/1e9 {
		t.Errorf("index range [%d, %d] does not cover 1 ns .. MaxInt64 ns", MinBucketIndex, MaxBucketIndex)
	}
	if MaxBuckets < 400 || MaxBuckets > 600 {
		t.Errorf("MaxBuckets = %d, want about 505 (1 ns .. 292 years at 8 buckets per power of two)", MaxBuckets)
	}
}

// FuzzHistogramFromProto decodes untrusted bytes the way the server does:
// it must never panic, and whatever it accepts must be canonical — the
// accepted message converts back to the very same message.
func FuzzHistogramFromProto(f *testing.F) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, h := range []*histogram.Histogram{{}, observe(0), observe(1, time.Second), randomHistogram(r), observe(time.Duration(math.MaxInt64/2 + 1))} {
		b, err := proto.Marshal(HistogramToProto(h))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add([]byte{0x08, 0x06}) // schema 3, nothing else
	f.Fuzz(func(t *testing.T, b []byte) {
		var p plumblinev1.Histogram
		if err := proto.Unmarshal(b, &p); err != nil {
			return
		}
		h, err := HistogramFromProto(&p)
		if err != nil {
			if !errors.Is(err, ErrInvalidHistogram) {
				t.Fatalf("error %v does not wrap ErrInvalidHistogram", err)
			}
			return
		}
		// Unknown fields are not part of the histogram.
		p.ProtoReflect().SetUnknown(nil)
		for _, bk := range p.Buckets {
			bk.ProtoReflect().SetUnknown(nil)
		}
		if d := cmp.Diff(&p, HistogramToProto(h), protocmp.Transform()); d != "" {
			t.Fatalf("accepted message is not canonical:\n%s", d)
		}
		if h.Count() != p.GetCount() || int64(h.Sum()) != p.GetSumNanoseconds() {
			t.Fatalf("accepted histogram count %d sum %v, message says %d, %d", h.Count(), h.Sum(), p.GetCount(), p.GetSumNanoseconds())
		}
		if h.Min() < 0 || h.Sum() < 0 {
			t.Fatalf("accepted a negative latency: min %d ns, sum %d ns", h.Min(), h.Sum())
		}
		// Merging accepted histograms either fails with ErrOverflow and
		// changes nothing, or gives a histogram that is accepted again:
		// what the server stores never stops decoding.
		m := &histogram.Histogram{}
		for range 4 {
			before := m.Snapshot()
			if err := m.Merge(h); err != nil {
				if !errors.Is(err, histogram.ErrOverflow) {
					t.Fatalf("Merge error %v does not wrap ErrOverflow", err)
				}
				if d := cmp.Diff(before, m.Snapshot()); d != "" {
					t.Fatalf("a failed Merge changed the histogram:\n%s", d)
				}
				break
			}
			if _, err := HistogramFromProto(HistogramToProto(m)); err != nil {
				t.Fatalf("merged histogram refused: %v", err)
			}
		}
	})
}

// The bucket range constants are the buckets of 1 ns and of the longest
// time.Duration, as histogram.Index computes them.
func TestBucketIndexConstants(t *testing.T) {
	t.Parallel()
	if got := histogram.Index(time.Duration(1).Seconds()); got != MinBucketIndex {
		t.Errorf("histogram.Index(1ns) = %d, MinBucketIndex = %d", got, MinBucketIndex)
	}
	if got := histogram.Index(time.Duration(math.MaxInt64).Seconds()); got != MaxBucketIndex {
		t.Errorf("histogram.Index(MaxInt64 ns) = %d, MaxBucketIndex = %d", got, MaxBucketIndex)
	}
}

// DecodeHistogram reads back what EncodeHistogram wrote and refuses no
// bytes, garbage and an invalid message alike with ErrInvalidHistogram.
func TestEncodeDecodeHistogram(t *testing.T) {
	t.Parallel()
	for _, h := range []*histogram.Histogram{{}, observe(0), observe(0, 3*time.Millisecond, 2*time.Second)} {
		b, err := EncodeHistogram(h)
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecodeHistogram(b)
		if err != nil || !back.Equal(h) {
			t.Errorf("DecodeHistogram(EncodeHistogram(%+v)) = %+v, %v", h.Snapshot(), back, err)
		}
	}
	bad, err := proto.Marshal(&plumblinev1.Histogram{Schema: histogram.Schema, ZeroThresholdSeconds: histogram.ZeroThreshold, Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"no bytes": nil, "garbage": {0xff, 0xff, 0xff}, "count without buckets": bad} {
		if _, err := DecodeHistogram(b); !errors.Is(err, ErrInvalidHistogram) {
			t.Errorf("DecodeHistogram(%s) = %v, want ErrInvalidHistogram", name, err)
		}
	}
}
