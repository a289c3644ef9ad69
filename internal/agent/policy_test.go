package agent

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/plumbline/plumbline/internal/agent/config"
	"github.com/plumbline/plumbline/internal/agent/probe"
	"github.com/plumbline/plumbline/internal/histogram"
	"github.com/plumbline/plumbline/internal/maintenance"
	"github.com/plumbline/plumbline/internal/policy"
	"github.com/plumbline/plumbline/internal/server/evaluator"
	"github.com/plumbline/plumbline/internal/server/ingest"
	"github.com/plumbline/plumbline/internal/vocab"
)

// centralEntries is one policy entry for hosts labelled role=postgres:
// random reads on /data* every `every`.
func centralEntries(dir string, every time.Duration) []policy.Entry {
	return []policy.Entry{{Name: "pg", Select: policy.Selector{Labels: map[string]string{"role": "postgres"}},
		Policy: policy.Fragment{Probes: []config.ProbeSchedule{{MountPoint: "/data*", Dir: dir, Kinds: []probe.Kind{probe.RandomRead}, Every: every, MaxDuration: time.Second}}}}}
}

// The server's policy changes while an agent runs: over the same mTLS
// session (no new Hello, no session error) the agent takes the new
// schedule, and the server's policy API shows it running it.
func TestCentralPolicyChangesWithoutReconnect(t *testing.T) {
	p := newPKI(t, "db1")
	dir := t.TempDir()
	src := policy.NewSource(centralEntries(dir, time.Hour))
	srv := startRealServerWith(t, p, "sqlite://"+filepath.Join(dir, "server.db"),
		ingest.Options{ReportInterval: 50 * time.Millisecond, RatePerSecond: -1, Policy: src})
	c := testConfig(srv.addr, p, dir)
	c.Probes = nil // every schedule is central
	c.Labels = map[string]string{"role": "postgres"}
	prober := &fakeProber{}
	var discoveries atomic.Int64
	inv := fakeInventory("/data1")
	a := newTestAgent(t, c, p, prober.run, func(ctx context.Context) (Discovery, error) { discoveries.Add(1); return inv(ctx) })
	runAgent(t, a)

	runs := func() int { prober.mu.Lock(); defer prober.mu.Unlock(); return prober.runs }
	waitFor(t, "the central schedule's first run", func() bool { return runs() >= 1 })
	if got := a.eff.Load().origins[policy.KeyProbes]; got != "central" {
		t.Fatalf("probes come from %q, want central", got)
	}
	// Every hour: one run. The server's policy changes to every second;
	// the agent must run it without reconnecting.
	before := a.eff.Load().digest()
	changed := time.Now()
	src.Update(centralEntries(dir, time.Second))
	waitFor(t, "the agent to apply the new policy", func() bool { return string(a.eff.Load().digest()) != string(before) })
	t.Logf("policy change applied by the agent %s after the server's update (WatchPolicy wakes at once)", time.Since(changed).Round(time.Millisecond))
	waitFor(t, "runs every second under the new central policy", func() bool { return runs() >= 4 })
	if n := testutil.ToFloat64(a.metrics.sendErrors); n != 0 {
		t.Errorf("%g sessions ended: the policy change must not need a reconnect", n)
	}
	if n := testutil.ToFloat64(a.metrics.policyUpdates); n != 2 {
		t.Errorf("policy updates = %g, want 2 (the Hello's, the change's)", n)
	}

	// The API: the agent's labels, the central policy and the effective
	// configuration it reported running (stored), in sync.
	api := httptest.NewServer(policy.Handler(src, srv.svc.PolicyReports))
	defer api.Close()
	var view policy.HostView
	waitFor(t, "the API to show the agent in sync", func() bool {
		resp, err := http.Get(api.URL + "/api/v1/hosts/db1/policy")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		view = policy.HostView{}
		if err := json.NewDecoder(resp.Body).Decode(&view); err != nil {
			t.Fatal(err)
		}
		return len(view.Agents) == 1 && view.Agents[0].InSync
	})
	ag := view.Agents[0]
	if ag.Labels["role"] != "postgres" || !strings.Contains(ag.Effective, "every: 1s") || !strings.Contains(ag.Effective, "probes:") ||
		len(ag.Central.Sources) != 1 || ag.Central.Sources[0] != "pg" {
		t.Errorf("API view = %+v", ag)
	}
	// Declared devices are part of the geometry: a policy that changes
	// them makes the agent discover again.
	before, n := a.eff.Load().digest(), discoveries.Load()
	withRAID := centralEntries(dir, time.Second)
	withRAID[0].Policy.DeclaredDevices = []config.DeclaredDevice{{Device: "/dev/sdb", RAID: config.DeclaredRAID{Level: "raid10", StripeUnit: 64 << 10, Disks: 4}}}
	src.Update(withRAID)
	waitFor(t, "a discovery after the declared devices changed", func() bool {
		return string(a.eff.Load().digest()) != string(before) && discoveries.Load() > n
	})
	if d := a.eff.Load().cfg.DeclaredDevices; len(d) != 1 || d[0].Device != "/dev/sdb" {
		t.Errorf("effective declared devices = %+v", d)
	}

	// --print-config reads the same from the cache the agent keeps.
	b, err := EffectiveConfig(c)
	if err != nil || !strings.Contains(string(b), "every: 1s") || !strings.Contains(string(b), "[pg]") {
		t.Errorf("EffectiveConfig = %s, %v", b, err)
	}
}

