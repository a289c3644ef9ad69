package inventory

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/plumbline/plumbline/internal/server/store"
)

// BenchmarkSummaryAfterChange: the first /api/v1/summary of the whole
// fleet read right after an inventory change (one volume's baseline state
// written through the store), then the same summary filtered to RAID 10;
// an op is the change (not timed) and the two reads. Whatever work a
// change leaves for the next reader is in these figures, which is why
// the cached /summary of BenchmarkSummary does not show it:
//
//	PLUMBLINE_BENCH_VOLUMES=20000 go test -run '^$' -bench SummaryAfterChange -benchtime 20x ./internal/server/inventory/
func BenchmarkSummaryAfterChange(b *testing.B) {
	for _, e := range benchEngines {
		b.Run(e, func(b *testing.B) {
			f := fleet(b, e)
			ctx := context.Background()
			var first, filtered latencies
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				if err := f.st.PutBaselineStates(ctx, []store.BaselineState{{AgentID: "agent-000000", MountPoint: "/data0",
					State: "ok", Reason: fmt.Sprint("bench after change ", i, " ", time.Now().UnixNano()), UpdatedAt: time.Now()}}); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				start := time.Now()
				fetch(b, f.srv.URL+"/api/v1/summary")
				first = append(first, time.Since(start))
				start = time.Now()
				fetch(b, f.srv.URL+"/api/v1/summary?raid_level=raid10")
				filtered = append(filtered, time.Since(start))
			}
			b.StopTimer()
			first.report(b)
			filtered.reportAs(b, "raid10-")
		})
	}
}

// reportAs reports p50 and p99 under units named with prefix.
func (l latencies) reportAs(b *testing.B, prefix string) {
	slices.Sort(l)
	q := func(p float64) float64 {
		return float64(l[min(len(l)-1, int(p*float64(len(l))))].Microseconds()) / 1000
	}
	b.ReportMetric(q(0.50), prefix+"p50-ms")
	b.ReportMetric(q(0.99), prefix+"p99-ms")
}
