package exporter

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/plumbline/plumbline/internal/store"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// discardWriter is a ResponseWriter that counts the body and keeps none of
// it, as a connection would: the benchmark measures the server, not a
// ResponseRecorder growing a buffer to the body's size.
type discardWriter struct {
	header http.Header
	code   int
	n      int
}

func (w *discardWriter) Header() http.Header  { return w.header }
func (w *discardWriter) WriteHeader(code int) { w.code = code }
func (w *discardWriter) Write(p []byte) (int, error) {
	w.n += len(p)
	return len(p), nil
}

// BenchmarkScrape serves /metrics over a store of 10,000 volumes (1,000
// agents × 10), each with three probe kinds' baselines and histograms and a
// stop count, seeded through the store API — between changes (the cached
// body), after an agent reported, after an evaluator pass that judged runs
// of 10% of the volumes or of all of them, and after MaxAge with nothing
// signalled:
//
//	go test ./internal/exporter -run '^$' -bench Scrape -benchtime 5x
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
	var passes, runs atomic.Uint64 // the evaluator's pass and run counts, as the server wires them
	if err := st.SaveBaselines(ctx, store.BaselineUpdate{States: states, StopCounts: stops}); err != nil {
		b.Fatal(err)
	}
	// An evaluator pass judges new runs of some volumes: their states move
	// on (one more run, a new histogram), the others stay as they were.
	h2 := runHistogram(b, 2100*time.Microsecond, 100)
	pass := 0
	judge := func(volumes int) {
		pass++
		from := (pass * volumes) % (agents * perAgent)
		var changed []store.ProbeBaseline
		for v := from; v < from+volumes; v++ {
			for k := range 3 {
				s := states[(v%(agents*perAgent))*3+k]
				s.Runs += uint64(pass)
				s.Histogram, s.HistoryRatio, s.LastRun = h2, 1.05+float64(pass)/1000, now.Add(time.Duration(pass)*time.Second)
				changed = append(changed, s)
			}
		}
		if err := st.SaveBaselines(ctx, store.BaselineUpdate{States: changed}); err != nil {
			b.Fatal(err)
		}
		runs.Add(uint64(len(changed)))
		passes.Add(1)
	}
	var clock atomic.Int64 // offset from now
	c, err := New(st, Options{Now: func() time.Time { return now.Add(time.Duration(clock.Load())) }, Evaluator: func() EvaluatorStatus {
		return EvaluatorStatus{LastSuccess: now, Passes: passes.Load(), Runs: runs.Load()}
	}})
	if err != nil {
		b.Fatal(err)
	}
	serve := func(b *testing.B, accept, encoding string) int {
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		if encoding != "" {
			req.Header.Set("Accept-Encoding", encoding)
		}
		w := &discardWriter{header: http.Header{}}
		c.ServeHTTP(w, req)
		if w.code != 0 && w.code != http.StatusOK {
			b.Fatalf("GET /metrics: %d", w.code)
		}
		return w.n
	}
	serve(b, "", "") // the first scrape reads and encodes everything
	for _, tc := range []struct {
		name, accept, encoding string
		change                 func(i int)
	}{
		// Between changes: the cached body.
		{"cached/text", "", "", nil},
		{"cached/protobuf", prometheusAccept, "", nil},
		{"cached/protobuf-gzip", prometheusAccept, "gzip", nil},
		// An agent reported since the last scrape: agents and volumes read again.
		{"ingest/text", "", "", func(i int) {
			id := fmt.Sprintf("db%04d", i%agents)
			if err := st.UpsertAgent(ctx, store.Agent{ID: id, Hostname: id + ".example.com", LastSeen: now.Add(time.Duration(i+1) * time.Millisecond)}); err != nil {
				b.Fatal(err)
			}
		}},
		// The evaluator finished a pass that judged runs of 10% of the
		// volumes: their rows read and their series built again.
		{"evaluated/text", "", "", func(int) { judge(agents * perAgent / 10) }},
		{"evaluated/protobuf-gzip", prometheusAccept, "gzip", func(int) { judge(agents * perAgent / 10) }},
		// A pass that judged runs of every volume: everything read and built again.
		{"evaluated-all/text", "", "", func(int) { judge(agents * perAgent) }},
		// MaxAge passed with nothing signalled: everything read again, nothing changed.
		{"expired/text", "", "", func(int) { clock.Add(int64(31 * time.Second)) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			size := serve(b, tc.accept, tc.encoding)
			b.ReportMetric(float64(size), "bytes/scrape")
			i := 0
			for b.Loop() {
				if tc.change != nil {
					b.StopTimer()
					tc.change(i)
					i++
					b.StartTimer()
				}
				serve(b, tc.accept, tc.encoding)
			}
		})
	}
}

// BenchmarkEncodeHistogram: one latency histogram of a volume in both
// formats with the default classic buckets (21 text lines).
func BenchmarkEncodeHistogram(b *testing.B) {
	c, err := New(openStore(b), Options{})
	if err != nil {
		b.Fatal(err)
	}
	f := c.histFactsOf(store.MetricsBaseline{Histogram: runHistogram(b, 2*time.Millisecond, 1000), Runs: 1})
	if !f.ok {
		b.Fatal("histogram did not decode")
	}
	values := []string{"db0001.example.com", "/var/lib/postgresql", "random-read"}
	b.ReportAllocs()
	for b.Loop() {
		c.fams[famLatency].encodeHistogram(famLatency, values, c.classic, &f.nativeHist)
	}
}
