package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plumbline/plumbline/internal/enroll"
	"github.com/plumbline/plumbline/internal/server/config"
)

// startLogged runs a server with the configuration file's text until it
// serves, and returns its log so far and the web address.
func startLogged(t *testing.T, yaml string) (string, string) {
	t.Helper()
	dir := t.TempDir()
	cfg, _, err := config.LoadLines(writeFile(t, dir, "server.yaml", "data_dir: "+dir+"\n"+yaml))
	if err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	logs := &syncBuffer{}
	srv, err := New(cfg, slog.New(slog.NewTextHandler(logs, nil)), Options{Ready: func(_, web string) { ready <- web }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case web := <-ready:
		return logs.String(), web
	case err := <-done:
		t.Fatalf("server stopped: %v\n%s", err, logs.String())
	}
	return "", ""
}

// warnLines are the log's WARN lines that contain s.
func warnLines(log, s string) []string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "level=WARN") && strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return out
}

// TestWarnOpenListeners: a web listener on every interface without an
// API token or basic auth is a WARN that names the keys that fix it, and
// so is plaintext gRPC; with a token, or on loopback, the web one is quiet.
func TestWarnOpenListeners(t *testing.T) {
	t.Parallel()
	tok := writeFile(t, t.TempDir(), "api.token", "s3cret\n")
	for _, c := range []struct {
		name, yaml string
		webWarn    bool
	}{
		{"all interfaces, no auth", "grpc: {listen_address: '127.0.0.1:0', insecure: true}\nweb: {listen_address: '0.0.0.0:0'}\n", true},
		{"all interfaces, a token", "grpc: {listen_address: '127.0.0.1:0', insecure: true}\nweb: {listen_address: '0.0.0.0:0', bearer_token_file: '" + tok + "'}\n", false},
		{"loopback, no auth", "grpc: {listen_address: '127.0.0.1:0', insecure: true}\nweb: {listen_address: '127.0.0.1:0'}\n", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			log, _ := startLogged(t, c.yaml)
			web := warnLines(log, "web.bearer_tokens")
			if c.webWarn {
				if len(web) != 1 {
					t.Fatalf("%d WARN lines about the open HTTP listener, want 1:\n%s", len(web), log)
				}
				for _, key := range []string{"web.bearer_token_file", "web.config_file", "basic_auth_users", "web.listen_address"} {
					if !strings.Contains(web[0], key) {
						t.Errorf("the warning does not name %s: %s", key, web[0])
					}
				}
			} else if len(web) != 0 {
				t.Errorf("a WARN about the HTTP listener with auth or on loopback:\n%s", log)
			}
			insecure := warnLines(log, "PLAINTEXT")
			if len(insecure) != 1 || !strings.Contains(insecure[0], "grpc.insecure") || !strings.Contains(insecure[0], "grpc.tls.cert_file") || !strings.Contains(insecure[0], "ca init") {
				t.Errorf("plaintext gRPC: want one WARN naming grpc.insecure, grpc.tls.cert_file and server ca init:\n%s", log)
			}
		})
	}
}

// TestServerCertificateExpiryMetric: /metrics says when the server's
// certificate expires, as its file says; with plaintext gRPC it is absent.
func TestServerCertificateExpiryMetric(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := config.Default()
	cfg.Dev, cfg.DataDir = true, dir
	cfg.GRPC.ListenAddress, cfg.Web.ListenAddress = "127.0.0.1:0", "127.0.0.1:0"
	ready := make(chan string, 1)
	srv, err := New(cfg, slog.New(slog.DiscardHandler), Options{Ready: func(_, web string) { ready <- web }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	defer func() { cancel(); <-done }()
	web := <-ready
	b, err := os.ReadFile(filepath.Join(dir, "tls", "server.crt"))
	if err != nil {
		t.Fatal(err)
	}
	certs, err := enroll.ParseCertsPEM(b)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("plumbline_server_certificate_expiry_timestamp_seconds %g\n", float64(certs[0].NotAfter.Unix()))
	if m := scrapeMetrics(t, web); !strings.Contains(m, want) {
		t.Errorf("/metrics lacks %q", want)
	}
	_, insecureWeb := startLogged(t, "grpc: {listen_address: '127.0.0.1:0', insecure: true}\nweb: {listen_address: '127.0.0.1:0'}\n")
	if m := scrapeMetrics(t, insecureWeb); strings.Contains(m, "plumbline_server_certificate_expiry_timestamp_seconds ") {
		t.Error("/metrics of a plaintext server has a certificate expiry")
	}
}

func scrapeMetrics(t *testing.T, web string) string {
	t.Helper()
	resp, err := http.Get("http://" + web + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
