package exporter

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"

	"github.com/plumbline/plumbline/internal/histogram"
	"github.com/plumbline/plumbline/internal/server/store"
	"github.com/plumbline/plumbline/internal/vocab"
	"github.com/plumbline/plumbline/internal/wire"
)

var update = flag.Bool("update", false, "rewrite testdata/metrics.golden from the current exposition")

// scrape serves the collector through Handler and returns the text exposition.
func scrape(t testing.TB, c *Collector) string {
	t.Helper()
	h, err := Handler(c)
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", rec.Code, rec.Body)
	}
	return rec.Body.String()
}

func goldenCollector(t testing.TB) *Collector {
	st := openStore(t)
	seed(t, st, goldenFleet())
	c, err := New(st, fixedOptions())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestGolden compares the whole /metrics page of a fixed fleet with
// testdata/metrics.golden (go test ./internal/server/exporter -run Golden -update).
func TestGolden(t *testing.T) {
	t.Parallel()
	got := scrape(t, goldenCollector(t))
	path := filepath.Join("testdata", "metrics.golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("/metrics differs from %s (-want +got; -update rewrites it):\n%s", path, diff)
	}
}

// TestPromtoolCheckMetrics runs the golden exposition through promtool.
func TestPromtoolCheckMetrics(t *testing.T) {
	t.Parallel()
	promtool := requireTool(t, "promtool")
	exp, err := os.ReadFile(filepath.Join("testdata", "metrics.golden"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(exp)
	out, err := cmd.CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

// requireTool finds a binary, or skips — except under CI=true, where a
// missing tool fails the test.
func requireTool(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	msg := name + " not found (Debian: apt-get install prometheus prometheus-alertmanager)"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// TestSeriesPerVolume counts the series of each volume of the golden fleet
// as Prometheus stores them, for each classic bucket set, and holds the
// budget: at most 30 per volume with default settings in a Prometheus that
// ingests native histograms (a histogram is one series there, and the
// classic buckets are dropped). A Prometheus that ingests classic
// histograms stores each bucket, +Inf, _sum and _count instead: 9 series
// a histogram with the default coarse set, 21 with fine, 3 with none. The
// other series: the split reported by cause, offset and allocation
// granularity, 2 each where a stripe unit is known; the median, p99, mean
// and rate ratios against the history 4 per probe kind; a stripe-scan
// measurement behind the verdict its cost and confidence, 2.
func TestSeriesPerVolume(t *testing.T) {
	t.Parallel()
	sizes := vocab.NumIOSizes // the split series are one per I/O size
	others := map[string]int{ // every series but the three latency histograms'
		// info, split ×2 (sizes), granularity split ×2 (sizes), findings ×2, last probe,
		// ratios history ×3 kinds × 4 signals (median, p99, mean, rate)
		// + prior ×3, degraded since ×1 (random-read)
		"db01.example.com:/data": 1 + sizes + sizes + 2 + 1 + 15 + 1,
		// info, finding ×1 (stripe-unit-unknown), last probe, ratios ×15 (no stripe: no split fraction),
		// stops ×1 (refused), failing since ×1 (random-write refused)
		"db01.example.com:/log": 1 + 1 + 1 + 15 + 1 + 1,
		// info, split ×2 (sizes), granularity split ×2 (sizes), measured split cost, stripe-unit confidence, finding ×1,
		// raid missing members, last probe, ratios ×14 (the last log-write run stopped at
		// its latency ceiling: no rate), stops ×2 (busy, latency-ceiling)
		"db02.example.com:/srv/pg": 1 + sizes + sizes + 1 + 1 + 1 + 1 + 1 + 14 + 2,
	}
	const kinds = 3 // latency histograms per volume
	for _, tc := range []struct {
		set            string
		classicPerHist int // bounds + +Inf + _sum + _count
		native         int // budget per volume, native histograms ingested
		classic        int // budget per volume, classic histograms ingested
	}{
		{"", 6 + 3, 30, 53}, // the default: coarse
		{ClassicFine, 18 + 3, 30, 89},
		{ClassicNone, 0 + 3, 30, 35},
	} {
		t.Run("set="+tc.set, func(t *testing.T) {
			t.Parallel()
			opts := fixedOptions()
			if tc.set != "" {
				b, err := ClassicBucketsNamed(tc.set)
				if err != nil {
					t.Fatal(err)
				}
				opts.ClassicBuckets = b
			}
			st := openStore(t)
			seed(t, st, goldenFleet())
			c, err := New(st, opts)
			if err != nil {
				t.Fatal(err)
			}
			native, classic := seriesPerVolume(t, c)
			for id, n := range others {
				if got, want := native[id], n+kinds; got != want || got > tc.native {
					t.Errorf("%s: %d series with native histograms, want %d (budget %d)", id, got, want, tc.native)
				}
				if got, want := classic[id], n+kinds*tc.classicPerHist; got != want || got > tc.classic {
					t.Errorf("%s: %d series with classic histograms, want %d (budget %d)", id, got, want, tc.classic)
				}
				t.Logf("%s: %d series with native histograms, %d with classic", id, native[id], classic[id])
			}
			if len(native) != len(others) {
				t.Errorf("series for %d volumes, want %d: %v", len(native), len(others), native)
			}
		})
	}
}

// seriesPerVolume counts each volume's series in c's exposition (after the
// registry's consistency checks) as a Prometheus ingesting native
// histograms stores them (a histogram with native buckets is one series)
// and as one ingesting classic histograms does (each classic bucket, +Inf,
// _sum and _count).
func seriesPerVolume(t *testing.T, c *Collector) (native, classic map[string]int) {
	t.Helper()
	mfs, err := prometheus.Gatherers{c}.Gather()
	if err != nil {
		t.Fatal(err)
	}
	native, classic = map[string]int{}, map[string]int{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var host, mount string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "host":
					host = l.GetValue()
				case "mount_point":
					mount = l.GetValue()
				}
			}
			if mount == "" {
				continue
			}
			id := volumeID(host, mount)
			classic[id] += seriesOf(m)
			native[id]++
			if h := m.GetHistogram(); h != nil && len(h.GetPositiveSpan()) == 0 {
				t.Errorf("%s: %s has no native buckets", id, mf.GetName())
			}
		}
	}
	return native, classic
}

func seriesOf(m *dto.Metric) int {
	if h := m.GetHistogram(); h != nil {
		return len(h.GetBucket()) + 1 + 2 // classic buckets, +Inf, _sum, _count
	}
	return 1
}

// TestNativeBuckets checks the protobuf exposition carries native buckets
// alongside the classic ones, and that they add up.
func TestNativeBuckets(t *testing.T) {
	t.Parallel()
	c := goldenCollector(t)
	mfs, err := prometheus.Gatherers{c}.Gather() // the registry's consistency checks
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, mf := range mfs {
		if mf.GetName() != "plumbline_probe_latency_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			h := m.GetHistogram()
			found = true
			if h.GetSchema() != 3 || len(h.GetPositiveSpan()) == 0 || len(h.GetBucket()) != len(DefaultClassicBuckets()) {
				t.Errorf("%v: schema %d, %d spans, %d classic buckets", m.GetLabel(), h.GetSchema(), len(h.GetPositiveSpan()), len(h.GetBucket()))
			}
			var n, cur int64
			for _, d := range h.GetPositiveDelta() {
				cur += d
				n += cur
			}
			if uint64(n)+h.GetZeroCount() != h.GetSampleCount() {
				t.Errorf("%v: native buckets hold %d, count %d", m.GetLabel(), n, h.GetSampleCount())
			}
		}
	}
	if !found {
		t.Fatal("no plumbline_probe_latency_seconds")
	}
}

// TestFineBucketsResolveLatency: the fine classic buckets tell the
// latencies storage answers with apart — NVMe, SSD, synced log writes, a
// rotating disk, queueing, a stall — each in its own bucket, from 61 µs to
// 8 s with no bucket wider than a factor of two (two bounds, at 0.98 ms and
// 15.6 ms, once put all of a fleet's flash in one bucket).
func TestFineBucketsResolveLatency(t *testing.T) {
	t.Parallel()
	latencies := []time.Duration{
		40 * time.Microsecond, 90 * time.Microsecond, 200 * time.Microsecond, 450 * time.Microsecond, // cache, NVMe, SSD, SAN
		1500 * time.Microsecond, 3 * time.Millisecond, 6 * time.Millisecond, 12 * time.Millisecond, // log writes, HDD
		40 * time.Millisecond, 300 * time.Millisecond, 3 * time.Second, 20 * time.Second, // queueing, stalls
	}
	checkBucketsApart(t, FineClassicBuckets(), 64e-6, 8, 2, latencies)
}

// TestCoarseBucketsResolveStorageClasses: the default (coarse) classic
// buckets still put each class of storage answer in its own bucket —
// NVMe, SSD or SAN, a synced write, a rotating disk's seek, queueing, a
// stall, beyond — with no bucket wider than a factor of eight, so
// histogram_quantile over them tells the classes apart.
func TestCoarseBucketsResolveStorageClasses(t *testing.T) {
	t.Parallel()
	latencies := []time.Duration{
		90 * time.Microsecond, 400 * time.Microsecond, 3 * time.Millisecond, // NVMe, SSD/SAN, synced write
		12 * time.Millisecond, 200 * time.Millisecond, 2 * time.Second, 20 * time.Second, // HDD, queueing, stall, beyond
	}
	checkBucketsApart(t, DefaultClassicBuckets(), 128e-6, 4, 8, latencies)
}

// checkBucketsApart: bounds span first..last at least, no bucket is wider
// than maxRatio times the one below, and a stored histogram of the
// latencies (through histFactsOf) puts each in its own bucket.
func checkBucketsApart(t *testing.T, bounds []float64, first, last, maxRatio float64, latencies []time.Duration) {
	t.Helper()
	c, err := New(openStore(t), Options{ClassicBuckets: bounds})
	if err != nil {
		t.Fatal(err)
	}
	if lo, hi := bounds[0], bounds[len(bounds)-1]; lo > first || hi < last {
		t.Errorf("classic buckets span %g s to %g s, want from at most %g s to at least %g s", lo, hi, first, last)
	}
	for i := 1; i < len(bounds); i++ {
		if bounds[i] > maxRatio*bounds[i-1] {
			t.Errorf("classic bucket ≤ %g s is %.1f× as wide as the one below: want at most %g×", bounds[i], bounds[i]/bounds[i-1], maxRatio)
		}
	}
	var h histogram.Histogram
	for _, d := range latencies {
		h.Observe(d)
	}
	raw, err := proto.Marshal(wire.HistogramToProto(&h))
	if err != nil {
		t.Fatal(err)
	}
	f := c.histFactsOf(store.MetricsBaseline{Histogram: raw})
	if !f.ok {
		t.Fatal("histogram did not decode")
	}
	// Each latency alone in its bucket: the cumulative count steps by at
	// most one from a bound to the next, and len(latencies) buckets hold one.
	filled, prev := 0, uint64(0)
	for i, n := range append(f.classic, f.count) {
		if n-prev > 1 {
			le := "+Inf"
			if i < len(bounds) {
				le = fmt.Sprint(bounds[i])
			}
			t.Errorf("bucket le=%s holds %d of the latencies %v", le, n-prev, latencies)
		}
		if n > prev {
			filled++
		}
		prev = n
	}
	if filled != len(latencies) {
		t.Errorf("%d classic buckets hold the %d latencies, want one each: cumulative counts %v", filled, len(latencies), f.classic)
	}
}

// TestClassicBucketsNamed: every named set is valid for New, none exposes
// no bounds but still a histogram, and an unknown name is an error.
func TestClassicBucketsNamed(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	for _, name := range ClassicBucketSets() {
		b, err := ClassicBucketsNamed(name)
		if err != nil {
			t.Fatalf("ClassicBucketsNamed(%q): %v", name, err)
		}
		if _, err := New(st, Options{ClassicBuckets: b}); err != nil {
			t.Errorf("New(%s buckets %v): %v", name, b, err)
		}
		if (name == ClassicNone) != (len(b) == 0) {
			t.Errorf("ClassicBucketsNamed(%q) = %v", name, b)
		}
	}
	if _, err := ClassicBucketsNamed("medium"); err == nil {
		t.Error(`ClassicBucketsNamed("medium") = nil error`)
	}
}

func TestNewRejectsBadBuckets(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	for _, b := range [][]float64{{0.001}, {0x1p-9, 0x1p-10}, {-1}} {
		if _, err := New(st, Options{ClassicBuckets: b}); err == nil {
			t.Errorf("New(ClassicBuckets: %v) = nil error", b)
		}
	}
}

func TestStoreFailure(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	c, err := New(st, fixedOptions())
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	got := scrape(t, c)
	if !strings.Contains(got, "plumbline_exporter_store_success 0") {
		t.Errorf("closed store: exposition lacks plumbline_exporter_store_success 0:\n%s", got)
	}
	_ = io.Discard
}

// TestIdentityConflictsMetric: an agent identity on which two live spool
// incarnations take turns gets plumbline_agent_identity_conflicts_total;
// an agent without conflicts has no such series.
func TestIdentityConflictsMetric(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	seed(t, st, goldenFleet())
	c, err := New(st, fixedOptions())
	if err != nil {
		t.Fatal(err)
	}
	if body := scrape(t, c); strings.Contains(body, "plumbline_agent_identity_conflicts_total{") {
		t.Fatalf("a conflict series before any conflict:\n%s", body)
	}
	hosts, err := st.ListHosts(t.Context())
	if err != nil || len(hosts) == 0 {
		t.Fatalf("ListHosts = %v, %v", hosts, err)
	}
	a := hosts[0]
	for _, inc := range []string{"host-a", "host-b", "host-a", "host-b"} {
		if _, err := st.Hello(t.Context(), a.ID, inc); err != nil {
			t.Fatal(err)
		}
	}
	want := `plumbline_agent_identity_conflicts_total{agent_id="` + a.ID + `",host="` + a.Hostname + `"} 2`
	if body := scrape(t, c); !strings.Contains(body, want) {
		t.Errorf("no %s in:\n%s", want, body)
	}
}

// An agent's certificate validity (as of its last Hello) is two gauges,
// in Unix seconds; an agent without a certificate has neither.
func TestAgentCertificateMetrics(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	seed(t, st, goldenFleet()) // db01 has a certificate, db02 and db03 none
	c, err := New(st, fixedOptions())
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(scrape(t, c), "plumbline_agent_client_certificate_expiry_timestamp_seconds{"); n != 1 {
		t.Fatalf("%d expiry series, want 1 (db01's)", n)
	}
	hosts, err := st.ListHosts(t.Context())
	if err != nil || len(hosts) < 2 || hosts[1].ID != "db02" {
		t.Fatalf("ListHosts = %v, %v", hosts, err)
	}
	a := hosts[1]
	a.CertNotBefore = time.Unix(1_790_000_000, 0)
	a.CertNotAfter = a.CertNotBefore.Add(30 * 24 * time.Hour)
	if err := st.UpsertAgent(t.Context(), a); err != nil {
		t.Fatal(err)
	}
	body := scrape(t, c)
	for _, want := range []string{
		`plumbline_agent_client_certificate_expiry_timestamp_seconds{agent_id="db02",host="db02.example.com"} 1.792592e+09`,
		`plumbline_agent_client_certificate_issued_timestamp_seconds{agent_id="db02",host="db02.example.com"} 1.79e+09`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("no %s in:\n%s", want, body)
		}
	}
	if n := strings.Count(body, "plumbline_agent_client_certificate_expiry_timestamp_seconds{"); n != 2 {
		t.Errorf("%d expiry series, want 2 (db03 has no certificate)", n)
	}
}
