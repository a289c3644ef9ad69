//go:build linux

package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc/credentials"

	"github.com/plumbline/plumbline/internal/agent"
	"github.com/plumbline/plumbline/internal/config"
	"github.com/plumbline/plumbline/internal/devca"
	"github.com/plumbline/plumbline/internal/maintenance"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// TestIdleAgentsStayUp: liveness is the connection. A dev server with a
// 1s report interval and a 3s down threshold, and two real agents over
// mutual TLS with nothing to send after their first geometry snapshot:
// "idle" has no probe schedule, "maint" has one but is inside a
// maintenance window. Both stay up (plumbline_agent_up 1) until their last
// report is four thresholds old; stopping "idle" makes it down, while
// "maint" stays up.
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

	metrics := "http://" + srv.webAddr + "/metrics"
	waitForAgents(t, metrics, func(s map[string]agentSample) bool {
		return s["idle"].up == 1 && s["maint"].up == 1
	}, "both agents registered and up")
	for {
		s := scrapeAgents(t, metrics)
		for _, id := range []string{"idle", "maint"} {
			if s[id].up != 1 {
				t.Fatalf("plumbline_agent_up{agent_id=%q} = %v %s after its last report, want 1 while connected", id, s[id].up, time.Since(s[id].last).Round(time.Millisecond))
			}
		}
		if time.Since(s["idle"].last) > 4*threshold && time.Since(s["maint"].last) > 4*threshold {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}

	stopIdle()
	waitForAgents(t, metrics, func(s map[string]agentSample) bool { return s["idle"].up == 0 }, "the stopped agent down")
	if s := scrapeAgents(t, metrics); s["maint"].up != 1 {
		t.Errorf("plumbline_agent_up{agent_id=\"maint\"} = %v after the other agent stopped, want 1", s["maint"].up)
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
