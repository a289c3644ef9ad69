package exporter

import (
	"bytes"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
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
// budget: at most 30 per volume with default settings.
func TestSeriesPerVolume(t *testing.T) {
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
	// Default classic buckets: a histogram is 2 bounds + +Inf + _sum + _count = 5 series.
	want := map[string]int{
		// info, split ×2, findings ×2, last probe, latency 3×5, ratios history ×3 + prior ×3,
		// degraded since ×1 (random-read)
		"db01.example.com:/data": 1 + 2 + 2 + 1 + 15 + 6 + 1,
		// info, finding ×1 (stripe-unit-unknown), last probe, latency 3×5, ratios ×6 (no stripe: no split fraction),
		// stops ×1 (refused), failing since ×1 (random-write refused)
		"db01.example.com:/log": 1 + 1 + 1 + 15 + 6 + 1 + 1,
		// info, split ×2, finding ×1, raid missing members, last probe, latency 3×5,
		// ratios ×6, stops ×2 (busy, latency-ceiling)
		"db02.example.com:/srv/pg": 1 + 2 + 1 + 1 + 1 + 15 + 6 + 2,
	}
	for id, n := range perVolume {
		t.Logf("%s: %d series", id, n)
		if n > 30 {
			t.Errorf("%s: %d series, budget 30", id, n)
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
			if h.GetSchema() != 3 || len(h.GetPositiveSpan()) == 0 || len(h.GetBucket()) != len(DefaultClassicBuckets) {
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

func TestNewRejectsBadBuckets(t *testing.T) {
	st := openStore(t)
	for _, b := range [][]float64{{0.001}, {0x1p-9, 0x1p-10}, {-1}} {
		if _, err := New(st, Options{ClassicBuckets: b}); err == nil {
			t.Errorf("New(ClassicBuckets: %v) = nil error", b)
		}
	}
}

func TestStoreFailure(t *testing.T) {
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
