package ingest

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/plumbline/plumbline/internal/histogram"
	"github.com/plumbline/plumbline/internal/wire"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// Records with out-of-range numbers are rejected with a reason saying
// which (issue 11: negative latencies were accepted, and layer offsets
// whose sum wraps past 2^64 were judged "aligned").
func TestValidateRanges(t *testing.T) {
	t.Parallel()
	latency := func(ds ...time.Duration) func(*plumblinev1.Record) {
		return func(r *plumblinev1.Record) {
			h := &histogram.Histogram{}
			for _, d := range ds {
				h.Observe(d)
			}
			p := r.GetProbe()
			p.Latency, p.Ops, p.Bytes = wire.HistogramToProto(h), uint64(len(ds)), 0
		}
	}
	tests := []struct {
		name   string
		record func() *plumblinev1.Record
		mutate func(*plumblinev1.Record)
		want   string
	}{
		{"negative latency", func() *plumblinev1.Record { return probeRecord(1) }, func(r *plumblinev1.Record) {
			h := r.GetProbe().GetLatency()
			h.Buckets, h.Count, h.ZeroCount, h.MinNanoseconds, h.MaxNanoseconds, h.SumNanoseconds = nil, 1, 1, -1e18, -1e18, -1e18
			r.GetProbe().Ops, r.GetProbe().Bytes = 1, 0
		}, "never negative"},
		{"latency longer than a run", func() *plumblinev1.Record { return probeRecord(1) }, latency(25 * time.Hour), "max 25h0m0s"},
		{"latencies beyond queue depth × longest run", func() *plumblinev1.Record { return probeRecord(1) }, latency(20*time.Hour, 20*time.Hour, 20*time.Hour, 20*time.Hour, 20*time.Hour), "more than queue_depth 4"},
		{"offsets wrap past 2^64", func() *plumblinev1.Record {
			// 2^64 + 1 MiB: wrapped, a 1 MiB offset, "aligned" on 64 KiB.
			v := misalignedVolume("/data")
			v.Layers[0].OffsetBytes = u64(1<<20 + 2)
			v.Layers[1].OffsetBytes = u64(math.MaxInt64)
			lvm := &plumblinev1.Layer{Kind: "lvm", Device: "dm-0", OffsetBytes: u64(math.MaxInt64), Source: "sysfs"}
			v.Layers = append(v.Layers[:1], append([]*plumblinev1.Layer{lvm}, v.Layers[1:]...)...)
			return geometryRecord(1, v)
		}, nil, "add up to more than 2^63-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.record()
			if tt.mutate != nil {
				tt.mutate(r)
			}
			b, err := ValidateReport(&plumblinev1.ReportRequest{AgentId: "db1", Records: []*plumblinev1.Record{r}}, Limits{}, testNow)
			if err != nil {
				t.Fatal(err)
			}
			if len(b.Rejections) != 1 || !strings.Contains(b.Rejections[0].GetReason(), tt.want) {
				t.Fatalf("rejections %v: want one saying %q", b.Rejections, tt.want)
			}
		})
	}
}
