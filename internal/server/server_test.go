package server

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plumbline/plumbline/internal/server/config"
)

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPprof: the pprof listener serves the heap profile, and says it has
// no authentication.
func TestPprof(t *testing.T) {
	var logs bytes.Buffer
	stop, addr, err := startPprof("127.0.0.1:0", slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	resp, err := http.Get("http://" + addr + "/debug/pprof/heap?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "# HeapInuse") {
		t.Errorf("GET /debug/pprof/heap?debug=1: %s, %.200q; want 200 and the MemStats", resp.Status, body)
	}
	if !strings.Contains(logs.String(), "without authentication") {
		t.Errorf("log %q: want a warning that pprof has no authentication", logs.String())
	}
}

func TestAPITokens(t *testing.T) {
	dir := t.TempDir()
	t1 := writeFile(t, dir, "t1", "secret-one\n")
	t2 := writeFile(t, dir, "t2", "secret-two")
	empty := writeFile(t, dir, "empty", " \n")
	basic := writeFile(t, dir, "web.yml", "basic_auth_users:\n  ops: $2y$10$abc\n")
	tokens := []config.TokenConfig{{Name: "grafana", TokenFile: t1}, {Name: "cli", TokenFile: t2, Role: "read-only"}}
	tests := []struct {
		name    string
		cfg     config.Config
		want    []string
		wantErr string
	}{
		{"dev on loopback needs none", config.Config{Dev: true, Web: config.WebConfig{ListenAddress: "127.0.0.1:9464"}}, nil, ""},
		{"dev on loopback honours configured ones", config.Config{Dev: true, Web: config.WebConfig{ListenAddress: "127.0.0.1:9464", BearerTokens: tokens}}, []string{"secret-one", "secret-two"}, ""},
		{"dev elsewhere uses them", config.Config{Dev: true, Web: config.WebConfig{ListenAddress: ":9464", BearerTokens: tokens}}, []string{"secret-one", "secret-two"}, ""},
		{"tokens and the token file", config.Config{Web: config.WebConfig{ListenAddress: ":9464", BearerTokenFile: t2, BearerTokens: tokens[:1]}}, []string{"secret-two", "secret-one"}, ""},
		{"empty token", config.Config{Web: config.WebConfig{ListenAddress: ":9464", BearerTokens: []config.TokenConfig{{Name: "x", TokenFile: empty}}}}, nil, "is empty"},
		{"missing file", config.Config{Web: config.WebConfig{ListenAddress: ":9464", BearerTokens: []config.TokenConfig{{Name: "x", TokenFile: dir + "/nope"}}}}, nil, "no such file"},
		{"tokens and basic auth", config.Config{Web: config.WebConfig{ListenAddress: ":9464", BearerTokens: tokens, ConfigFile: basic}}, nil, "choose one"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := apiTokens(tt.cfg)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("apiTokens = %v, %v; want an error with %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var secrets []string
			for _, tok := range got {
				secrets = append(secrets, tok.Secret)
			}
			if strings.Join(secrets, ",") != strings.Join(tt.want, ",") {
				t.Errorf("tokens = %v, want %v", secrets, tt.want)
			}
		})
	}
}
