package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plumbline/plumbline/internal/agent/probe"
)

func probeCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := runProbe(t.Context(), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestProbeCLIJSONAndCleanup(t *testing.T) {
	dir := t.TempDir()
	common := []string{"--dir", dir, "--file-size", "8MiB", "--min-free", "0", "--min-free-percent", "0", "--iops", "0", "--fill-rate", "0", "--busy-threshold", "0"}
	code, out, errOut := probeCLI(t, append(common, "--ops", "120", "--kind", "random-write", "--block-size", "4KiB", "--qd", "2", "--format", "json")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var res struct {
		Kind          string  `json:"kind"`
		File          string  `json:"file"`
		BlockSize     int     `json:"block_size_bytes"`
		QueueDepth    int     `json:"queue_depth"`
		Ops           int     `json:"ops"`
		Errors        int     `json:"errors"`
		CacheBypass   bool    `json:"cache_bypass"`
		StoppedReason *string `json:"stopped_reason"`
		Latency       struct {
			P50, P999 float64
		} `json:"latency_seconds"`
		Histogram struct {
			Schema int    `json:"schema"`
			Count  uint64 `json:"count"`
		} `json:"latency_histogram"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	if res.Kind != "random-write" || res.BlockSize != 4096 || res.QueueDepth != 2 || res.Ops != 120 || res.Errors != 0 ||
		!res.CacheBypass || res.StoppedReason == nil || *res.StoppedReason != "" || res.Latency.P50 <= 0 ||
		res.Histogram.Schema != 3 || res.Histogram.Count != 120 || res.File != filepath.Join(dir, probe.DefaultFileName) {
		t.Errorf("unexpected result: %s", out)
	}

	code, out, _ = probeCLI(t, append(common, "--ops", "10", "--kind", "log-write", "--sync", "fdatasync")...)
	if code != 0 || !strings.Contains(out, "log-write, 8KiB, qd 1, sync fdatasync") || !strings.Contains(out, "p99.9") {
		t.Errorf("table output (exit %d):\n%s", code, out)
	}

	code, out, _ = probeCLI(t, "--cleanup", "--dir", dir)
	if code != 0 || !strings.Contains(out, "removed") {
		t.Errorf("--cleanup: exit %d, %q", code, out)
	}
	if _, err := os.Stat(filepath.Join(dir, probe.DefaultFileName)); !os.IsNotExist(err) {
		t.Errorf("probe file still there: %v", err)
	}
}

func TestProbeCLIRefusalsAndUsage(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, probe.DefaultFileName), []byte("not ours, a database"), 0o600)
	tests := []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"--dir", dir, "--min-free", "0", "--min-free-percent", "0", "--file-size", "8MiB"}, 1, "not a Plumbline probe file"},
		{[]string{"--cleanup", "--dir", dir}, 1, "not a Plumbline probe file"},
		{[]string{}, 2, "--dir is required"},
		{[]string{"--dir", dir, "--kind", "scan"}, 2, `kind "scan"`},
		{[]string{"--dir", dir, "--block-size", "8kbit"}, 2, "invalid size"},
		{[]string{"--dir", dir, "--block-size", "3KiB"}, 2, "power of two"},
		{[]string{"--dir", dir, "--kind", "log-write", "--qd", "4"}, 2, "single-threaded"},
		{[]string{"--dir", dir, "--format", "xml"}, 2, "--format"},
	}
	for _, tt := range tests {
		code, _, errOut := probeCLI(t, tt.args...)
		if code != tt.code || !strings.Contains(errOut, tt.msg) {
			t.Errorf("agent probe %q: exit %d, stderr %q; want exit %d mentioning %q", tt.args, code, errOut, tt.code, tt.msg)
		}
	}
	b, _ := os.ReadFile(filepath.Join(dir, probe.DefaultFileName))
	if string(b) != "not ours, a database" {
		t.Errorf("foreign file changed: %q", b)
	}
}

// TestProbeCLIStripeScanJSON: `agent probe --kind stripe-scan --format
// json` carries stripe_scan.inferred_stripe_unit_bytes and confidence
// beside the usual fields, and takes 2000 ops unless told otherwise.
func TestProbeCLIStripeScanJSON(t *testing.T) {
	dir := t.TempDir()
	common := []string{"--dir", dir, "--kind", "stripe-scan", "--file-size", "16MiB", "--min-free", "0", "--min-free-percent", "0",
		"--iops", "0", "--fill-rate", "0", "--busy-threshold", "0", "--format", "json"}
	code, out, errOut := probeCLI(t, append(common, "--ops", "300")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var res struct {
		Kind       string `json:"kind"`
		Ops        int    `json:"ops"`
		OpsBudget  int    `json:"ops_budget"`
		StripeScan *struct {
			Unit       *int64   `json:"inferred_stripe_unit_bytes"`
			Confidence *float64 `json:"confidence"`
			Candidates []struct {
				Unit int64 `json:"unit_bytes"`
			} `json:"candidates"`
		} `json:"stripe_scan"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	if res.Kind != "stripe-scan" || res.Ops != 300 || res.StripeScan == nil || res.StripeScan.Unit == nil || res.StripeScan.Confidence == nil || len(res.StripeScan.Candidates) != 7 {
		t.Fatalf("result %s", out)
	}
	if code, _, errOut := probeCLI(t, append(common, "--ops", "2001")...); code != 2 || !strings.Contains(errOut, "at most 2000") {
		t.Errorf("--ops 2001: exit %d, %s", code, errOut)
	}
	code, out, _ = probeCLI(t, append(common, "--max-duration", "1ns")...)
	if code != 0 || !strings.Contains(out, `"ops_budget": 2000`) {
		t.Errorf("default budget: exit %d, %s", code, out)
	}
}
