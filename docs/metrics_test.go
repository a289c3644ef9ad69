package docs_test

import (
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

var metricName = regexp.MustCompile(`^plumbline_[a-z0-9_]*[a-z0-9]$`)

// sourceMetricFamilies reads every metric family name the server and the
// agent declare, from their non-test Go source: string literals that are a
// whole metric name, constant prefixes joined to a literal (ns + "spool_bytes"),
// the exporter's descriptor table (d(famX, "volume_info", ...) under
// ns = "plumbline_"), and version.NewCollector("x") (x_build_info).
func sourceMetricFamilies(t *testing.T) map[string]string {
	t.Helper()
	found := map[string]string{}
	fset := token.NewFileSet()
	for _, dir := range []string{"internal", "cmd"} {
		err := filepath.WalkDir(filepath.Join("..", dir), func(path string, d os.DirEntry, err error) error {
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
			for _, name := range fileMetricNames(f) {
				if _, ok := found[name]; !ok {
					found[name] = strings.TrimPrefix(slash, "../")
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return found
}

func fileMetricNames(f *ast.File) []string {
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

// scrapeDevServer starts the real server in --dev mode and returns the
// metric families of its /metrics (every registered collector that has a
// series, go_ and process_ included).
func scrapeDevServer(t *testing.T) map[string]string {
	t.Helper()
	bin := filepath.Join(binaries(t), "server")
	dir := t.TempDir()
	grpcAddr, webAddr := freeAddr(t), freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "--dev", "--data-dir", dir, "--grpc.listen-address", grpcAddr, "--web.listen-address", webAddr)
	var log strings.Builder
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	url := "http://" + webAddr + "/metrics"
	var body string
	for deadline := time.Now().Add(60 * time.Second); ; {
		select {
		case <-done:
			t.Fatalf("server --dev exited before serving /metrics:\n%s", log.String())
		default:
		}
		if b, err := get(url); err == nil && strings.Contains(b, "plumbline_") {
			body = b
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("server --dev did not serve %s within 60s:\n%s", url, log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	found := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^# TYPE (\S+) `).FindAllStringSubmatch(body, -1) {
		found[m[1]] = "a scrape of server --dev"
	}
	return found
}

func get(url string) (string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", url, resp.Status)
	}
	return string(b), err
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func TestFileMetricNames(t *testing.T) {
	t.Parallel()
	src := `package p
const ns = "plumbline_"
func f() {
	const agent = "plumbline_agent_"
	_ = agent + "spool_bytes"
	_ = "plumbline_server_leader"
	_ = "plumbline_"
	_ = "not_a_metric"
	d(famVolInfo, "volume_info", 1)
	version.NewCollector("plumbline")
}`
	f, err := parser.ParseFile(token.NewFileSet(), "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(fileMetricNames(f), " ")
	want := "plumbline_agent_spool_bytes plumbline_server_leader plumbline_volume_info plumbline_build_info"
	if got != want {
		t.Errorf("fileMetricNames = %q, want %q", got, want)
	}
}
