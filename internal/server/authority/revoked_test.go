package authority_test

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/plumbline/plumbline/internal/enroll"
	"github.com/plumbline/plumbline/internal/server/authority"
)

// TestRevokedAgent: after `server agent revoke`, the agent's calls are
// refused with the revocation status; the agent logs it at
// ERROR with what to do, shows plumbline_agent_revoked 1 and waits the
// long retry instead of backing off; the server logs the agent once
// however often it calls, and counts every refusal in its /metrics.
func TestRevokedAgent(t *testing.T) {
	t.Parallel()
	r := startServer(t, newPKI(t), "sqlite://"+filepath.Join(t.TempDir(), "p.db"), time.Hour)
	dir := t.TempDir()
	token, pin := r.token(t, authority.TokenSpec{})
	res, err := r.enroll(dir, token, pin, "db-1")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.st.RevokeAgent(context.Background(), "db-1"); err != nil {
		t.Fatal(err)
	}
	ag := runAgent(t, r, res, dir) // as after a restart, or a reconnection
	waitFor(t, "the agent to log the revocation", 30*time.Second, func() bool {
		return strings.Contains(ag.log.String(), "enrollment was revoked")
	})
	var line string
	for _, l := range strings.Split(ag.log.String(), "\n") {
		if strings.Contains(l, "enrollment was revoked") {
			line = l
			break
		}
	}
	for _, want := range []string{"level=ERROR", "agent enroll", "restart the agent", "in=" + time.Duration(30*time.Minute).String()} {
		if !strings.Contains(line, want) {
			t.Errorf("the agent's revocation line lacks %q: %s", want, line)
		}
	}
	if m := scrape(t, ag.a); !strings.Contains(m, "plumbline_agent_revoked 1") {
		t.Errorf("agent /metrics after the revocation:\n%s", grepLines(m, "revoked"))
	}

	before := revokedRefusals(t, r)
	for range 3 {
		if err := hello(r.dial(t, res.CertFile, res.KeyFile), "db-1"); !enroll.IsRevoked(err) {
			t.Fatalf("Hello with the revoked certificate: %v; want the revocation status", err)
		}
	}
	if after := revokedRefusals(t, r); after-before < 3 {
		t.Errorf("plumbline_enrollment_revoked_refusals_total went from %d to %d after three refused calls", before, after)
	}
	if n := strings.Count(r.log.String(), "refused a revoked agent"); n != 1 {
		t.Errorf("the server logged the revoked agent %d times, want once:\n%s", n, grepLines(r.log.String(), "revoked"))
	}
	if l := grepLines(r.log.String(), "refused a revoked agent"); !strings.Contains(l, "level=WARN") || !strings.Contains(l, "agent=db-1") {
		t.Errorf("the server's revocation line: %s; want WARN naming agent db-1", l)
	}
}

// revokedRefusals is the server's plumbline_enrollment_revoked_refusals_total.
func revokedRefusals(t *testing.T, r *running) int {
	t.Helper()
	resp, err := http.Get("http://" + r.web + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	const name = "plumbline_enrollment_revoked_refusals_total "
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, name); ok {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return int(n)
		}
	}
	t.Fatalf("server /metrics has no %s", name)
	return 0
}
