package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/plumbline/plumbline/internal/server"
	"github.com/plumbline/plumbline/internal/server/authority"
	"github.com/plumbline/plumbline/internal/server/config"
	"github.com/plumbline/plumbline/internal/server/store"
)

// TestEnrollCommand runs `agent enroll` against a real dev server: the
// token file and the pin from the server's CA enroll the host and the
// command prints the config keys; a wrong pin, a malformed token file and
// missing flags are refused with exit codes 1, 1 and 2.
func TestEnrollCommand(t *testing.T) {
	cfg := config.Default()
	cfg.Dev, cfg.DataDir = true, t.TempDir()
	cfg.GRPC.ListenAddress, cfg.Web.ListenAddress = "127.0.0.1:0", "127.0.0.1:0"
	addrs := make(chan string, 1)
	srv, err := server.New(cfg, slog.New(slog.DiscardHandler), server.Options{Ready: func(g, _ string) { addrs <- g }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	defer func() { cancel(); <-done }()
	var addr string
	select {
	case addr = <-addrs:
	case err := <-done:
		t.Fatalf("server: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("server did not start")
	}
	files, err := server.EnrollmentFiles(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := authority.LoadCA(files)
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(ctx, cfg.StoreDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tok, _, err := authority.CreateToken(ctx, st, authority.TokenSpec{Labels: map[string]string{"role": "db"}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tokFile := filepath.Join(dir, "join.token")
	os.WriteFile(tokFile, []byte(tok.String()+"\n"), 0o600)
	tok2, _, err := authority.CreateToken(ctx, st, authority.TokenSpec{}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	tok2File := filepath.Join(dir, "second.token")
	os.WriteFile(tok2File, []byte(tok2.String()+"\n"), 0o600)
	badFile := filepath.Join(dir, "bad.token")
	os.WriteFile(badFile, []byte("not a token"), 0o600)
	out := filepath.Join(dir, "agent")

	wrongPin := "sha256:" + strings.Repeat("ab", 32)
	for _, c := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"missing flags", []string{"--server", addr}, 2, "usage: agent enroll"},
		{"malformed token file", []string{"--server", addr, "--server-name", "localhost", "--token-file", badFile, "--ca-hash", ca.Pin(), "--dir", out}, 1, "malformed join token"},
		{"wrong pin", []string{"--server", addr, "--server-name", "localhost", "--token-file", tokFile, "--ca-hash", wrongPin, "--dir", out}, 1, "matches the pin"},
		{"enrolled", []string{"--server", addr, "--server-name", "localhost", "--token-file", tokFile, "--ca-hash", ca.Pin(), "--dir", out, "--agent-id", "db-9"}, 0, "enrolled as agent db-9"},
		{"id taken", []string{"--server", addr, "--server-name", "localhost", "--token-file", tok2File, "--ca-hash", ca.Pin(), "--dir", filepath.Join(dir, "c"), "--agent-id", "db-9"}, 1, `the server refused to enroll "db-9" (AlreadyExists): agent id already taken: an agent is already enrolled as "db-9"`},
		{"token used up", []string{"--server", addr, "--server-name", "localhost", "--token-file", tokFile, "--ca-hash", ca.Pin(), "--dir", filepath.Join(dir, "b"), "--agent-id", "db-10"}, 1, "used up"},
	} {
		var stdout, stderr bytes.Buffer
		code := runEnroll(ctx, c.args, &stdout, &stderr)
		if code != c.code || !strings.Contains(stdout.String()+stderr.String(), c.want) || strings.Contains(stderr.String(), "rpc error") {
			t.Errorf("%s: exit %d, output:\n%s%s\nwant exit %d and %q", c.name, code, stdout.String(), stderr.String(), c.code, c.want)
		}
		if c.code == 0 {
			for _, f := range []string{"ca.crt", "agent.crt", "agent.key"} {
				if !strings.Contains(stdout.String(), filepath.Join(out, f)) {
					t.Errorf("the printed config does not name %s:\n%s", f, stdout.String())
				}
			}
			checkPrintedConfig(t, stdout.String())
		}
	}
}

// checkPrintedConfig: what `agent enroll` printed, saved as it is, passes
// `agent run --check`, and names the server name the enrollment checked
// the server's certificate for.
func checkPrintedConfig(t *testing.T, printed string) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "agent.yaml")
	if err := os.WriteFile(f, []byte(printed), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run(t.Context(), []string{"run", "--config", f, "--check"}, &out, &errb); code != 0 {
		t.Errorf("agent run --check on the printed config = %d:\n%s%s\nprinted:\n%s", code, out.String(), errb.String(), printed)
	}
	if !strings.Contains(printed, "server_name: localhost") {
		t.Errorf("the printed config does not carry --server-name localhost:\n%s", printed)
	}
}
