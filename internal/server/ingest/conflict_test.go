package ingest

import (
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// TestIdentityConflictEpisode over gRPC+TLS: a second agent runs a minute
// on db1's certificate (its own spool incarnation) while db1 keeps
// reporting, then stops. The conflict is logged once for the episode and
// counted while it lasts; db1 reporting alone for an hour afterwards logs
// and counts nothing more. A conflict after a quiet gap is a new episode,
// logged again.
func TestIdentityConflictEpisode(t *testing.T) {
	t.Parallel()
	var clock atomic.Int64
	clock.Store(time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC).UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()).UTC() }
	tick := func(d time.Duration) { clock.Add(int64(d)) }
	logs := &logText{}
	e := startServer(t, sqliteDSN(t), newPKI(t), Options{Now: now, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	c := e.agent(t, "db1")
	hello := func(inc string) {
		t.Helper()
		if _, err := c.Hello(ctxT(t), &plumblinev1.HelloRequest{AgentId: "db1", Incarnation: inc, Host: &plumblinev1.Host{Hostname: "db1"}}); err != nil {
			t.Fatal(err)
		}
	}
	seq := map[string]uint64{}
	report := func(inc string) {
		t.Helper()
		seq[inc]++
		if _, err := c.Report(ctxT(t), &plumblinev1.ReportRequest{AgentId: "db1", Incarnation: inc, Records: probeRecords(seq[inc], seq[inc])}); err != nil {
			t.Fatal(err)
		}
	}
	logged := func() int { return strings.Count(logs.String(), "two agents are reporting as one identity") }
	counted := func() uint64 {
		t.Helper()
		hosts, err := e.store.ListHosts(ctxT(t))
		if err != nil || len(hosts) != 1 {
			t.Fatalf("ListHosts = %v, %v", hosts, err)
		}
		return hosts[0].IdentityConflicts
	}

	hello("spool-a")
	report("spool-a")
	hello("spool-b") // the second agent, for a minute: both report every 10s
	for range 6 {
		tick(10 * time.Second)
		report("spool-b")
		report("spool-a")
	}
	if n := logged(); n != 1 {
		t.Errorf("during the episode: %d conflict log lines, want 1", n)
	}
	during := counted()
	if during < 6 {
		t.Errorf("during the episode: %d conflicts counted, want at least 6", during)
	}
	for range 60 { // the second agent stopped; db1 reports alone for an hour
		tick(time.Minute)
		report("spool-a")
	}
	if n, got := logged(), counted(); n != 1 || got != during {
		t.Errorf("an hour after the second agent stopped: %d log lines, %d conflicts; want 1, %d", n, got, during)
	}
	report("spool-b") // it comes back: a new episode
	if n := logged(); n != 2 {
		t.Errorf("a conflict after a quiet hour: %d log lines, want 2", n)
	}
}

// logText is a log destination read as text.
type logText struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logText) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logText) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
