package main

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
)

// TestPprofFlag: --debug.pprof-listen-address is off by default and, when
// set, serves the heap profile on its own listener.
func TestPprofFlag(t *testing.T) {
	var out, errb bytes.Buffer
	cfg, _, err := parseFlags([]string{"--dev", "--data-dir", t.TempDir()}, &out, &errb)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.PprofAddress != "" {
		t.Errorf("PprofAddress = %q by default, want empty (off)", cfg.PprofAddress)
	}
	cfg, _, err = parseFlags([]string{"--dev", "--data-dir", t.TempDir(), "--debug.pprof-listen-address", "127.0.0.1:0"}, &out, &errb)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.PprofAddress != "127.0.0.1:0" {
		t.Fatalf("PprofAddress = %q, want 127.0.0.1:0", cfg.PprofAddress)
	}

	var logs bytes.Buffer
	stop, addr, err := startPprof("127.0.0.1:0", slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	resp, err := http.Get("http://" + addr + "/debug/pprof/heap?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "# HeapInuse") {
		t.Errorf("GET /debug/pprof/heap?debug=1: %s, %.200q; want 200 and the MemStats", resp.Status, body)
	}
	if !strings.Contains(logs.String(), "without authentication") {
		t.Errorf("log %q: want a warning that pprof has no authentication", logs.String())
	}
}
