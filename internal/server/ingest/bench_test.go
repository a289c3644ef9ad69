package ingest

import (
	"fmt"
	"testing"
	"time"

	"github.com/plumbline/plumbline/internal/server/store"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// BenchmarkReport sends batches of probe records from one agent over real
// gRPC + mutual TLS into a real store; records/s is the ingest figure for
// one connection (cmd/fleetsim measures the fleet).
func BenchmarkReport(b *testing.B) {
	for _, batch := range []int{100, 1000} {
		for _, e := range engines {
			b.Run(fmt.Sprintf("%s/batch=%d", e.Name, batch), func(b *testing.B) {
				// The limits off: this measures ingest, not the record-rate
				// quota (100 records/s after a burst of 10,000).
				env := startServer(b, e.DSN(b), newPKI(b), Options{RatePerSecond: -1, Quota: Quota{MaxBytesPerDay: -1, RecordsPerSecond: -1}})
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

// BenchmarkRejectedFlood is one certificate sending batches of 800
// records that are all rejected (each with 4 KiB the server refuses), the
// quotas off: stored-bytes/record is what one rejected record costs in
// the records table (sequence, short reason, row), records/s how fast one
// connection can send them. The database grows at most their product,
// until the agent's storage quota (grpc.quota.max_bytes_per_day) stops it.
func BenchmarkRejectedFlood(b *testing.B) {
	for _, e := range engines {
		b.Run(e.Name, func(b *testing.B) {
			dsn := e.DSN(b)
			env := startServer(b, dsn, newPKI(b), Options{RatePerSecond: -1, Quota: Quota{MaxBytesPerDay: -1, RecordsPerSecond: -1}})
			c := env.agent(b, "flood")
			hello(b, c, "flood")
			next := uint64(1)
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				if _, err := c.Report(ctxT(b), &plumblinev1.ReportRequest{AgentId: "flood", Records: badRecords(next, 800)}); err != nil {
					b.Fatal(err)
				}
				next += 800
			}
			elapsed := time.Since(start)
			b.StopTimer()
			rows := dbRows(b, dsn, `SELECT COALESCE(SUM(LENGTH(payload) + LENGTH(reason)), 0) FROM records WHERE agent_id = ?`, "flood")
			var size float64
			fmt.Sscan(rows[0][0], &size)
			b.ReportMetric(size/float64(b.N*800)+float64(store.RowCost), "stored-bytes/record")
			b.ReportMetric(float64(b.N*800)/elapsed.Seconds(), "records/s")
		})
	}
}
