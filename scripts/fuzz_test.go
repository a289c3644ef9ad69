//go:build linux

package scripts

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
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
