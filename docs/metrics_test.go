package docs_test

import (
	"context"
	"fmt"
	"go/parser"
	"go/token"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/plumbline/plumbline/internal/metricsource"
)

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
	got := strings.Join(metricsource.FileNames(f), " ")
	want := "plumbline_agent_spool_bytes plumbline_server_leader plumbline_volume_info plumbline_build_info"
	if got != want {
		t.Errorf("FileNames = %q, want %q", got, want)
	}
}
