package ingest

import (
	"fmt"
	"testing"
	"time"

	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// BenchmarkReport sends batches of probe records from one agent over real
// gRPC + mutual TLS into a real store; records/s is the ingest figure for
// one connection (cmd/fleetsim measures the fleet).
func BenchmarkReport(b *testing.B) {
	for _, batch := range []int{100, 1000} {
		for _, e := range engines {
			b.Run(fmt.Sprintf("%s/batch=%d", e.Name, batch), func(b *testing.B) {
				env := startServer(b, e.DSN(b), newPKI(b), Options{RatePerSecond: -1})
				c := env.agent(b, "bench")
				hello(b, c, "bench")
				next := uint64(1)
				b.ResetTimer()
				start := time.Now()
				for range b.N {
					recs := probeRecords(next, next+uint64(batch)-1)
					if _, err := c.Report(ctxT(b), &plumblinev1.ReportRequest{AgentId: "bench", Records: recs}); err != nil {
						b.Fatal(err)
					}
					next += uint64(batch)
				}
				b.ReportMetric(float64(b.N*batch)/time.Since(start).Seconds(), "records/s")
			})
		}
	}
}

// BenchmarkValidateReport is the validation of one report (CPU only, no
// transport or store): a geometry snapshot of two volumes and probe
// results, the mix cmd/fleetsim sends.
func BenchmarkValidateReport(b *testing.B) {
	req := &plumblinev1.ReportRequest{AgentId: "bench", Records: append(
		[]*plumblinev1.Record{geometryRecord(1, misalignedVolume("/data"), misalignedVolume("/log"))},
		probeRecords(2, 100)...)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ValidateReport(req, Limits{}, testNow); err != nil {
			b.Fatal(err)
		}
	}
}
