package main

import (
	"strings"
	"testing"
)

// TestProbeCLIRewriteNotice: a changed --file-size rewrites the probe file
// and says so on stderr, with the old and the new size; an unchanged one
// says nothing, and a piped stderr gets no progress lines.
func TestProbeCLIRewriteNotice(t *testing.T) {
	dir := t.TempDir()
	common := []string{"--dir", dir, "--min-free", "0", "--min-free-percent", "0", "--iops", "0", "--fill-rate", "0", "--busy-threshold", "0", "--ops", "20"}
	code, _, errOut := probeCLI(t, append(common, "--file-size", "8MiB")...)
	if code != 0 || errOut != "" {
		t.Fatalf("first run: exit %d, stderr %q; want 0 and nothing on a piped stderr", code, errOut)
	}
	code, _, errOut = probeCLI(t, append(common, "--file-size", "8MiB")...)
	if code != 0 || errOut != "" {
		t.Fatalf("same size: exit %d, stderr %q; want 0 and nothing", code, errOut)
	}
	code, out, errOut := probeCLI(t, append(common, "--file-size", "4MiB")...)
	if code != 0 || !strings.Contains(errOut, "--file-size changed from 8MiB to 4MiB: the probe file is rewritten in full") {
		t.Errorf("changed size: exit %d, stderr %q; want the rewrite notice", code, errOut)
	}
	if strings.Count(errOut, "\n") != 1 || strings.Contains(errOut, "\r") {
		t.Errorf("changed size on a piped stderr: %q, want one notice line and no progress", errOut)
	}
	if !strings.Contains(out, "4MiB") {
		t.Errorf("table output: %s", out)
	}
}
