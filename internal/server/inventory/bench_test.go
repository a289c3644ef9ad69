package inventory

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/plumbline/plumbline/internal/lab/pgtest"
	"github.com/plumbline/plumbline/internal/server/ingest"
	"github.com/plumbline/plumbline/internal/server/projection"
	"github.com/plumbline/plumbline/internal/server/store"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// The inventory benchmarks run over a fleet seeded through the real ingest
// path: ingest.Service.Hello and Report (validation, the server's
// alignment rules, the store's dedup and group commit), called in process
// by many agent identities at once — the gRPC transport and mTLS aside.
//
//	PLUMBLINE_BENCH_VOLUMES   volumes (default 100000), 4 per host
//	PLUMBLINE_BENCH_SQLITE    reuse this SQLite file (seeded when new)
//	PLUMBLINE_BENCH_POSTGRES  reuse this PostgreSQL database (a DSN; seeded when empty)
//	PLUMBLINE_BENCH_NO_SYNC   with a fleet seeded and synced before: no full sync
//	                          first; the API reads as a replica that does not
//	                          run the projection (ready once its index is built)
//
// go test -run '^$' -bench . -benchtime 200x ./internal/server/inventory/

type benchFleet struct {
	st   *store.Store
	api  *API
	srv  *httptest.Server
	seed time.Duration
	sync time.Duration
}

var (
	benchMu     sync.Mutex
	benchFleets = map[string]*benchFleet{}
)

func benchVolumes() int {
	if n, err := strconv.Atoi(os.Getenv("PLUMBLINE_BENCH_VOLUMES")); err == nil && n > 0 {
		return n
	}
	return 100_000
}

// fleet returns the seeded fleet of an engine, seeding it on first use.
func fleet(b *testing.B, engine string) *benchFleet {
	b.Helper()
	benchMu.Lock()
	defer benchMu.Unlock()
	if f := benchFleets[engine]; f != nil {
		return f
	}
	var dsn string
	switch engine {
	case "sqlite":
		path := os.Getenv("PLUMBLINE_BENCH_SQLITE")
		if path == "" {
			dir, err := os.MkdirTemp("", "plumbline-bench-")
			if err != nil {
				b.Fatal(err)
			}
			path = filepath.Join(dir, "plumbline.db")
		}
		dsn = "sqlite://" + path
	case "postgres":
		// The database outlives this benchmark: every benchmark shares it.
		if dsn = os.Getenv("PLUMBLINE_BENCH_POSTGRES"); dsn == "" {
			dsn = pgtest.DSN(processTB{b})
		}
	}
	ctx := context.Background()
	st, err := store.Open(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	f := &benchFleet{st: st}
	n := benchVolumes()
	hosts := n / 4
	var have int
	if err := st.QueryHosts(ctx, store.HostQuery{Limit: 1}, func(*store.InventoryHost) error { have++; return nil }); err != nil {
		b.Fatal(err)
	}
	if have == 0 {
		start := time.Now()
		seedThroughIngest(b, st, hosts)
		f.seed = time.Since(start)
	}
	api := New(st, Options{SyncPeriod: benchSyncPeriod()})
	start := time.Now()
	if os.Getenv("PLUMBLINE_BENCH_NO_SYNC") != "" && have > 0 {
		api = New(st, Options{SyncPeriod: benchSyncPeriod(), Projection: projection.New(st, projection.Options{})})
		err = api.refreshIndex(ctx)
	} else {
		err = api.Sync(ctx, true)
	}
	if err != nil {
		b.Fatal(err)
	}
	f.sync = time.Since(start)
	f.api = api
	// As served: Run syncs and refreshes the cached summaries in the
	// background while the requests run.
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); api.Run(runCtx) }()
	benchCleanups = append(benchCleanups, func() { stop(); <-done })
	f.srv = httptest.NewServer(api)
	b.Logf("%s: %d volumes on %d hosts; seeded through ingest in %v; first full inventory sync %v", engine, n, hosts, f.seed.Round(time.Millisecond), f.sync.Round(time.Millisecond))
	benchFleets[engine] = f
	return f
}

