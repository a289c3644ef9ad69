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

// The two binaries stay apart, and the tree says which side a package is
// on: the server links nothing under internal/agent/ (discovery, the
// agent's configuration, the probe engine, the spool, the agent runtime),
// the agent nothing under internal/server/ (store, ingest, inventory,
// exporter, evaluator, projection, leader, retention, the enrollment
// authority), and neither links internal/lab/ (the RAID lab, the fleet
// lab, replays, test harnesses). Shared pieces (vocab, align, policy,
// agentkeys, mounts, identity, certmint, labels, atomicfile, ...) sit
// directly under internal/ and are linked by both.
func TestBinariesStayApart(t *testing.T) {
	for _, tc := range []struct {
		binary    string
		forbidden []string // subtrees (a package or anything under it)
	}{
		{"cmd/server", []string{"internal/agent", "internal/lab"}},
		{"cmd/agent", []string{"internal/server", "internal/lab"}},
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
					if slices.ContainsFunc(tc.forbidden, func(f string) bool { return p == f || strings.HasPrefix(p, f+"/") }) {
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

// TestSharedPackagesLinkNoSide: a package directly under internal/ (not
// under internal/agent/, internal/server/ or internal/lab/) is shared, and
// links neither side nor the lab; and the enrollment authority links no
// ingest and no dev CA.
func TestSharedPackagesLinkNoSide(t *testing.T) {
	t.Parallel()
	sides := []string{"internal/agent", "internal/server", "internal/lab"}
	under := func(p string, trees ...string) bool {
		return slices.ContainsFunc(trees, func(f string) bool { return p == f || strings.HasPrefix(p, f+"/") })
	}
	shared := 0
	for pkg, deps := range packageDeps(t, module+"internal/...") {
		p := strings.TrimPrefix(pkg, module)
		forbidden := sides
		switch {
		case p == "internal/server/authority":
			forbidden = []string{"internal/server/ingest", "internal/server/devca", "internal/agent"}
		case under(p, sides...):
			continue
		default:
			shared++
		}
		for _, d := range deps {
			if dp, ok := strings.CutPrefix(d, module); ok && under(dp, forbidden...) {
				t.Errorf("%s links %s", p, dp)
			}
		}
	}
	if shared < 10 {
		t.Fatalf("%d shared packages under internal/: not the tree this test expects", shared)
	}
}

// packageDeps is each package of pattern and its transitive dependencies.
func packageDeps(t *testing.T, pattern string) map[string][]string {
	t.Helper()
	out, err := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "list", "-f", `{{.ImportPath}} {{join .Deps " "}}`, pattern).Output()
	if err != nil {
		t.Fatalf("go list %s: %v", pattern, err)
	}
	deps := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) > 0 {
			deps[f[0]] = f[1:]
		}
	}
	return deps
}
