//go:build linux

package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/credentials"

	"github.com/plumbline/plumbline/internal/agent"
	"github.com/plumbline/plumbline/internal/agent/config"
	"github.com/plumbline/plumbline/internal/lab/pgtest"
	"github.com/plumbline/plumbline/internal/maintenance"
	"github.com/plumbline/plumbline/internal/server/devca"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// TestIdleAgentsStayUp: liveness is the connection. A dev server with a
// 1s report interval and a 3s down threshold, and three real agents over
// mutual TLS with nothing to send after their first geometry snapshot:
// "idle" has no probe schedule, "maint" has one but is inside a
// maintenance window, "cut" (no schedule) connects through a TCP relay.
// All stay up (plumbline_agent_up 1) until their last report is four
// thresholds old. Then "idle" is stopped (its connection closes) and the
// relay of "cut" goes silent without closing anything, as a host that lost
// power: both read as down (the server's keepalive closes the dead
// connection), while "maint" stays up.
func TestIdleAgentsStayUp(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	conf := filepath.Join(t.TempDir(), "server.yaml")
	if err := os.WriteFile(conf, []byte("agents:\n  report_interval: 1s\n  down_after: 3s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startInProcess(t, "--dev", "--config", conf, "--data-dir", dataDir,
		"--grpc.listen-address", "127.0.0.1:0", "--web.listen-address", "127.0.0.1:0")
	const threshold = 3 * time.Second

	base, err := config.LoadRun(filepath.Join(dataDir, "dev", "agent.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	idle := base
	idle.AgentID, idle.Probes = "idle", nil
	stopIdle := runIdleAgent(t, dataDir, idle)
	maint := base
	maint.AgentID = "maint"
	maint.MaintenanceWindows = []maintenance.Window{{Name: "all-day", Schedule: "0 0 * * *", Duration: 24 * time.Hour}}
	runIdleAgent(t, dataDir, maint)
	relay := newRelay(t, srv.grpcAddr)
	cut := base
	cut.AgentID, cut.Probes, cut.Server.Address = "cut", nil, relay.addr()
	runIdleAgent(t, dataDir, cut)
	ids := []string{"idle", "maint", "cut"}

	metrics := "http://" + srv.webAddr + "/metrics"
	waitForAgents(t, metrics, func(s map[string]agentSample) bool {
		return s["idle"].up == 1 && s["maint"].up == 1 && s["cut"].up == 1
	}, "the agents registered and up")
	stayUp(t, metrics, ids, 4*threshold)

	stopIdle()
	relay.silence()
	waitForAgents(t, metrics, func(s map[string]agentSample) bool { return s["idle"].up == 0 && s["cut"].up == 0 },
		"the stopped agent and the one behind the silent relay down")
	if s := scrapeAgents(t, metrics); s["maint"].up != 1 {
		t.Errorf("plumbline_agent_up{agent_id=\"maint\"} = %v after the others went, want 1", s["maint"].up)
	}
}

// stayUp scrapes /metrics until the last report of each agent of ids is
// quiet old, failing when one reads as down meanwhile.
func stayUp(t *testing.T, metrics string, ids []string, quiet time.Duration) {
	t.Helper()
	for done := false; !done; time.Sleep(200 * time.Millisecond) {
		s := scrapeAgents(t, metrics)
		done = true
		for _, id := range ids {
			if s[id].up != 1 {
				t.Fatalf("plumbline_agent_up{agent_id=%q} = %v %s after its last report, want 1 while connected", id, s[id].up, time.Since(s[id].last).Round(time.Millisecond))
			}
			done = done && time.Since(s[id].last) > quiet
		}
	}
}

// TestLivenessAcrossReplicas: two server replicas on one PostgreSQL; an
// idle agent connected to the first is up on the second's /metrics too,
// for as long as it is connected, and down there once it stops.
func TestLivenessAcrossReplicas(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	dataDir := t.TempDir()
	conf := filepath.Join(t.TempDir(), "server.yaml")
	if err := os.WriteFile(conf, []byte("agents:\n  report_interval: 1s\n  down_after: 3s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"--dev", "--config", conf, "--data-dir", dataDir, "--store.dsn", dsn,
		"--grpc.listen-address", "127.0.0.1:0", "--web.listen-address", "127.0.0.1:0"}
	first := startInProcess(t, args...)
	second := startInProcess(t, args...) // the dev CA and certificates of the first
	base, err := config.LoadRun(filepath.Join(dataDir, "dev", "agent.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	a := base
	a.AgentID, a.Probes, a.Server.Address = "idle", nil, first.grpcAddr
	stop := runIdleAgent(t, dataDir, a)
	metrics := "http://" + second.webAddr + "/metrics"
	waitForAgents(t, metrics, func(s map[string]agentSample) bool { return s["idle"].up == 1 }, "the agent up on the other replica")
	stayUp(t, metrics, []string{"idle"}, 4*3*time.Second)
	stop()
	waitForAgents(t, metrics, func(s map[string]agentSample) bool { return s["idle"].up == 0 }, "the stopped agent down on the other replica")
}

// relay is a TCP relay to a server address that can go silent: it stops
// accepting and drops every byte either way without closing a connection,
// as a path to a host that lost power.
type relay struct {
	ln     net.Listener
	to     string
	silent atomic.Bool
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  []net.Conn
}

func newRelay(t *testing.T, to string) *relay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &relay{ln: ln, to: to}
	r.wg.Go(r.accept)
	t.Cleanup(func() {
		ln.Close()
		r.mu.Lock()
		for _, c := range r.conns {
			c.Close()
		}
		r.mu.Unlock()
		r.wg.Wait()
	})
	return r
}

func (r *relay) addr() string { return r.ln.Addr().String() }

// silence makes the relay drop everything from now on.
func (r *relay) silence() {
	r.silent.Store(true)
	r.ln.Close()
}

func (r *relay) accept() {
	for {
		in, err := r.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", r.to)
		if err != nil {
			in.Close()
			continue
		}
		r.mu.Lock()
		r.conns = append(r.conns, in, out)
		r.mu.Unlock()
		r.wg.Go(func() { r.pipe(out, in) })
		r.wg.Go(func() { r.pipe(in, out) })
	}
}

// pipe copies from src to dst until src fails; once silent it reads and
// drops.
func (r *relay) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !r.silent.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// runIdleAgent runs an agent from c with its own certificate from the dev
// CA and a discovery that finds no volume; the returned func stops it.
func runIdleAgent(t *testing.T, dataDir string, c config.Agent) (stop func()) {
	t.Helper()
	ca, err := devca.Load(filepath.Join(dataDir, "ca"))
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.IssueAgent(c.AgentID)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	c.Server.TLS.CertFile, c.Server.TLS.KeyFile = filepath.Join(dir, "agent.crt"), filepath.Join(dir, "agent.key")
	if err := leaf.WriteFiles(c.Server.TLS.CertFile, c.Server.TLS.KeyFile); err != nil {
		t.Fatal(err)
	}
	c.Spool.Dir = filepath.Join(dir, "spool")
	c.Intervals.Report = time.Second
	c.Web.ListenAddress = ""
	for i := range c.Probes {
		c.Probes[i].Dir = filepath.Join(dir, "probe")
	}
	if err := c.ValidateRun(); err != nil {
		t.Fatal(err)
	}
	tc, _, err := agent.ClientTLS(c.Server)
	if err != nil {
		t.Fatal(err)
	}
	a, err := agent.New(agent.Options{Config: c, AgentID: c.AgentID, Version: "test", Creds: credentials.NewTLS(tc),
		Discover: func(context.Context) (agent.Discovery, error) {
			return agent.Discovery{Inventory: &plumblinev1.Inventory{Host: &plumblinev1.Host{Hostname: "vm"}}}, nil
		},
		BackoffBase: 50 * time.Millisecond, BackoffMax: 500 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); a.Run(ctx) }()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	return stop
}

// agentSample is an agent's plumbline_agent_up and last report time.
type agentSample struct {
	up   float64
	last time.Time
}

var agentLine = regexp.MustCompile(`(?m)^plumbline_agent_(up|last_report_timestamp_seconds)\{agent_id="([^"]+)",host="[^"]*"\} (\S+)$`)

// scrapeAgents reads the agents' series from /metrics.
func scrapeAgents(t *testing.T, url string) map[string]agentSample {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	out := map[string]agentSample{}
	for _, m := range agentLine.FindAllStringSubmatch(string(body), -1) {
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			t.Fatalf("%s: %v", m[0], err)
		}
		s := out[m[2]]
		if m[1] == "up" {
			s.up = v
		} else {
			s.last = time.Unix(0, int64(v*1e9))
		}
		out[m[2]] = s
	}
	return out
}

// waitForAgents polls /metrics until cond holds (a minute at most).
func waitForAgents(t *testing.T, url string, cond func(map[string]agentSample) bool, what string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		s := scrapeAgents(t, url)
		if cond(s) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within a minute; agents: %s", what, fmt.Sprint(s))
		}
		time.Sleep(100 * time.Millisecond)
	}
}
