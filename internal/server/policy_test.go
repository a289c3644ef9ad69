package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/plumbline/plumbline/internal/server/config"
)

const policyV1 = `
policies:
  - name: all
    policy:
      maintenance_windows: [{name: nightly, schedule: "0 2 * * *", duration: 2h, time_zone: Europe/Berlin}]
`

const policyV2 = policyV1 + `  - name: pg
    select: {labels: {role: postgres}}
    policy:
      enforce: [probes]
      probes: [{mount_point: /pgdata, dir: /pgdata/.plumbline, every: 10m}]
`

// The policies of the configuration file are served by the policy API and
// re-read when the file changes, without a restart; a change that does not
// load keeps the policies in force.
func TestPolicyReload(t *testing.T) {
	dir := t.TempDir()
	head := "data_dir: " + dir + "\ngrpc: {listen_address: '127.0.0.1:0', insecure: true}\nweb: {listen_address: '127.0.0.1:0'}\npolicy_reload_interval: 1s\n"
	file := writeFile(t, dir, "server.yaml", head+policyV1)
	cfg, _, err := config.LoadLines(file)
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
	defer func() { cancel(); <-done }()
	web := <-ready

	names := func() []string {
		resp, err := http.Get("http://" + web + "/api/v1/policies")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v struct {
			Policies []struct {
				Name string `json:"name"`
				YAML string `json:"policy_yaml"`
			} `json:"policies"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, p := range v.Policies {
			out = append(out, p.Name)
		}
		return out
	}
	if got := names(); strings.Join(got, ",") != "all" {
		t.Fatalf("policies = %v, want [all]", got)
	}
	if err := os.WriteFile(file, []byte(head+policyV2), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the changed policies", func() bool { return strings.Join(names(), ",") == "all,pg" })

	// A host with no agent connected: the policy for its name alone.
	resp, err := http.Get("http://" + web + "/api/v1/hosts/db-1/policy")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"all"`) || strings.Contains(string(b), `"pg"`) || !strings.Contains(string(b), "Europe/Berlin") {
		t.Errorf("GET /api/v1/hosts/db-1/policy = %d %s: want the entry all (no labels known)", resp.StatusCode, b)
	}

	// A broken edit is refused; the policies stay.
	if err := os.WriteFile(file, []byte(head+policyV2+"      bogus: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the broken edit to be refused", func() bool { return strings.Contains(logs.String(), "does not load; keeping the current policy") })
	if !strings.Contains(logs.String(), "bogus") {
		t.Errorf("the refusal does not name the bad key:\n%s", logs.String())
	}
	if got := names(); strings.Join(got, ",") != "all,pg" {
		t.Errorf("after a broken edit, policies = %v, want [all pg] kept", got)
	}
}

// syncBuffer is a log destination read while the server writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
