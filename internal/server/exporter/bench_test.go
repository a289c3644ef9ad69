package exporter

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/plumbline/plumbline/internal/server/store"
	"github.com/plumbline/plumbline/internal/vocab"
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

// benchFleet is a store of 10,000 volumes (1,000 agents × 10), each with
// three probe kinds' baselines (a ratio on every signal, a cohort ratio)
// and histograms and a stop count, seeded through the store API, and an
// evaluator that judges runs of some volumes (their states move on: one
// more run, a new histogram) as the server's would.
type benchFleet struct {
	st             *store.Store
	states         []store.ProbeBaseline
	h2             []byte
	pass           int
	passes, runs   atomic.Uint64 // the evaluator's pass and run counts, as the server wires them
	clock          atomic.Int64  // offset from epoch
	agents, perVol int
}

func newBenchFleet(b *testing.B) *benchFleet {
	f := &benchFleet{st: openStore(b), agents: 1000, perVol: 10, h2: runHistogram(b, 2100*time.Microsecond, 100)}
	ctx := context.Background()
	var stops []store.StopCount
	h := runHistogram(b, 2*time.Millisecond, 100)
	for a := range f.agents {
		id := fmt.Sprintf("db%04d", a)
		if err := f.st.UpsertAgent(ctx, store.Agent{ID: id, Hostname: id + ".example.com", LastSeen: epoch}); err != nil {
			b.Fatal(err)
		}
		g := store.Record{Sequence: 1, Kind: store.KindGeometry, ProducedAt: epoch}
		for v := range f.perVol {
			pv := mdVolume(fmt.Sprintf("/data%d", v))
			if v%2 == 0 {
				pv = legacyVolume(pv.MountPoint)
			}
			g.Volumes = append(g.Volumes, storeVolume(b, pv))
			for _, k := range vocab.JudgedProbeKindNames() {
				f.states = append(f.states, store.ProbeBaseline{AgentID: id, MountPoint: pv.MountPoint, Kind: k, Profile: "p", Detector: []byte{},
					Status: "ok", Reference: "history", Ratio: 1.05, HistoryRatio: 1.05, CohortRatio: 0.97, CohortReference: "cohort",
					TailRatio: 1.1, MeanRatio: 1.02, RateRatio: 1, Trusted: true, LastRun: epoch, Runs: 100, Histogram: h})
			}
			stops = append(stops, store.StopCount{AgentID: id, MountPoint: pv.MountPoint, Kind: "random-read", Reason: "busy", Runs: 3})
		}
		if _, err := f.st.AppendBatch(ctx, id, []store.Record{g}); err != nil {
			b.Fatal(err)
		}
	}
	if err := f.st.SaveBaselines(ctx, store.BaselineUpdate{States: f.states, StopCounts: stops}); err != nil {
		b.Fatal(err)
	}
	return f
}

// judge is an evaluator pass that judged new runs of n volumes.
func (f *benchFleet) judge(b *testing.B, n int) {
	f.pass++
	total := f.agents * f.perVol
	from := (f.pass * n) % total
	var changed []store.ProbeBaseline
	for v := from; v < from+n; v++ {
		for k := range 3 {
			s := f.states[(v%total)*3+k]
			s.Runs += uint64(f.pass)
			s.Histogram, s.HistoryRatio, s.LastRun = f.h2, 1.05+float64(f.pass)/1000, epoch.Add(time.Duration(f.pass)*time.Second)
			changed = append(changed, s)
		}
	}
	if err := f.st.SaveBaselines(context.Background(), store.BaselineUpdate{States: changed}); err != nil {
		b.Fatal(err)
	}
	f.runs.Add(uint64(len(changed)))
	f.passes.Add(1)
}

// snapshot is a new geometry snapshot of the i-th agent (modulo the
// fleet), its volumes' geometry swapped (legacy for md and back), judged
// as the server judges it.
func (f *benchFleet) snapshot(b *testing.B, i int) {
	ctx := context.Background()
	id := fmt.Sprintf("db%04d", i%f.agents)
	hw, err := f.st.HighWater(ctx, id, "")
	if err != nil {
		b.Fatal(err)
	}
	g := store.Record{Sequence: hw + 1, Kind: store.KindGeometry, ProducedAt: epoch}
	for v := range f.perVol {
		pv := mdVolume(fmt.Sprintf("/data%d", v))
		if (v+int(hw))%2 == 1 {
			pv = legacyVolume(pv.MountPoint)
		}
		g.Volumes = append(g.Volumes, storeVolume(b, pv))
	}
	if _, err := f.st.AppendBatch(ctx, id, []store.Record{g}); err != nil {
		b.Fatal(err)
	}
}