// seedThroughIngest registers hosts agents and stores one geometry
// snapshot of four volumes each, 64 agents at a time.
func seedThroughIngest(b *testing.B, st *store.Store, hosts int) {
	svc := ingest.New(st, ingest.Options{Insecure: true, RatePerSecond: -1})
	ctx := context.Background()
	var next atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, 64)
	for range 64 {
		wg.Go(func() {
			for {
				h := int(next.Add(1)) - 1
				if h >= hosts {
					return
				}
				id := fmt.Sprintf("agent-%06d", h)
				hostname := fmt.Sprintf("db%06d.example", h)
				if _, err := svc.Hello(ctx, &plumblinev1.HelloRequest{AgentId: id, AgentVersion: "0.1.0",
					Host: &plumblinev1.Host{Hostname: hostname, Os: "linux", Kernel: "6.1"}}); err != nil {
					errc <- err
					return
				}
				var vols []*plumblinev1.Volume
				for v := range 4 {
					vols = append(vols, fleetVolume(4*h+v, fmt.Sprintf("/data%d", v)))
				}
				_, err := svc.Report(ctx, &plumblinev1.ReportRequest{AgentId: id, Records: []*plumblinev1.Record{{
					Sequence: 1, ProducedAt: timestamppb.Now(),
					Payload: &plumblinev1.Record_Geometry{Geometry: &plumblinev1.GeometrySnapshot{Trigger: "start",
						Inventory: &plumblinev1.Inventory{Host: &plumblinev1.Host{Hostname: hostname, Os: "linux"}, Volumes: vols}}},
				}}})
				if err != nil {
					errc <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		b.Fatal(err)
	}
}

var benchEngines = []string{"sqlite", "postgres"}

// processTB defers cleanups to the end of the test binary (benchCleanup,
// from TestMain), so a seeded fleet serves every benchmark.
type processTB struct{ testing.TB }

var benchCleanups []func()

func (processTB) Cleanup(f func()) { benchCleanups = append(benchCleanups, f) }

func benchCleanup() {
	for i := len(benchCleanups) - 1; i >= 0; i-- {
		benchCleanups[i]()
	}
}

// latencies records request times and reports p50 and p99.
type latencies []time.Duration

func (l latencies) report(b *testing.B) {
	slices.Sort(l)
	q := func(p float64) float64 {
		return float64(l[min(len(l)-1, int(p*float64(len(l))))].Microseconds()) / 1000
	}
	b.ReportMetric(q(0.50), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	b.ReportMetric(float64(l[len(l)-1].Microseconds())/1000, "max-ms")
}

func fetch(b *testing.B, url string) []byte {
	resp, err := http.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		b.Fatalf("GET %s: %d %v %.300s", url, resp.StatusCode, err, body)
	}
	return body
}

// BenchmarkVolumesPage: one filtered, sorted page of 100 volumes (JSON),
// cycling through several filter combinations, each walked a few pages deep.
func BenchmarkVolumesPage(b *testing.B) {
	queries := []string{
		"verdict=misaligned&limit=100",
		"verdict=misaligned&raid_level=raid10&sort=-split_fraction&limit=100",
		"data_offset_bytes=32256&fs=ntfs&limit=100",
		"host=db01*&limit=100",
		"rule=partition-offset-stripe-unit&severity=critical&sort=host&limit=100",
		"media=sata-ssd&min_split_fraction=0.05&sort=-data_offset_bytes&limit=100",
		"mount_point=/data2&verdict=aligned&sort=-host&limit=100",
		"degraded=false&sort=profile&limit=100",
	}
	for _, e := range benchEngines {
		b.Run(e, func(b *testing.B) {
			f := fleet(b, e)
			if rate := benchLiveRate(); rate > 0 {
				stop := liveFleet(b, f.st, rate)
				defer stop()
			}
			tokens := make([]string, len(queries))
			perQuery := make([][]time.Duration, len(queries))
			var lat latencies
			b.ResetTimer()
			for i := range b.N {
				qi := i % len(queries)
				url := f.srv.URL + "/api/v1/volumes?" + queries[qi]
				if tokens[qi] != "" && (i/len(queries))%4 != 0 {
					url += "&next_page_token=" + tokens[qi]
				}
				start := time.Now()
				body := fetch(b, url)
				took := time.Since(start)
				if took > 50*time.Millisecond {
					b.Logf("slow: request %d (%s, token %t): %v", i, queries[qi], strings.Contains(url, "next_page_token"), took.Round(time.Microsecond))
				}
				lat = append(lat, took)
				perQuery[qi] = append(perQuery[qi], took)
				tokens[qi] = nextToken(body)
			}
			b.StopTimer()
			for qi, l := range perQuery {
				slices.Sort(l)
				if len(l) > 0 {
					b.Logf("%-75s median %v max %v", queries[qi], l[len(l)/2].Round(time.Microsecond), l[len(l)-1].Round(time.Microsecond))
				}
			}
			lat.report(b)
		})
	}
}

func nextToken(body []byte) string {
	const key = `"next_page_token": "`
	s := string(body)
	if j := strings.Index(s, key); j >= 0 {
		rest := s[j+len(key):]
		if k := strings.IndexByte(rest, '"'); k >= 0 {
			return rest[:k]
		}
	}
	return ""
}

// BenchmarkSummary: the whole fleet's summary, and one filtered.
func BenchmarkSummary(b *testing.B) {
	for _, e := range benchEngines {
		b.Run(e, func(b *testing.B) {
			f := fleet(b, e)
			// What a summary costs when it is not cached (the first request
			// of a query, and each recomputation after a change).
			ctx := context.Background()
			start := time.Now()
			ix, err := buildSummaryIndex(ctx, f.api.st)
			if err != nil {
				b.Fatal(err)
			}
			b.Logf("summary index built in %v (%d volumes, at generation %d)", time.Since(start).Round(time.Millisecond), len(ix.vols), ix.gen)
			f.api.sumIdx.Store(ix)
			for _, q := range []struct{ name string }{
				{""}, {"raid_level=raid10"}, {"verdict=misaligned"}, {"severity=critical"}, {"media=sata-ssd&fs=ntfs"},
				{"rule=partition-offset-stripe-unit"}, {"degraded=true"}, {"degraded=false&raid_level=raid5"},
				{"host=db001000.example"}, {"host=db01*"}, {"host=*7&verdict=misaligned"}, {"mount_point=/data*"},
			} {
				// What a summary costs when it is not cached (the first request
				// of a query, and each recomputation after a change): the SQL
				// aggregates, and as served (the index when it answers).
				flt := filterOf(b, q.name)
				start := time.Now()
				if _, err := f.api.st.SummarizeVolumes(ctx, flt, defaultTop); err != nil {
					b.Fatal(err)
				}
				sqlTook := time.Since(start)
				start = time.Now()
				if _, err := f.api.summarize(ctx, ix, flt, defaultTop); err != nil {
					b.Fatal(err)
				}
				b.Logf("summary computed uncached (%s): SQL %v, as served (index: %v) %v", q.name, sqlTook.Round(100*time.Microsecond),
					ix.answers(flt), time.Since(start).Round(100*time.Microsecond))
			}
			// A summary read right after a change: the request answers from
			// the newest complete index (the API's loop builds the next).
			for i := range 3 {
				if err := f.st.PutBaselineStates(ctx, []store.BaselineState{{AgentID: "agent-000000", MountPoint: "/data0",
					State: "ok", Reason: fmt.Sprint("bench change ", i), UpdatedAt: time.Now()}}); err != nil {
					b.Fatal(err)
				}
				start := time.Now()
				fetch(b, f.srv.URL+"/api/v1/summary")
				whole := time.Since(start)
				start = time.Now()
				fetch(b, f.srv.URL+"/api/v1/summary?raid_level=raid10")
				b.Logf("summary right after a change: whole fleet %v (from the newest complete index), then raid10 %v",
					whole.Round(100*time.Microsecond), time.Since(start).Round(100*time.Microsecond))
			}
			var lat latencies
			b.ResetTimer()
			for i := range b.N {
				url := f.srv.URL + "/api/v1/summary"
				if i%2 == 1 {
					url += "?raid_level=raid10"
				}
				start := time.Now()
				fetch(b, url)
				lat = append(lat, time.Since(start))
			}
			b.StopTimer()
			lat.report(b)
		})
	}
}

// BenchmarkCSVAll: every volume as CSV, streamed; peak-heap is the
// highest heap in use (sampled every millisecond) above the heap before
// the request, server and client together.
func BenchmarkCSVAll(b *testing.B) {
	for _, e := range benchEngines {
		b.Run(e, func(b *testing.B) {
			f := fleet(b, e)
			var lat latencies
			var peak uint64
			b.ResetTimer()
			for range b.N {
				runtime.GC()
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				base := ms.HeapInuse
				stop := make(chan struct{})
				var wg sync.WaitGroup
				wg.Go(func() {
					t := time.NewTicker(time.Millisecond)
					defer t.Stop()
					for {
						select {
						case <-stop:
							return
						case <-t.C:
							var m runtime.MemStats
							runtime.ReadMemStats(&m)
							if m.HeapInuse > base && m.HeapInuse-base > peak {
								peak = m.HeapInuse - base
							}
						}
					}
				})
				start := time.Now()
				resp, err := http.Get(f.srv.URL + "/api/v1/volumes?format=csv")
				if err != nil {
					b.Fatal(err)
				}
				n, err := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				lat = append(lat, time.Since(start))
				close(stop)
				wg.Wait()
				if err != nil || resp.StatusCode != 200 || n == 0 {
					b.Fatalf("CSV: %d bytes, %d, %v", n, resp.StatusCode, err)
				}
				b.SetBytes(n)
			}
			b.StopTimer()
			lat.report(b)
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
		})
	}
}

// benchSyncPeriod is PLUMBLINE_BENCH_SYNC_PERIOD: how often Run syncs in
// the background (default 0: Options' default, as served).
func benchSyncPeriod() time.Duration {
	d, _ := time.ParseDuration(os.Getenv("PLUMBLINE_BENCH_SYNC_PERIOD"))
	return d
}

// benchLiveRate is PLUMBLINE_BENCH_LIVE: geometry snapshots per second
// that agents keep sending through ingest while the pages are read (0:
// a fleet at rest). 25,000 hosts each sending one every 15 minutes is 28.
func benchLiveRate() int {
	n, _ := strconv.Atoi(os.Getenv("PLUMBLINE_BENCH_LIVE"))
	return n
}

// liveFleet re-reports the seeded hosts' four volumes through ingest, rate
// snapshots a second, round the fleet, each a new sequence (so every one
// re-derives four inventory rows), until the returned stop is called.
func liveFleet(b *testing.B, st *store.Store, rate int) (stop func()) {
	svc := ingest.New(st, ingest.Options{Insecure: true, RatePerSecond: -1})
	hosts := benchVolumes() / 4
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var sent atomic.Int64
	wg.Go(func() {
		t := time.NewTicker(time.Second / time.Duration(rate))
		defer t.Stop()
		for k := 0; ; k++ {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			h := (k * 7919) % hosts
			id := fmt.Sprintf("agent-%06d", h)
			hostname := fmt.Sprintf("db%06d.example", h)
			hw, err := st.HighWater(ctx, id, "")
			if err != nil {
				continue
			}
			if _, err := svc.Hello(ctx, &plumblinev1.HelloRequest{AgentId: id, AgentVersion: "0.1.0",
				Host: &plumblinev1.Host{Hostname: hostname, Os: "linux", Kernel: "6.1"}}); err != nil {
				continue
			}
			var vols []*plumblinev1.Volume
			for v := range 4 {
				vols = append(vols, fleetVolume(4*h+v, fmt.Sprintf("/data%d", v)))
			}
			if _, err := svc.Report(ctx, &plumblinev1.ReportRequest{AgentId: id, Records: []*plumblinev1.Record{{
				Sequence: hw + 1, ProducedAt: timestamppb.Now(),
				Payload: &plumblinev1.Record_Geometry{Geometry: &plumblinev1.GeometrySnapshot{Trigger: "start",
					Inventory: &plumblinev1.Inventory{Host: &plumblinev1.Host{Hostname: hostname, Os: "linux"}, Volumes: vols}}},
			}}}); err == nil {
				sent.Add(1)
			}
		}
	})
	start := time.Now()
	return func() {
		cancel()
		wg.Wait()
		b.Logf("live fleet: %d geometry snapshots through ingest in %v", sent.Load(), time.Since(start).Round(time.Millisecond))
	}
}
