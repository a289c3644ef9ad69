package ingest

import (
	"fmt"
	"testing"
	"time"

	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// BenchmarkReportGeometry sends geometry snapshots from one agent over
// real gRPC + mutual TLS into a real store, one snapshot of 8 volumes a
// request, in two cases. changed: every snapshot differs from the one
// before (the partitions move between 31.5 KiB and 1 MiB, so the verdicts
// flip between misaligned and aligned): each is validated, judged by the
// server's alignment rules and stored as new volume rows and judged
// records, the work the server does when a host's storage changes.
// unchanged: every snapshot repeats the one before but for its sequence
// (an agent's periodic refresh, most snapshots of a fleet): the judged
// records stay and only their sequence and observed time move.
// volumes/s is the geometry ingest figure for one connection:
//
//	go test -run '^$' -bench ReportGeometry -benchtime 2s ./internal/server/ingest
func BenchmarkReportGeometry(b *testing.B) {
	const perSnapshot = 8
	var changing bool
	snapshot := func(seq uint64) *plumblinev1.Record {
		vols := make([]*plumblinev1.Volume, perSnapshot)
		for v := range vols {
			vols[v] = misalignedVolume(fmt.Sprintf("/data%d", v))
			if changing && seq%2 == 0 {
				vols[v].Layers[1].OffsetBytes = u64(1 << 20)
			}
		}
		return geometryRecord(seq, vols...)
	}
	for _, c := range []struct {
		name     string
		changing bool
	}{{"changed", true}, {"unchanged", false}} {
		for _, e := range engines {
			b.Run(c.name+"/"+e.Name, func(b *testing.B) {
				changing = c.changing
				benchGeometry(b, e.DSN(b), perSnapshot, snapshot)
			})
		}
	}
}

// benchGeometry sends snapshot(1), snapshot(2), ... b.N of them.
func benchGeometry(b *testing.B, dsn string, perSnapshot int, snapshot func(uint64) *plumblinev1.Record) {
	env := startServer(b, dsn, newPKI(b), Options{RatePerSecond: -1, Quota: Quota{MaxBytesPerDay: -1, RecordsPerSecond: -1}})
	c := env.agent(b, "bench")
	hello(b, c, "bench")
	next := uint64(1)
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		resp, err := c.Report(ctxT(b), &plumblinev1.ReportRequest{AgentId: "bench", Records: []*plumblinev1.Record{snapshot(next)}})
		if err != nil {
			b.Fatal(err)
		}
		if len(resp.GetRejections()) > 0 || resp.GetHighWaterSequence() != next {
			b.Fatalf("snapshot %d: high water %d, rejected %v", next, resp.GetHighWaterSequence(), resp.GetRejections())
		}
		next++
	}
	b.ReportMetric(float64(b.N*perSnapshot)/time.Since(start).Seconds(), "volumes/s")
}
