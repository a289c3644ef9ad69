package main

import (
	"bytes"
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/plumbline/plumbline/internal/enroll"
	"github.com/plumbline/plumbline/internal/server/devca"
)

// cli runs `server ARGS...` and returns its exit code and output.
func cli(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := runContext(context.Background(), args, &out, &errb, nil)
	return code, out.String(), errb.String()
}

// TestTokenCommands drives `server token` and `server agent` against a
// running dev server: create prints the token and the dev CA's pin, an
// agent enrolls with them, list and revoke show and change the store.
func TestTokenCommands(t *testing.T) {
	dir := t.TempDir()
	p := startInProcess(t, "--dev", "--data-dir", dir, "--grpc.listen-address", "127.0.0.1:0", "--web.listen-address", "127.0.0.1:0")

	code, out, errs := cli("token", "create", "--data-dir", dir, "--uses", "2", "--ttl", "1h", "--labels", "role=db,site=ams")
	if code != 0 {
		t.Fatalf("token create: exit %d: %s", code, errs)
	}
	tokLine := regexp.MustCompile(`(?m)^token: (plb1\.\S+)$`).FindStringSubmatch(out)
	pinLine := regexp.MustCompile(`(?m)^ca-hash: (sha256:[0-9a-f]{64})$`).FindStringSubmatch(out)
	if tokLine == nil || pinLine == nil {
		t.Fatalf("token create printed no token: and ca-hash: lines:\n%s", out)
	}
	ca, err := devca.Load(filepath.Join(dir, "ca"))
	if err != nil {
		t.Fatal(err)
	}
	if pinLine[1] != enroll.Pin(ca.Cert) {
		t.Errorf("ca-hash %s, want the dev CA's %s", pinLine[1], enroll.Pin(ca.Cert))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := enroll.Enroll(ctx, enroll.Options{Server: p.grpcAddr, ServerName: "localhost", Token: tokLine[1], Pin: pinLine[1], Dir: t.TempDir(), AgentID: "db-7"})
	if err != nil {
		t.Fatalf("enroll with the printed token and pin: %v", err)
	}
	if res.Labels["site"] != "ams" {
		t.Errorf("labels %v", res.Labels)
	}
	tok, _ := enroll.ParseToken(tokLine[1])
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"token", "list", "--data-dir", dir}, []string{tok.ID + "  active  1/2", "role=db,site=ams"}},
		{[]string{"agent", "list", "--data-dir", dir}, []string{"db-7   active", tok.ID}},
		{[]string{"agent", "revoke", "db-7", "--data-dir", dir}, []string{"agent db-7 revoked"}},
		{[]string{"agent", "list", "--data-dir", dir}, []string{"db-7   revoked"}},
		{[]string{"token", "revoke", "--data-dir", dir, tok.ID}, []string{"token " + tok.ID + " revoked"}},
		{[]string{"token", "list", "--data-dir", dir}, []string{tok.ID + "  revoked"}},
		{[]string{"agent", "reserve", "byo-9", "--reason", "own PKI", "--data-dir", dir}, []string{"agent id byo-9 reserved"}},
		{[]string{"agent", "reserve", "byo-9", "--data-dir", dir}, []string{"already reserved"}},
		{[]string{"agent", "reserved", "--data-dir", dir}, []string{"byo-9", "operator", "own PKI"}},
		{[]string{"agent", "unreserve", "byo-9", "--data-dir", dir}, []string{"agent id byo-9 released"}},
	} {
		code, out, errs := cli(c.args...)
		for _, w := range c.want {
			if code != 0 || !strings.Contains(out, w) {
				t.Errorf("server %s: exit %d, output:\n%s%s\nwant %q", strings.Join(c.args, " "), code, out, errs, w)
			}
		}
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"token", "create", "--data-dir", t.TempDir()}, 1, "enrollment is off"},
		{[]string{"token", "create", "--data-dir", dir, "--labels", "a b=c"}, 1, "--labels"},
		{[]string{"token", "create", "--data-dir", dir, "--uses", "0"}, 1, "--uses 0"},
		{[]string{"token", "revoke", "nope", "--data-dir", dir}, 1, "malformed join token"},
		{[]string{"token", "revoke", "aaaaaaaaaa", "--data-dir", dir}, 1, "not found"},
		{[]string{"agent", "revoke", "nobody", "--data-dir", dir}, 1, "not enrolled"},
		{[]string{"agent", "create", "--data-dir", dir}, 2, "usage"},
		{[]string{"agent", "unreserve", "byo-9", "--data-dir", dir}, 1, "not reserved"},
		{[]string{"agent", "reserve", "bad id", "--data-dir", dir}, 1, "agent id"},
		{[]string{"token", "reserve", "x", "--data-dir", dir}, 2, "usage"},
		{[]string{"token", "list", "extra", "--data-dir", dir}, 2, "usage"},
	} {
		code, _, errs := cli(c.args...)
		if code != c.code || !strings.Contains(errs, c.want) {
			t.Errorf("server %s: exit %d, stderr %q; want exit %d and %q", strings.Join(c.args, " "), code, errs, c.code, c.want)
		}
	}
}
