package ingest

import (
	"bufio"
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// alignPath is the import path of the alignment rules.
const alignPath = "github.com/plumbline/plumbline/internal/align"

// judgeFile is the one file of the server that may apply the rules.
const judgeFile = "github.com/plumbline/plumbline/internal/server/ingest/judge.go"

// TestServerJudgesOnce: on the server, the alignment rules are applied
// by the judge alone. Every non-test Go file of every package the server
// binary links (go list -deps ./cmd/server) is parsed; a reference to
// align.Evaluate or align.EvaluateWith anywhere but the judge fails,
// naming the file and line. (The agent evaluates on its own side:
// cmd/agent, internal/agent/probe's placement, cmd/fleetsim are not linked.)
func TestServerJudgesOnce(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}\t{{.Dir}}\t{{join .GoFiles \" \"}}",
		"github.com/plumbline/plumbline/cmd/server").Output()
	if err != nil {
		t.Fatalf("go list -deps ./cmd/server: %v", err)
	}
	found := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		if len(f) != 3 || f[0] == alignPath || !strings.HasPrefix(f[0], "github.com/plumbline/plumbline/") {
			continue
		}
		for _, name := range strings.Fields(f[2]) {
			file := f[0] + "/" + name
			for _, pos := range ruleCalls(t, filepath.Join(f[1], name)) {
				found[file] = true
				if file != judgeFile {
					t.Errorf("%s:%d applies the alignment rules: on the server only the judge (%s) does; read the judged record instead", file, pos.Line, judgeFile)
				}
			}
		}
	}
	if !found[judgeFile] {
		t.Errorf("%s calls neither align.Evaluate nor align.EvaluateWith: the test looks in the wrong place", judgeFile)
	}
}

// ruleCalls are the positions of the references to align.Evaluate and
// align.EvaluateWith in a Go file.
func ruleCalls(t *testing.T, path string) []token.Position {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	name := ""
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == alignPath {
			name = "align"
			if imp.Name != nil {
				name = imp.Name.Name
			}
		}
	}
	if name == "" {
		return nil
	}
	var out []token.Position
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if id, ok := sel.X.(*ast.Ident); ok && id.Name == name && (sel.Sel.Name == "Evaluate" || sel.Sel.Name == "EvaluateWith") {
			out = append(out, fset.Position(sel.Pos()))
		}
		return true
	})
	return out
}