func (f *benchFleet) collector(b *testing.B) *Collector {
	c, err := New(f.st, Options{Now: func() time.Time { return epoch.Add(time.Duration(f.clock.Load())) }, Evaluator: func() EvaluatorStatus {
		return EvaluatorStatus{LastSuccess: epoch, Passes: f.passes.Load(), Runs: f.runs.Load()}
	}})
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// serveBench serves one scrape of target (a /metrics URL) and returns the
// body's size.
func serveBench(b *testing.B, c *Collector, target, accept, encoding string) int {
	req := httptest.NewRequest(http.MethodGet, target, nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	if encoding != "" {
		req.Header.Set("Accept-Encoding", encoding)
	}
	w := &discardWriter{header: http.Header{}}
	c.ServeHTTP(w, req)
	if w.code != 0 && w.code != http.StatusOK {
		b.Fatalf("GET %s: %d", target, w.code)
	}
	return w.n
}

// BenchmarkScrape serves /metrics over the bench fleet — between changes
// (the cached body), after an agent reported, after an agent sent a new
// geometry snapshot, after an evaluator pass that
// judged runs of 10% of the volumes or of all of them, and after MaxAge
// with nothing signalled:
//
//	go test ./internal/server/exporter -run '^$' -bench 'Scrape$' -benchtime 5x
func BenchmarkScrape(b *testing.B) {
	f := newBenchFleet(b)
	ctx := context.Background()
	c := f.collector(b)
	volumes := f.agents * f.perVol
	serveBench(b, c, "/metrics", "", "") // the first scrape reads and encodes everything
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
			id := fmt.Sprintf("db%04d", i%f.agents)
			if err := f.st.UpsertAgent(ctx, store.Agent{ID: id, Hostname: id + ".example.com", LastSeen: epoch.Add(time.Duration(i+1) * time.Millisecond)}); err != nil {
				b.Fatal(err)
			}
		}},
		// A host sent a new geometry snapshot: the volumes read again,
		// its volumes' series built again.
		{"geometry/text", "", "", func(i int) { f.snapshot(b, i) }},
		// The evaluator finished a pass that judged runs of 10% of the
		// volumes: their rows read and their series built again.
		{"evaluated/text", "", "", func(int) { f.judge(b, volumes/10) }},
		{"evaluated/protobuf-gzip", prometheusAccept, "gzip", func(int) { f.judge(b, volumes/10) }},
		// A pass that judged runs of every volume: everything read and built again.
		{"evaluated-all/text", "", "", func(int) { f.judge(b, volumes) }},
		// MaxAge passed with nothing signalled: everything read again, nothing changed.
		{"expired/text", "", "", func(int) { f.clock.Add(int64(31 * time.Second)) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			size := serveBench(b, c, "/metrics", tc.accept, tc.encoding)
			i := 0
			var cpu time.Duration
			for b.Loop() {
				if tc.change != nil {
					b.StopTimer()
					tc.change(i)
					i++
					b.StartTimer()
				}
				before := processCPU()
				serveBench(b, c, "/metrics", tc.accept, tc.encoding)
				cpu += processCPU() - before
			}
			b.ReportMetric(float64(cpu.Microseconds())/1e3/float64(b.N), "cpu-ms/op")
			b.ReportMetric(float64(size), "bytes/scrape")
		})
	}
}

// BenchmarkScrapeShards: the scrape after an evaluator pass that changed
// every one of the 10,000 volumes, of one shard of 10 (1,000 volumes) and
// of the whole exposition, in the formats Prometheus asks for; then the
// ten shards' scrapes after a pass that changed 10% of them:
//
//	go test ./internal/server/exporter -run '^$' -bench ScrapeShards -benchtime 5x
func BenchmarkScrapeShards(b *testing.B) {
	f := newBenchFleet(b)
	c := f.collector(b)
	volumes := f.agents * f.perVol
	for _, tc := range []struct{ name, target, accept, encoding string }{
		{"shard-3-of-10/text", "/metrics?shard=3&shards=10", "", ""},
		{"shard-3-of-10/protobuf-gzip", "/metrics?shard=3&shards=10", prometheusAccept, "gzip"},
		{"unsharded/text", "/metrics", "", ""},
		{"unsharded/protobuf-gzip", "/metrics", prometheusAccept, "gzip"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			size := serveBench(b, c, tc.target, tc.accept, tc.encoding)
			var cpu time.Duration
			for b.Loop() {
				b.StopTimer()
				f.judge(b, volumes)
				b.StartTimer()
				before := processCPU()
				serveBench(b, c, tc.target, tc.accept, tc.encoding)
				cpu += processCPU() - before
			}
			b.ReportMetric(float64(cpu.Microseconds())/1e3/float64(b.N), "cpu-ms/op")
			b.ReportMetric(float64(size), "bytes/scrape")
		})
	}
	// As Prometheus scrapes: after a pass that judged 10% of the volumes,
	// every shard of 10 in turn (the later ones share the pass's reads);
	// an op is the ten scrapes.
	b.Run("all-10-shards-after-10%-pass/protobuf-gzip", func(b *testing.B) {
		var cpu time.Duration
		for b.Loop() {
			b.StopTimer()
			f.judge(b, volumes/10)
			b.StartTimer()
			before := processCPU()
			for i := range 10 {
				serveBench(b, c, fmt.Sprintf("/metrics?shard=%d&shards=10", i), prometheusAccept, "gzip")
			}
			cpu += processCPU() - before
		}
		b.ReportMetric(float64(cpu.Microseconds())/1e3/float64(b.N), "cpu-ms/op")
	})
}

// BenchmarkEncodeHistogram: one latency histogram of a volume in both
// formats with the fine classic buckets (21 text lines), the most a
// histogram costs.
func BenchmarkEncodeHistogram(b *testing.B) {
	c, err := New(openStore(b), Options{ClassicBuckets: FineClassicBuckets()})
	if err != nil {
		b.Fatal(err)
	}
	f := c.histFactsOf(store.MetricsBaseline{Histogram: runHistogram(b, 2*time.Millisecond, 1000), Runs: 1})
	if !f.ok {
		b.Fatal("histogram did not decode")
	}
	values := []string{"db0001", "db0001.example.com", "/var/lib/postgresql", "random-read"} // agent_id, host, mount_point, kind
	b.ReportAllocs()
	for b.Loop() {
		c.fams[famLatency].encodeHistogram(famLatency, values, c.classic, &f.nativeHist)
	}
}
