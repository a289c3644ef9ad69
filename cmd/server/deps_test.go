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

const module = "github.com/plumbline/plumbline/"

// The two binaries stay apart: the server links no discovery, no agent
// configuration, no probe engine, spool or agent runtime; the agent links
// none of the server's store, ingest, inventory, exporter, evaluator,
// projection, leader or retention. Shared pieces (vocab, align, policy,
// agentkeys, mounts, identity, certmint, labels, atomicfile, ...) are
// linked by both. A package under internal/agent/ or internal/server/
// (the tree's sides) counts as its side's whatever its name.
func TestBinariesStayApart(t *testing.T) {
	for _, tc := range []struct {
		binary    string
		sidePath  string // the other side's subtree, forbidden whole
		forbidden []string
	}{
		{"cmd/server", "internal/agent/", []string{
			"internal/geometry", "internal/config", "internal/probe", "internal/spool", "internal/agent",
		}},
		{"cmd/agent", "internal/server/", []string{
			"internal/store", "internal/ingest", "internal/inventory", "internal/exporter", "internal/evaluator",
			"internal/projection", "internal/leader", "internal/retention", "internal/server", "internal/enroll/authority",
		}},
	} {
		for _, goos := range []string{"linux", "windows"} {
			t.Run(tc.binary+"/"+goos, func(t *testing.T) {
				t.Parallel()
				imports := depsOf(t, module+tc.binary, goos)
				// The test must see the real graph: a shared package both
				// binaries link is in it.
				if _, ok := imports[module+"internal/vocab"]; !ok {
					t.Fatalf("GOOS=%s go list -deps %s lacks internal/vocab: not the binary's dependencies?", goos, tc.binary)
				}
				for dep := range imports {
					p, ok := strings.CutPrefix(dep, module)
					if !ok {
						continue
					}
					if slices.Contains(tc.forbidden, p) || strings.HasPrefix(p, tc.sidePath) {
						t.Errorf("GOOS=%s %s links %s (imported by %s)", goos, tc.binary, p, strings.Join(importersOf(imports, dep), ", "))
					}
				}
			})
		}
	}
}

// depsOf is go list -deps of pkg for goos: each dependency and its
// imports.
func depsOf(t *testing.T, pkg, goos string) map[string][]string {
	t.Helper()
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(gobin); err != nil {
		if gobin, err = exec.LookPath("go"); err != nil {
			t.Skip("no go command")
		}
	}
	cmd := exec.Command(gobin, "list", "-deps", "-f", `{{.ImportPath}} {{join .Imports " "}}`, pkg)
	cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH=amd64", "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("GOOS=%s go list -deps %s: %v\n%s", goos, pkg, err, stderr)
	}
	imports := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			imports[f[0]] = f[1:]
		}
	}
	if _, ok := imports[pkg]; !ok {
		t.Fatalf("GOOS=%s go list -deps %s does not list %s:\n%s", goos, pkg, pkg, out)
	}
	return imports
}

// importersOf are the packages of the graph that import dep directly.
func importersOf(imports map[string][]string, dep string) []string {
	var out []string
	for p, imps := range imports {
		if slices.Contains(imps, dep) {
			out = append(out, strings.TrimPrefix(p, module))
		}
	}
	slices.Sort(out)
	return out
}

// The shared packages link neither side, and the enrollment authority
// does not go through ingest for what it shares with it (the identity, the
// service registration).
func TestSharedPackagesLinkNoSide(t *testing.T) {
	t.Parallel()
	either := []string{"internal/geometry", "internal/config", "internal/probe", "internal/spool", "internal/agent",
		"internal/ingest", "internal/store", "internal/server"}
	for pkg, forbidden := range map[string][]string{
		"internal/identity":         either,
		"internal/certmint":         either,
		"internal/agentkeys":        either,
		"internal/mounts":           either,
		"internal/policy":           either,
		"internal/grpcservice":      either,
		"internal/enroll/authority": {"internal/ingest", "internal/devca", "internal/geometry", "internal/config"},
	} {
		imports := depsOf(t, module+pkg, "linux")
		for _, f := range forbidden {
			if _, ok := imports[module+f]; ok {
				t.Errorf("%s links %s (imported by %s)", pkg, f, strings.Join(importersOf(imports, module+f), ", "))
			}
		}
	}
}
