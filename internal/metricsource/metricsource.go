// Package metricsource finds the metric family names that Plumbline's
// server and agent declare, read from their non-test Go source. Tests use
// it to check that the docs, dashboards and rules name only metrics that
// exist and document every one that does.
package metricsource

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

var metricName = regexp.MustCompile(`^plumbline_[a-z0-9_]*[a-z0-9]$`)

// Families reads every metric family name the server and the agent
// declare, from the non-test Go source under root's internal and cmd
// directories, with the file (relative to root) that declares each: string literals that are a
// whole metric name, constant prefixes joined to a literal (ns + "spool_bytes"),
// the exporter's descriptor table (d(famX, "volume_info", ...) under
// ns = "plumbline_"), and version.NewCollector("x") (x_build_info).
func Families(root string) (map[string]string, error) {
	found := map[string]string{}
	fset := token.NewFileSet()
	for _, dir := range []string{"internal", "cmd"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			slash := filepath.ToSlash(path)
			if d.IsDir() {
				// Test harnesses and simulators expose nothing to users.
				for _, skip := range []string{"/fleetsim", "/raidlab", "/replay", "/fleetlab", "/pgtest", "/loopdev", "/testdata"} {
					if strings.HasSuffix(slash, skip) {
						return filepath.SkipDir
					}
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			for _, name := range FileNames(f) {
				if _, ok := found[name]; !ok {
					rel, _ := filepath.Rel(root, path)
					found[name] = filepath.ToSlash(rel)
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return found, nil
}

// FileNames are the metric family names one parsed file declares.
func FileNames(f *ast.File) []string {
	consts := map[string]string{} // string constants of the file, any scope
	ast.Inspect(f, func(n ast.Node) bool {
		if vs, ok := n.(*ast.ValueSpec); ok {
			for i, id := range vs.Names {
				if i < len(vs.Values) {
					if s, ok := stringLit(vs.Values[i]); ok {
						consts[id.Name] = s
					}
				}
			}
		}
		return true
	})
	var names []string
	add := func(s string) {
		if metricName.MatchString(s) {
			names = append(names, s)
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.BasicLit:
			if s, ok := stringLit(n); ok {
				add(s)
			}
		case *ast.BinaryExpr:
			if n.Op != token.ADD {
				return true
			}
			id, ok := n.X.(*ast.Ident)
			if !ok {
				return true
			}
			prefix, ok := consts[id.Name]
			if !ok {
				return true
			}
			if s, ok := stringLit(n.Y); ok {
				add(prefix + s)
			}
		case *ast.CallExpr:
			if len(n.Args) >= 2 {
				if id, ok := n.Args[0].(*ast.Ident); ok && strings.HasPrefix(id.Name, "fam") {
					if s, ok := stringLit(n.Args[1]); ok {
						add(consts["ns"] + s)
					}
				}
			}
			if sel, ok := n.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "NewCollector" && len(n.Args) == 1 {
				if s, ok := stringLit(n.Args[0]); ok {
					add(s + "_build_info")
				}
			}
		}
		return true
	})
	return names
}

func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}
