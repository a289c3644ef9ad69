package agent

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/credentials"

	"github.com/plumbline/plumbline/internal/agent/config"
	"github.com/plumbline/plumbline/internal/agent/probe"
	"github.com/plumbline/plumbline/internal/policy"
	"github.com/plumbline/plumbline/internal/server/ingest"
)

// An agent started on a minimal configuration file (server, TLS and spool
// only) reports geometry, and says in its log and its /metrics what it is
// not doing: no probe schedule, no declared arrays, no maintenance
// windows, no labels. When a central policy turns probes on, it says so,
// and the metric follows.
func TestUnconfiguredSaysWhatItIsNotDoing(t *testing.T) {
	p := newPKI(t, "db1")
	dir := t.TempDir()
	src := policy.NewSource(nil)
	srv := startRealServerWith(t, p, "sqlite://"+filepath.Join(dir, "server.db"),
		ingest.Options{ReportInterval: 50 * time.Millisecond, RatePerSecond: -1, Policy: src})
	file := filepath.Join(dir, "agent.yaml")
	yml := fmt.Sprintf("server:\n  address: %s\n  tls:\n    ca_file: %s\n    cert_file: %s\n    key_file: %s\nspool:\n  dir: %s\n",
		srv.addr, p.caFile, p.certFile, p.keyFile, filepath.Join(dir, "spool"))
	if err := os.WriteFile(file, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	c.Intervals.Report = 50 * time.Millisecond
	tc, id, err := ClientTLS(c.Server)
	if err != nil {
		t.Fatal(err)
	}
	logs := &logRecorder{}
	a, err := New(Options{Config: c, AgentID: id, Version: "test", Creds: credentials.NewTLS(tc),
		Discover: fakeInventory("/data1"), Probe: (&fakeProber{}).run, MountPoll: 20 * time.Millisecond,
		BackoffBase: 10 * time.Millisecond, BackoffMax: 100 * time.Millisecond, Logger: slog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	runAgent(t, a)
	waitFor(t, "the geometry snapshot stored", func() bool { return settled(a) >= 1 })

	var seen []string
	for _, l := range logs.take() {
		if strings.HasPrefix(l, "INFO ") {
			seen = append(seen, l)
		}
	}
	all := strings.Join(seen, "\n")
	for _, want := range []string{
		"INFO no probe schedule: the agent reports geometry only", "key=probes",
		"INFO no declared arrays: hardware RAID under a volume (which the OS cannot see) reads as unknown RAID", "key=declared_devices",
		"INFO no maintenance windows", "key=maintenance_windows",
		"INFO no labels", "key=labels",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("the log lacks %q:\n%s", want, all)
		}
	}
	for _, want := range []string{
		`plumbline_agent_probe_schedules{kind="random-read"} 0`, `plumbline_agent_probe_schedules{kind="log-write"} 0`,
		"plumbline_agent_declared_arrays 0", "plumbline_agent_maintenance_windows 0", "plumbline_agent_labels 0",
	} {
		if m := scrape(t, a); !strings.Contains(m, want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	// The server's policy now gives a schedule: the agent says probes are
	// configured, and the gauge counts it.
	src.Update([]policy.Entry{{Name: "all", Policy: policy.Fragment{Probes: []config.ProbeSchedule{
		{MountPoint: "/data*", Dir: dir, Kinds: []probe.Kind{probe.RandomRead}, Every: time.Hour, MaxDuration: time.Second}}}}})
	var later string
	waitFor(t, "the schedule counted in /metrics and logged", func() bool {
		later += strings.Join(logs.take(), "\n") + "\n"
		return strings.Contains(scrape(t, a), `plumbline_agent_probe_schedules{kind="random-read"} 1`+"\n") &&
			strings.Contains(later, "INFO now configured key=probes origin=central")
	})
	if strings.Contains(later, "no probe schedule") {
		t.Errorf("the log repeats what is still not configured after the change:\n%s", later)
	}
}

// scrape is the agent's /metrics.
func scrape(t *testing.T, a *Agent) string {
	t.Helper()
	rec := httptest.NewRecorder()
	a.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	return rec.Body.String()
}
