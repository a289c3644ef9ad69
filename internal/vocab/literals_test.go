package vocab

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The words this package defines are spelled here alone: outside it, no
// non-test Go file compares a layer's kind, a value's source or a
// snapshot's trigger with a string literal, sets one from a literal, or
// lists them; and no code outside it asks which probe kind a run is
// (kind == LogWrite): it reads the kind's properties (ProbeKindSpec)
// instead.
//
// The check is syntactic, so that it has no false positives: a literal
// counts only where it meets a kind, source or trigger — compared with an
// expression named so (l.GetKind(), st.source, trigger, a
// GetSources()[field] lookup), as a case of a switch on one, as the value
// of a Kind, Source or Trigger field, or as one of three or more words of
// one list in a composite literal. "disk", "dm" or "partition" as sysfs
// file names, uevent DEVTYPE values or log keys are other words that
// happen to be spelled alike, and are not reported.
func TestWordsSpelledOnce(t *testing.T) {
	t.Parallel()
	root := moduleRoot(t)
	self, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, dir := range []string{"internal", "cmd"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if path == self || d.Name() == "testdata" {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || strings.HasSuffix(path, ".pb.go") {
				return nil
			}
			rel, _ := filepath.Rel(root, path)
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			for _, c := range wordChecks(f) {
				found = append(found, fmt.Sprintf("%s:%d: %s", rel, fset.Position(c.pos).Line, c.what))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range found {
		t.Error(f)
	}
}

// moduleRoot is the directory of go.mod, above this package wherever the
// tree puts it.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above internal/vocab")
		}
		dir = parent
	}
}

// The check itself finds what it is meant to find, and nothing in lookalikes.
func TestWordChecks(t *testing.T) {
	t.Parallel()
	src := `package x
func f() {
	_ = l.GetKind() == "raid"                         // spelled
	_ = vocab.Source(l.GetSources()["model"]) != "declared" // spelled
	switch l.GetKind() { case "partition": }          // spelled
	_ = &Layer{Kind: "disk", Source: "sysfs"}         // spelled twice
	_ = []string{"start", "changed", "interval"}      // a list
	_ = kind == LogWrite                              // a kind check
	_ = o.Kind != probe.StripeScan                    // a kind check
	_ = k == string(vocab.RandomRead)                 // a kind check
	switch k { case vocab.RandomWrite: }              // a kind check
	_ = dir.Path("partition")                         // a sysfs file: fine
	switch devtype { case "disk": }                   // uevent DEVTYPE: fine
	_ = l.GetKind() == vocab.LayerDisk                // fine
	_ = map[Kind]int{LogWrite: 1}                     // fine
	_ = res.StripeScan != nil                         // a field, not a kind: fine
}`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "x.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	var lines []int
	for _, c := range wordChecks(f) {
		lines = append(lines, fset.Position(c.pos).Line)
	}
	if want := []int{3, 4, 5, 6, 6, 7, 8, 9, 10, 11}; !slices.Equal(lines, want) {
		t.Errorf("wordChecks found lines %v, want %v", lines, want)
	}
}

type wordCheck struct {
	pos  token.Pos
	what string
}

// namedWord matches the name of an expression that holds a kind, a source
// or a trigger.
var namedWord = regexp.MustCompile(`(?i)kind|source|trigger`)

func wordChecks(f *ast.File) []wordCheck {
	words := map[string]string{}
	for _, list := range []struct {
		what  string
		words []string
	}{{"layer kind", LayerKindNames()}, {"source", SourceNames()}, {"trigger", TriggerNames()}, {"probe kind", names(ListedProbeKinds())}} {
		for _, w := range list.words {
			words[w] = list.what
		}
	}
	kindConst := map[string]bool{}
	for _, k := range ListedProbeKinds() {
		kindConst[probeKindConst(k)] = true
	}
	var out []wordCheck
	report := func(n ast.Node, format string, args ...any) {
		out = append(out, wordCheck{n.Pos(), fmt.Sprintf(format, args...)})
	}
	word := func(e ast.Expr) (string, string, bool) {
		lit, ok := e.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return "", "", false
		}
		s, err := strconv.Unquote(lit.Value)
		if err != nil {
			return "", "", false
		}
		what, ok := words[s]
		return s, what, ok
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.BinaryExpr:
			if n.Op != token.EQL && n.Op != token.NEQ {
				return true
			}
			for _, pair := range [][2]ast.Expr{{n.X, n.Y}, {n.Y, n.X}} {
				if w, what, ok := word(pair[0]); ok && namedWord.MatchString(operandName(pair[1])) {
					report(n, "%q compared with %s: use vocab's %s constant", w, operandName(pair[1]), what)
					return true
				}
				if kindConst[operandName(pair[0])] && !isNil(pair[1]) {
					report(n, "a check of which probe kind a run is (%s): read the kind's ProbeKindSpec", operandName(pair[0]))
					return true
				}
			}
		case *ast.SwitchStmt:
			if n.Tag == nil {
				return true
			}
			for _, s := range n.Body.List {
				for _, e := range s.(*ast.CaseClause).List {
					if w, what, ok := word(e); ok && namedWord.MatchString(operandName(n.Tag)) {
						report(e, "case %q in a switch on %s: use vocab's %s constant", w, operandName(n.Tag), what)
					}
					if kindConst[operandName(e)] {
						report(e, "a switch on which probe kind a run is (%s): read the kind's ProbeKindSpec", operandName(e))
					}
				}
			}
		case *ast.KeyValueExpr:
			key, ok := n.Key.(*ast.Ident)
			if w, what, isWord := word(n.Value); ok && isWord && namedWord.MatchString(key.Name) {
				report(n, "%s: %q: use vocab's %s constant", key.Name, w, what)
			}
		case *ast.CompositeLit:
			count := map[string]int{}
			for _, e := range n.Elts {
				if _, what, ok := word(e); ok {
					count[what]++
				}
			}
			for what, c := range count {
				if c >= 3 {
					report(n, "a list of %d %ss spelled out: use vocab's list", c, what)
				}
			}
		}
		return true
	})
	return out
}

// operandName is the name an expression is known by: an identifier, a
// selector's field or method, a called function (a conversion's operand),
// an indexed map.
func operandName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return e.Sel.Name
	case *ast.ParenExpr:
		return operandName(e.X)
	case *ast.IndexExpr:
		return operandName(e.X)
	case *ast.CallExpr:
		if len(e.Args) == 1 && isConversion(e.Fun) {
			return operandName(e.Args[0])
		}
		return operandName(e.Fun)
	}
	return ""
}

// isNil says whether e is nil: a field that happens to be named like a
// kind (Result.StripeScan, the answer) compared with nil is no kind check.
func isNil(e ast.Expr) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == "nil"
}

// isConversion says whether fun names a type a word is converted to or from.
func isConversion(fun ast.Expr) bool {
	switch operandName(fun) {
	case "string", "LayerKind", "Source", "Trigger", "ProbeKind", "Kind":
		return true
	}
	return false
}

// probeKindConst is the Go name of probe kind k's constant: "log-write" is
// LogWrite.
func probeKindConst(k ProbeKind) string {
	var b strings.Builder
	for _, part := range strings.Split(string(k), "-") {
		if part != "" {
			b.WriteString(strings.ToUpper(part[:1]) + part[1:])
		}
	}
	return b.String()
}
