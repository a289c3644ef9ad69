package main

import (
	"net/http"
	"path/filepath"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// TestServerSelfMetrics: the server's /metrics says how the server itself
// is — build info with its version, the process and Go runtime
// collectors, which loops this replica leads, and when its evaluator and
// inventory sync last succeeded — beside the fleet's series.
func TestServerSelfMetrics(t *testing.T) {
	t.Parallel()
	srv := startInProcess(t, "--dev", "--data-dir", filepath.Join(t.TempDir(), "d"), "--grpc.listen-address", "127.0.0.1:0",
		"--web.listen-address", "127.0.0.1:0", "--baseline.interval", "1s")
	var fams map[string]*dto.MetricFamily
	deadline := time.Now().Add(30 * time.Second)
	for {
		fams = scrapeFamilies(t, "http://"+srv.webAddr+"/metrics")
		if gauge(fams, "plumbline_evaluator_last_success_timestamp_seconds") > 0 &&
			gauge(fams, "plumbline_server_inventory_sync_last_success_timestamp_seconds") > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, name := range []string{"plumbline_evaluator_last_success_timestamp_seconds", "plumbline_server_inventory_sync_last_success_timestamp_seconds"} {
		if v := gauge(fams, name); v < float64(time.Now().Add(-time.Minute).Unix()) {
			t.Errorf("%s = %v, want a time in the last minute", name, v)
		}
	}
	bi := fams["plumbline_build_info"]
	if bi == nil || len(bi.GetMetric()) != 1 {
		t.Fatalf("plumbline_build_info = %v, want one series", bi)
	}
	labels := map[string]string{}
	for _, l := range bi.GetMetric()[0].GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	for _, l := range []string{"version", "revision", "branch", "goversion", "goos", "goarch", "tags"} {
		if _, ok := labels[l]; !ok {
			t.Errorf("plumbline_build_info has no %s label: %v", l, labels)
		}
	}
	if labels["version"] != version {
		t.Errorf("plumbline_build_info version %q, want %q", labels["version"], version)
	}
	for _, name := range []string{"process_start_time_seconds", "process_resident_memory_bytes", "process_open_fds", "go_goroutines", "go_gc_duration_seconds",
		"plumbline_server_inventory_sync_failures_total", "plumbline_evaluator_failures_total"} {
		if fams[name] == nil {
			t.Errorf("no %s", name)
		}
	}
	leads := map[string]float64{}
	for _, m := range fams["plumbline_server_leader"].GetMetric() {
		leads[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
	}
	for _, loop := range []string{"evaluator", "inventory", "retention"} {
		if leads[loop] != 1 {
			t.Errorf("plumbline_server_leader{loop=%q} = %v, want 1 (one server on SQLite leads every loop): %v", loop, leads[loop], leads)
		}
	}
}

// scrapeFamilies GETs a /metrics page in the text format.
func scrapeFamilies(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return fams
}

// gauge is the value of a family's only series (0 when absent).
func gauge(fams map[string]*dto.MetricFamily, name string) float64 {
	f := fams[name]
	if f == nil || len(f.GetMetric()) != 1 {
		return 0
	}
	return f.GetMetric()[0].GetGauge().GetValue()
}
