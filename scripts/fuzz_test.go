//go:build linux

package scripts

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestFuzzListsEveryTarget: `make fuzz` (fuzz.sh) runs every fuzz target in
// the module: what `fuzz.sh --list` names is exactly the set of
// `func FuzzX(*testing.F)` declarations that go/parser finds in the
// module's test files.
func TestFuzzListsEveryTarget(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "vendor") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "Fuzz") || len(fn.Type.Params.List) != 1 {
				continue
			}
			star, ok := fn.Type.Params.List[0].Type.(*ast.StarExpr)
			if sel, ok2 := star.X.(*ast.SelectorExpr); ok && ok2 && sel.Sel.Name == "F" {
				rel, _ := filepath.Rel(root, filepath.Dir(path))
				want = append(want, rel+" "+fn.Name.Name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(want) == 0 {
		t.Fatal("no fuzz targets found in the module's test files")
	}

	out, err := exec.Command("./fuzz.sh", "--list").Output()
	if err != nil {
		t.Fatalf("fuzz.sh --list: %v", err)
	}
	got := strings.Split(strings.TrimSpace(string(out)), "\n")
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("fuzz.sh --list:\n%s\nwant (the Fuzz functions in the code):\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestFuzzRetriesOnlyTheDeadlineRace: fuzz.sh runs a target again when Go's
// coordinator fails it with a bare "context deadline exceeded" (its race,
// go.dev/issue/75804), and stops at once on a real failure, which writes
// its input. A stand-in `go` plays the failures; it lists one target per
// package.
func TestFuzzRetriesOnlyTheDeadlineRace(t *testing.T) {
	tests := []struct {
		name     string
		failures string // what each failing run prints, one run a line
		wantOK   bool
		wantRuns int
	}{
		{"race then pass", "context deadline exceeded\n", true, 2},
		{"race three times", "context deadline exceeded\ncontext deadline exceeded\ncontext deadline exceeded\n", false, 3},
		{"real failure", "Failing input written to testdata/fuzz/FuzzX/1 context deadline exceeded\n", false, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			script := filepath.Join(dir, "go")
			failures, runs := filepath.Join(dir, "failures"), filepath.Join(dir, "runs")
			if err := os.WriteFile(failures, []byte(tc.failures), 0o644); err != nil {
				t.Fatal(err)
			}
			// -list: one target per package; -fuzz: fail with the next line
			// of failures while there is one, then pass.
			fake := `#!/bin/sh
case "$*" in *-list*) echo FuzzX; echo ok; exit 0;; esac
echo run >> ` + runs + `
n=$(wc -l < ` + runs + `)
line=$(sed -n "${n}p" ` + failures + `)
if [ -n "$line" ]; then echo "--- FAIL: FuzzX"; echo "    $line"; exit 1; fi
echo PASS
`
			if err := os.WriteFile(script, []byte(fake), 0o755); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("./fuzz.sh")
			cmd.Env = append(os.Environ(), "GO="+script, "FUZZTIME=1s")
			out, err := cmd.CombinedOutput()
			if gotOK := err == nil; gotOK != tc.wantOK {
				t.Fatalf("fuzz.sh ok = %v (%v), want %v\n%s", gotOK, err, tc.wantOK, out)
			}
			b, err := os.ReadFile(runs)
			if err != nil {
				t.Fatal(err)
			}
			// After the first target, every other one runs once (and passes).
			want := tc.wantRuns + strings.Count(string(out), "== ") - 1
			if got := strings.Count(string(b), "run\n"); got != want {
				t.Errorf("fuzz runs = %d, want %d (%d of the first target)\n%s", got, want, tc.wantRuns, out)
			}
		})
	}
}
