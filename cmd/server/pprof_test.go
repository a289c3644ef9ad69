package main

import (
	"bytes"
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
}
