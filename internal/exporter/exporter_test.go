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
	"github.com/plumbline/plumbline/internal/store"
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
// testdata/metrics.golden (go test ./internal/exporter -run Golden -update).
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
// (histogram buckets, _sum and _count each count as one) and holds the
// budget: at most 89 per volume with default settings (30 before the
// classic buckets went from 2 bounds to 18; the split reported by cause,
// offset and allocation granularity, adds 2 where a stripe unit is known;
// the p99, mean and rate ratios against the history 3 per probe kind; a
// stripe-scan measurement behind the verdict its cost and confidence, 2).
func TestSeriesPerVolume(t *testing.T) {
	t.Parallel()
	c := goldenCollector(t)
	mfs, err := prometheus.Gatherers{c}.Gather() // the registry's consistency checks
	if err != nil {
		t.Fatal(err)
	}
	perVolume := map[string]int{}
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
			perVolume[volumeID(host, mount)] += seriesOf(m)
		}
	}
	// Default classic buckets: a histogram is 18 bounds + +Inf + _sum + _count = 21 series.
	const hist = 18 + 1 + 2
	want := map[string]int{
		// info, split ×2, granularity split ×2, findings ×2, last probe, latency 3 kinds,
		// ratios history ×3 kinds × 4 signals (median, p99, mean, rate)
		// + prior ×3, degraded since ×1 (random-read)
		"db01.example.com:/data": 1 + 2 + 2 + 2 + 1 + 3*hist + 15 + 1,
		// info, finding ×1 (stripe-unit-unknown), last probe, latency 3 kinds, ratios ×15 (no stripe: no split fraction),
		// stops ×1 (refused), failing since ×1 (random-write refused)
		"db01.example.com:/log": 1 + 1 + 1 + 3*hist + 15 + 1 + 1,
		// info, split ×2, granularity split ×2, measured split cost, stripe-unit confidence, finding ×1,
		// raid missing members, last probe, latency 3 kinds, ratios ×14 (the last log-write run stopped at
		// its latency ceiling: no rate), stops ×2 (busy, latency-ceiling)
		"db02.example.com:/srv/pg": 1 + 2 + 2 + 1 + 1 + 1 + 1 + 1 + 3*hist + 14 + 2,
	}
	for id, n := range perVolume {
		t.Logf("%s: %d series", id, n)
		if n > 89 {
			t.Errorf("%s: %d series, budget 89", id, n)
		}
		if w := want[id]; n != w {
			t.Errorf("%s: %d series, want %d", id, n, w)
		}
	}
	if len(perVolume) != 3 {
		t.Errorf("series for %d volumes, want 3: %v", len(perVolume), perVolume)
	}
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

// TestDefaultBucketsResolveLatency: the default classic buckets tell the
// latencies storage answers with apart — NVMe, SSD, synced log writes, a
// rotating disk, queueing, a stall — each in its own bucket, from 61 µs to
// 8 s with no bucket wider than a factor of two (issue 11: two bounds, at
// 0.98 ms and 15.6 ms, put all of a fleet's flash in one bucket). The counts
// are those of a stored histogram of these latencies, through histFactsOf.
func TestDefaultBucketsResolveLatency(t *testing.T) {
	t.Parallel()
	c, err := New(openStore(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	bounds := c.opts.ClassicBuckets
	if first, last := bounds[0], bounds[len(bounds)-1]; first > 64e-6 || last < 8 {
		t.Errorf("classic buckets span %g s to %g s, want from at most 64 µs to at least 8 s", first, last)
	}
	for i := 1; i < len(bounds); i++ {
		if bounds[i] > 2*bounds[i-1] {
			t.Errorf("classic bucket ≤ %g s is %.1f× as wide as the one below: want at most 2×", bounds[i], bounds[i]/bounds[i-1])
		}
	}
	latencies := []time.Duration{
		40 * time.Microsecond, 90 * time.Microsecond, 200 * time.Microsecond, 450 * time.Microsecond, // cache, NVMe, SSD, SAN
		1500 * time.Microsecond, 3 * time.Millisecond, 6 * time.Millisecond, 12 * time.Millisecond, // log writes, HDD
		40 * time.Millisecond, 300 * time.Millisecond, 3 * time.Second, 20 * time.Second, // queueing, stalls
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
