package exporter

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/plumbline/plumbline/internal/store"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// BenchmarkScrape serves /metrics over a store of 10,000 volumes (1,000
// agents × 10), each with three probe kinds' baselines and histograms and a
// stop count, seeded through the store API:
//
//	go test ./internal/exporter -run '^$' -bench Scrape -benchtime 20x
func BenchmarkScrape(b *testing.B) {
	st := openStore(b)
	ctx := context.Background()
	const agents, perAgent = 1000, 10
	now := epoch
	var states []store.ProbeBaseline
	var stops []store.StopCount
	h := runHistogram(b, 2*time.Millisecond, 100)
	for a := range agents {
		id := fmt.Sprintf("db%04d", a)
		if err := st.UpsertAgent(ctx, store.Agent{ID: id, Hostname: id + ".example.com", LastSeen: now}); err != nil {
			b.Fatal(err)
		}
		g := store.Record{Sequence: 1, Kind: store.KindGeometry, ProducedAt: now}
		for v := range perAgent {
			var pv *plumblinev1.Volume
			mount := fmt.Sprintf("/data%d", v)
			if v%2 == 0 {
				pv = legacyVolume(mount)
			} else {
				pv = mdVolume(mount)
			}
			g.Volumes = append(g.Volumes, storeVolume(b, pv))
			for _, k := range []string{"random-read", "random-write", "log-write"} {
				states = append(states, store.ProbeBaseline{AgentID: id, MountPoint: mount, Kind: k, Profile: "p", Detector: []byte{},
					Status: "ok", Reference: "history", Ratio: 1.05, HistoryRatio: 1.05, CohortRatio: 0.97, CohortReference: "cohort",
					Trusted: true, LastRun: now, Runs: 100, Histogram: h})
			}
			stops = append(stops, store.StopCount{AgentID: id, MountPoint: mount, Kind: "random-read", Reason: "busy", Runs: 3})
		}
		if _, err := st.AppendBatch(ctx, id, []store.Record{g}); err != nil {
			b.Fatal(err)
		}
	}
	if err := st.SaveBaselines(ctx, store.BaselineUpdate{States: states, StopCounts: stops}); err != nil {
		b.Fatal(err)
	}
	c, err := New(st, Options{Now: func() time.Time { return now }})
	if err != nil {
		b.Fatal(err)
	}
	handler, err := Handler(c)
	if err != nil {
		b.Fatal(err)
	}
	serve := func() int {
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		if rec.Code != 200 {
			b.Fatalf("GET /metrics: %d", rec.Code)
		}
		n, _ := io.Copy(io.Discard, rec.Body)
		return int(n)
	}
	size := serve() // warm the per-volume caches, as every scrape after the first finds them
	b.ReportMetric(float64(size), "bytes/scrape")
	b.ResetTimer()
	for range b.N {
		serve()
	}
}
