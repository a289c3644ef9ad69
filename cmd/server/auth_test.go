package main

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestAuthMatrix serves the real HTTP listener under every bearer-token
// setting and asks every path with no token, a wrong token and each
// configured token: every protected path goes through the one check
// (inventory.RequireToken), the health endpoints and the index stay open.
func TestAuthMatrix(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "file-token", "from-the-file\n")
	writeFile(t, dir, "list-token", "from-the-list")
	const (
		fileKey = "  bearer_token_file: FILE\n"
		listKey = "  bearer_tokens:\n  - {name: grafana, token_file: LIST}\n"
	)
	settings := []struct {
		name   string
		web    string
		tokens []string // the secrets that must pass
	}{
		{"none", "", nil},
		{"bearer_tokens", listKey, []string{"from-the-list"}},
		{"bearer_token_file", fileKey, []string{"from-the-file"}},
		{"both", fileKey + listKey, []string{"from-the-file", "from-the-list"}},
	}
	paths := []struct {
		path      string
		protected bool
		openCode  int // the status with a good token (or no auth at all)
	}{
		{"/metrics", true, 200},
		{"/api/v1/volumes", true, 200},
		{"/api/v1/volumes?format=csv", true, 200},
		{"/api/v1/volumes/no-such-id", true, 404},
		{"/api/v1/hosts", true, 200},
		{"/api/v1/hosts/no-such-host", true, 404},
		{"/api/v1/summary", true, 200},
		{"/api/v1/openapi.yaml", true, 200},
		{"/api/v1/no-such-endpoint", true, 404},
		{"/api/", true, 404},
		{"/healthz", false, 200},
		{"/readyz", false, 200},
		{"/", false, 200},
	}
	hc := &http.Client{Timeout: 10 * time.Second}
	for _, st := range settings {
		t.Run(st.name, func(t *testing.T) {
			web := strings.NewReplacer("FILE", dir+"/file-token", "LIST", dir+"/list-token").Replace(st.web)
			cfg := writeFile(t, t.TempDir(), "server.yaml", "data_dir: "+t.TempDir()+
				"\ngrpc:\n  insecure: true\n  listen_address: 127.0.0.1:0\nweb:\n  listen_address: 127.0.0.1:0\n"+web)
			p := startInProcess(t, "--config", cfg)
			for _, pt := range paths {
				url := "http://" + p.webAddr + pt.path
				protected := pt.protected && len(st.tokens) > 0
				for _, tok := range []string{"", "wrong-token", "from-the-file", "from-the-list"} {
					want := pt.openCode
					if protected && !slices.Contains(st.tokens, tok) {
						want = 401
					}
					if got := getStatus(t, hc, url, tok); got != want {
						t.Errorf("%s: GET %s with token %q = %d, want %d", st.name, pt.path, tok, got, want)
					}
				}
			}
			// A refused caller learns nothing else: not even which methods exist.
			req, _ := http.NewRequest("POST", "http://"+p.webAddr+"/api/v1/volumes", nil)
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if want := map[bool]int{true: 401, false: 405}[len(st.tokens) > 0]; resp.StatusCode != want {
				t.Errorf("%s: POST /api/v1/volumes without a token = %d, want %d", st.name, resp.StatusCode, want)
			}
		})
	}
}

// getStatus is the status of GET url with bearer token (none: ""); a 401
// must carry its challenge.
func getStatus(t *testing.T, hc *http.Client, url, token string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	resp.Body.Close()
	if resp.StatusCode == 401 && resp.Header.Get("WWW-Authenticate") == "" {
		t.Errorf("GET %s: 401 without a WWW-Authenticate challenge", url)
	}
	return resp.StatusCode
}

// TestMethodMatrix: every route answers a wrong method with 405 and an
// Allow header; on the protected prefixes, a caller without the token
// gets 401 before any 404 or 405 (POST /metrics and POST to the policy
// endpoints were 404).
func TestMethodMatrix(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "token", "secret")
	cfg := writeFile(t, t.TempDir(), "server.yaml", "data_dir: "+t.TempDir()+
		"\ngrpc:\n  insecure: true\n  listen_address: 127.0.0.1:0\nweb:\n  listen_address: 127.0.0.1:0\n  bearer_token_file: "+dir+"/token\n")
	p := startInProcess(t, "--config", cfg)
	hc := &http.Client{Timeout: 10 * time.Second}
	do := func(t *testing.T, method, path, token string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, "http://"+p.webAddr+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		resp.Body.Close()
		return resp
	}
	for _, tc := range []struct {
		path      string
		protected bool
		known     bool
	}{
		{"/metrics", true, true},
		{"/metrics/nothing", true, false},
		{"/api/v1/policies", true, true},
		{"/api/v1/hosts/db1/policy", true, true},
		{"/api/v1/hosts", true, true},
		{"/api/v1/hosts/db1", true, true},
		{"/api/v1/volumes", true, true},
		{"/api/v1/volumes/x", true, true},
		{"/api/v1/summary", true, true},
		{"/api/v1/openapi.yaml", true, true},
		{"/api/v1/nothing", true, false},
		{"/healthz", false, true},
		{"/readyz", false, true},
	} {
		for _, method := range []string{"POST", "PUT", "DELETE", "PATCH"} {
			if tc.protected {
				if r := do(t, method, tc.path, ""); r.StatusCode != 401 {
					t.Errorf("%s %s without a token = %d, want 401", method, tc.path, r.StatusCode)
				}
			}
			r := do(t, method, tc.path, "secret")
			switch {
			case !tc.known && r.StatusCode != 404:
				t.Errorf("%s %s = %d, want 404", method, tc.path, r.StatusCode)
			case tc.known && (r.StatusCode != 405 || r.Header.Get("Allow") != "GET, HEAD"):
				t.Errorf("%s %s = %d, Allow %q; want 405, Allow \"GET, HEAD\"", method, tc.path, r.StatusCode, r.Header.Get("Allow"))
			}
		}
		if !tc.known && tc.protected {
			if r := do(t, "GET", tc.path, ""); r.StatusCode != 401 {
				t.Errorf("GET %s without a token = %d, want 401", tc.path, r.StatusCode)
			}
		}
	}
}