// windowProber records when each run's context ended; a run does one op
// and then waits for its context, as a long run would, and reports what
// the engine reports for a cancelled run (interrupted, ops so far).
type windowProber struct {
	mu       sync.Mutex
	runs     int
	canceled []time.Time
}

func (w *windowProber) run(ctx context.Context, o probe.Options) (probe.Result, error) {
	w.mu.Lock()
	w.runs++
	w.mu.Unlock()
	start := time.Now()
	<-ctx.Done()
	w.mu.Lock()
	w.canceled = append(w.canceled, time.Now())
	w.mu.Unlock()
	var h histogram.Histogram
	h.Observe(200 * time.Microsecond)
	return probe.Result{Kind: o.Kind, BlockSize: o.BlockSize, QueueDepth: 1, Ops: 1, Bytes: int64(o.BlockSize), Duration: time.Since(start).Seconds(),
		StartedAt: start, OpsBudget: o.Ops, Histogram: &h, StoppedReason: vocab.StopInterrupted, File: filepath.Join(o.Dir, probe.DefaultFileName)}, nil
}

// A maintenance window of the local file: the run under way when it
// starts is stopped at its start (stop reason maintenance), the runs due
// inside it are skipped and counted — by the agent, and by the server.
func TestMaintenanceStopsAndSkips(t *testing.T) {
	p := newPKI(t, "db1")
	dir := t.TempDir()
	srv := startRealServer(t, p, "sqlite://"+filepath.Join(dir, "server.db"))
	c := testConfig(srv.addr, p, dir)
	c.Probes[0].Kinds = []probe.Kind{probe.RandomRead}
	c.Probes[0].Every, c.Probes[0].Jitter, c.Probes[0].MaxDuration = time.Second, 0, time.Second
	c.MaintenanceWindows = []maintenance.Window{{Name: "patch", Schedule: "0 * * * *", Duration: time.Minute}}
	if _, err := maintenance.Compile(c.MaintenanceWindows); err != nil {
		t.Fatal(err)
	}
	// The agent's clock reads 5 s before a full hour: the first run starts
	// outside the window (with time to spare on a loaded machine) and the
	// window opens during it.
	const lead = 5 * time.Second
	real0 := time.Now()
	fake0 := real0.Truncate(time.Hour).Add(time.Hour - lead)
	windowStart := real0.Add(lead)
	prober := &windowProber{}
	a := newTestAgent(t, c, p, prober.run, fakeInventory("/data1"))
	a.o.Now = func() time.Time { return fake0.Add(time.Since(real0)) }
	runAgent(t, a)

	kind := string(probe.RandomRead)
	maint := func() float64 {
		return testutil.ToFloat64(a.metrics.probeSkips.WithLabelValues(kind, vocab.StopMaintenance))
	}
	waitFor(t, "a stopped run and a skipped one", func() bool { return maint() >= 2 })
	if got := testutil.ToFloat64(a.metrics.probeRuns.WithLabelValues(kind, "stopped")); got != 1 {
		t.Errorf("stopped runs = %g, want 1 (the run under way at the window's start)", got)
	}
	if got := testutil.ToFloat64(a.metrics.probeRuns.WithLabelValues(kind, "skipped")); got < 1 {
		t.Errorf("skipped runs = %g, want the runs due inside the window", got)
	}
	if err := testutil.GatherAndCompare(a.metrics.reg, strings.NewReader(`
# HELP plumbline_agent_maintenance_active 1 while a maintenance window of the effective configuration is open: no probe starts, running ones stop (stop reason maintenance).
# TYPE plumbline_agent_maintenance_active gauge
plumbline_agent_maintenance_active 1
`), "plumbline_agent_maintenance_active"); err != nil {
		t.Error(err)
	}
	prober.mu.Lock()
	runs, canceled := prober.runs, prober.canceled
	prober.mu.Unlock()
	if runs != 1 || len(canceled) != 1 {
		t.Fatalf("prober ran %d times (%d ended): want only the one started before the window", runs, len(canceled))
	}
	// Stopped at the window's start, not by its run timeout (30 s and up).
	if late := canceled[0].Sub(windowStart); late < -100*time.Millisecond || late > 5*time.Second {
		t.Errorf("the run ended %s after the window started, want at its start", late)
	}

	// The server stores the runs and counts them by reason.
	waitFor(t, "the server to store the runs", func() bool { return settled(a) >= 3 })
	ev, err := evaluator.New(srv.st, evaluator.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ev.Pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	counts, err := srv.st.ListStopCounts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, sc := range counts {
		if sc.Reason == vocab.StopMaintenance && sc.Kind == kind {
			n += sc.Runs
		}
	}
	if n < 2 {
		t.Errorf("server stop counts %+v: want at least 2 with reason maintenance", counts)
	}
}
