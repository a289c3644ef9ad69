package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestNoChildProcesses: the agent never runs another program (a database
// host's agent that may exec is one more thing to audit). os/exec must not
// be in the agent binary's dependency graph, on Linux or on Windows.
func TestNoChildProcesses(t *testing.T) {
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(gobin); err != nil {
		if gobin, err = exec.LookPath("go"); err != nil {
			t.Skip("no go command")
		}
	}
	for _, goos := range []string{"linux", "windows"} {
		t.Run(goos, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(gobin, "list", "-deps", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", ".")
			cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH=amd64", "CGO_ENABLED=0")
			out, err := cmd.Output()
			if err != nil {
				var stderr string
				if ee, ok := err.(*exec.ExitError); ok {
					stderr = string(ee.Stderr)
				}
				t.Fatalf("GOOS=%s go list -deps: %v\n%s", goos, err, stderr)
			}
			var deps, importers []string
			for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				f := strings.Fields(line)
				if len(f) == 0 {
					continue
				}
				deps = append(deps, f[0])
				if slices.Contains(f[1:], "os/exec") {
					importers = append(importers, f[0])
				}
			}
			if !slices.Contains(deps, "github.com/plumbline/plumbline/cmd/agent") {
				t.Fatalf("GOOS=%s go list -deps lists no cmd/agent:\n%s", goos, out)
			}
			if slices.Contains(deps, "os/exec") {
				t.Errorf("GOOS=%s: os/exec is in cmd/agent's dependencies, imported by %s; the agent must not run other programs", goos, strings.Join(importers, ", "))
			}
		})
	}
}
