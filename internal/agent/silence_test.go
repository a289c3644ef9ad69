package agent

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/plumbline/plumbline/internal/agent/config"
	"github.com/plumbline/plumbline/internal/agent/geometry"
	"github.com/plumbline/plumbline/internal/agent/probe"
	"github.com/plumbline/plumbline/internal/server/ingest"
	"github.com/plumbline/plumbline/internal/vocab"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// TestRefusedRunReported: a run the probe refuses (here the schedule's
// free-space floor, min_free, is larger than any disk) reaches the server
// as a probe result with stopped_reason refused and the probe's message,
// one the server's validation accepts, and is counted in the agent's
// metrics. Before, a refused run was only logged: the server never heard.
func TestRefusedRunReported(t *testing.T) {
	p := newPKI(t, "db1")
	srv := newTestServer(t, p)
	defer srv.stop()
	dir := t.TempDir()
	c := testConfig(srv.addr, p, dir)
	c.Probes[0].Every = time.Hour
	c.Probes[0].Kinds = []probe.Kind{probe.LogWrite}
	huge := config.MinFree(1 << 60)
	c.Probes[0].MinFree = &huge
	a := newTestAgent(t, c, p, probe.Run, fakeInventory("/data1"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var got *plumblinev1.Record
	waitFor(t, "a probe result at the server", func() bool {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		for _, r := range srv.stored {
			if r.GetProbe() != nil {
				got = r
				return true
			}
		}
		return false
	})
	cancel()
	<-done
	pr := got.GetProbe()
	if pr.GetStoppedReason() != vocab.StopRefused || !pr.GetSkipped() || pr.GetOps() != 0 ||
		!strings.Contains(pr.GetFailure(), "not enough free space") || pr.GetMountPoint() != "/data1" || pr.GetKind() != "log-write" || pr.GetSync() != "dsync" {
		t.Errorf("probe result = %v, want a refused log-write run of /data1 with the free-space message", pr)
	}
	b, err := ingest.ValidateReport(&plumblinev1.ReportRequest{AgentId: "db1", Records: []*plumblinev1.Record{got}}, ingest.DefaultLimits(), time.Now())
	if err != nil || len(b.Rejections) != 0 {
		t.Errorf("the server's validation: %v, rejections %v", err, b.Rejections)
	}
	rec := httptest.NewRecorder()
	a.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if want := `plumbline_agent_probe_skips_total{kind="log-write",reason="refused"} 1`; !strings.Contains(rec.Body.String(), want) {
		t.Errorf("/metrics lacks %s:\n%s", want, rec.Body)
	}
}

// logRecorder keeps every log record's level, message and attributes.
type logRecorder struct {
	mu    sync.Mutex
	lines []string
}

func (r *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *logRecorder) Handle(_ context.Context, rec slog.Record) error {
	line := rec.Level.String() + " " + rec.Message
	rec.Attrs(func(a slog.Attr) bool { line += " " + a.String(); return true })
	r.mu.Lock()
	r.lines = append(r.lines, line)
	r.mu.Unlock()
	return nil
}
func (r *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *logRecorder) WithGroup(string) slog.Handler      { return r }

func (r *logRecorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.lines
	r.lines = nil
	return l
}

// TestCoverage: a schedule whose glob matches no volume and a mount that
// discovery filtered out are logged at start and on change — not at every
// discovery — and shown in the agent's metrics.
func TestCoverage(t *testing.T) {
	p := newPKI(t, "db1")
	c := testConfig("127.0.0.1:1", p, t.TempDir())
	c.Probes = append(c.Probes, config.ProbeSchedule{MountPoint: "/srv/pg", Dir: "/srv/pg/p", Kinds: []probe.Kind{probe.RandomRead}},
		// Matches /data1, but probes[0] already takes random-read there.
		config.ProbeSchedule{MountPoint: "/data1", Dir: "/data1/p", Kinds: []probe.Kind{probe.RandomRead}})
	a := newTestAgent(t, c, p, nil, fakeInventory("/data1"))
	defer a.Spool().Close()
	rec := &logRecorder{}
	cov := newCoverage(slog.New(rec), a.metrics)
	vols := func(mps ...string) []*plumblinev1.Volume {
		d, _ := fakeInventory(mps...)(t.Context())
		return d.Inventory.GetVolumes()
	}
	btrfs := geometry.Filtered{MountPoint: "/srv/pg", FSType: "btrfs", Source: "/dev/sdf", Reason: geometry.FilterNoBlockDevice}
	shm := geometry.Filtered{MountPoint: "/dev/shm", FSType: "tmpfs", Source: "tmpfs", Reason: geometry.FilterInMemory}
	metrics := func() string {
		w := httptest.NewRecorder()
		a.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		return w.Body.String()
	}
	has := func(lines []string, level, phrase string) bool {
		for _, l := range lines {
			if strings.HasPrefix(l, level+" ") && strings.Contains(l, phrase) {
				return true
			}
		}
		return false
	}

	cov.update(t.Context(), c.Probes, vols("/data1"), []geometry.Filtered{btrfs, shm})
	lines := rec.take()
	if !has(lines, "WARN", "probe schedule matches no volume") || !has(lines, "WARN", "filtered_out=[/srv/pg (btrfs: no-block-device)]") {
		t.Errorf("start: log = %q, want a warning naming probes[1] and the filtered /srv/pg", lines)
	}
	if !has(lines, "WARN", "probe schedule probes nothing: earlier schedules take every kind") || !has(lines, "WARN", "schedule=probes[2]") {
		t.Errorf("start: log = %q, want a warning that probes[2] is shadowed", lines)
	}
	if !has(lines, "INFO", "mount filtered out by discovery") || !has(lines, "INFO", "mount_point=/srv/pg") || !has(lines, "DEBUG", "mount_point=/dev/shm") {
		t.Errorf("start: log = %q, want /srv/pg filtered at info, /dev/shm at debug", lines)
	}
	m := metrics()
	for _, want := range []string{
		`plumbline_agent_schedule_unmatched{mount_point="/srv/pg",schedule="1"} 1`,
		`plumbline_agent_schedule_unmatched{mount_point="/data*",schedule="0"} 0`,
		`plumbline_agent_schedule_unmatched{mount_point="/data1",schedule="2"} 0`,
		`plumbline_agent_volumes_filtered{reason="no-block-device"} 1`,
		`plumbline_agent_volumes_filtered{reason="in-memory"} 1`,
		`plumbline_agent_volumes_filtered{reason="excluded"} 0`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	// The same answer again: nothing new to say.
	cov.update(t.Context(), c.Probes, vols("/data1"), []geometry.Filtered{btrfs, shm})
	if lines := rec.take(); len(lines) != 0 {
		t.Errorf("unchanged discovery logged %q, want nothing", lines)
	}

	// /srv/pg becomes a volume: the schedule matches again.
	cov.update(t.Context(), c.Probes, vols("/data1", "/srv/pg"), []geometry.Filtered{shm})
	lines = rec.take()
	if !has(lines, "INFO", "probe schedule matches volumes again") || has(lines, "WARN", "") {
		t.Errorf("change: log = %q, want the schedule matching again and no warning", lines)
	}
	if m := metrics(); !strings.Contains(m, `plumbline_agent_schedule_unmatched{mount_point="/srv/pg",schedule="1"} 0`) ||
		!strings.Contains(m, `plumbline_agent_volumes_filtered{reason="no-block-device"} 0`) {
		t.Errorf("after the change /metrics = %s", m)
	}
}

// TestFailureText: an error message becomes a failure the server accepts:
// no control characters, valid UTF-8, at most probe.MaxFailureBytes.
func TestFailureText(t *testing.T) {
	long := "open /data/é\x1b[2J\n" + strings.Repeat("é", 2000) + "\xff"
	got := failureText(long)
	if len(got) > probe.MaxFailureBytes || !utf8.ValidString(got) || strings.ContainsFunc(got, unicode.IsControl) || !strings.HasPrefix(got, "open /data/é [2J ") || !strings.HasSuffix(got, "…") {
		t.Errorf("failureText = %q (%d bytes)", got, len(got))
	}
	if got := failureText("short"); got != "short" {
		t.Errorf("failureText(short) = %q", got)
	}
}
