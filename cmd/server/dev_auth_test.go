package main

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"
)

// TestDevHonoursTokens: a --dev server with a configured API token
// refuses the API without it and answers with it (it used to drop the
// tokens on loopback, silently).
func TestDevHonoursTokens(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tok := filepath.Join(dir, "api.token")
	os.WriteFile(tok, []byte("dev-secret\n"), 0o600)
	cfg := filepath.Join(dir, "server.yaml")
	os.WriteFile(cfg, []byte("web: {bearer_token_file: '"+tok+"'}\n"), 0o600)
	srv := startInProcess(t, "--dev", "--data-dir", filepath.Join(dir, "data"), "--config", cfg,
		"--grpc.listen-address", "127.0.0.1:0", "--web.listen-address", "127.0.0.1:0")
	for _, c := range []struct {
		auth string
		want int
	}{{"", http.StatusUnauthorized}, {"Bearer wrong", http.StatusUnauthorized}, {"Bearer dev-secret", http.StatusOK}} {
		req, _ := http.NewRequestWithContext(t.Context(), "GET", "http://"+srv.webAddr+"/api/v1/hosts", nil)
		if c.auth != "" {
			req.Header.Set("Authorization", c.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("GET /api/v1/hosts with %q: %s, want %d", c.auth, resp.Status, c.want)
		}
	}
}
