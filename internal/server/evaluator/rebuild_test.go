package evaluator

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/plumbline/plumbline/internal/server/baseline"
	"github.com/plumbline/plumbline/internal/server/store"
	"github.com/plumbline/plumbline/internal/wire"
)

// statesStore is the real store, with the volume states the evaluator
// puts kept in order.
type statesStore struct {
	*store.Store
	mu     sync.Mutex
	states []store.BaselineState
}

func (s *statesStore) PutBaselineStates(ctx context.Context, states []store.BaselineState) error {
	s.mu.Lock()
	s.states = append(s.states, states...)
	s.mu.Unlock()
	return s.Store.PutBaselineStates(ctx, states)
}

func (s *statesStore) last(t *testing.T) store.BaselineState {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.states) == 0 {
		t.Fatal("no volume state put")
	}
	return s.states[len(s.states)-1]
}

// recovering marks a run as made while md0 recovered done of 10^9 sectors
// (about 477 GiB) at 50 MiB/s (and md1 ran a check, which is no rebuild).
func recovering(r store.Record, done uint64) store.Record {
	r.Probe.ArrayActivity = []store.ArrayActivity{
		{Device: "md1", Action: "check", DoneSectors: 10, TotalSectors: 1000},
		{Device: "md0", Action: "recover", DoneSectors: done, TotalSectors: 1e9, SpeedBytesPerSecond: 50 << 20},
	}
	return r
}

// TestRebuildRunsKeptOutOfHistory: a volume with a trusted history of 1 ms
// runs (16), then 8 runs at 10 ms while md0 recovers. Marked, they leave the
// detector as it was (ok, history median 1 ms, the run count unchanged)
// and the volume's state says it is rebuilding and how far along; a later
// run without the mark ends that. Unmarked, the same runs degrade it.
func TestRebuildRunsKeptOutOfHistory(t *testing.T) {
	t.Parallel()
	for _, e := range engines {
		t.Run(e.Name, func(t *testing.T) {
			t.Parallel()
			for _, marked := range []bool{true, false} {
				rebuildRunsKeptOut(t, e.DSN(t), marked)
			}
		})
	}
}

func rebuildRunsKeptOut(t *testing.T, dsn string, marked bool) {
	ctx := t.Context()
	st0, err := store.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st0.Close()
	st := &statesStore{Store: st0}
	if err := st.UpsertAgent(ctx, store.Agent{ID: "a1", Hostname: "h1"}); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	var recs []store.Record
	for i := range 16 {
		recs = append(recs, probeRec(t, uint64(i+1), t0.Add(time.Duration(i)*time.Hour), time.Millisecond))
	}
	rebuildStart := t0.Add(16 * time.Hour)
	for i := range 8 {
		r := probeRec(t, uint64(17+i), rebuildStart.Add(time.Duration(i)*time.Hour), 10*time.Millisecond)
		if marked {
			r = recovering(r, uint64(300+i*20)*1e6)
		}
		recs = append(recs, r)
	}
	if _, err := st.AppendBatch(ctx, "a1", recs); err != nil {
		t.Fatal(err)
	}
	ev, err := New(st, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := ev.Pass(ctx); err != nil || n != 24 {
		t.Fatalf("Pass = %d, %v; want 24", n, err)
	}
	bs, err := st.ListProbeBaselines(ctx)
	if err != nil || len(bs) != 1 {
		t.Fatalf("baselines = %+v, %v; want one", bs, err)
	}
	vs := st.last(t)
	if !marked {
		if bs[0].Status != string(baseline.Degraded) || vs.State != string(baseline.Degraded) {
			t.Fatalf("unmarked slow runs: detector %s, volume %s; want degraded (the test needs runs that degrade)", bs[0].Status, vs.State)
		}
		return
	}
	if bs[0].Status != string(baseline.OK) || bs[0].Runs != 16 || bs[0].HistoryMedian > 0.0015 {
		t.Errorf("after the rebuild's runs: status %s, runs %d, history median %gs; want ok, 16, about 1 ms",
			bs[0].Status, bs[0].Runs, bs[0].HistoryMedian)
	}
	wantReason := "rebuilding, 44% done: md0 recover at 50.0 MiB/s, about 1h31m0s left, since " + rebuildStart.Format(time.RFC3339)
	if vs.State != string(baseline.Rebuilding) || vs.Degraded || !strings.HasPrefix(vs.Reason, wantReason) {
		t.Errorf("volume state = %s (degraded %v): %q; want rebuilding: %q…", vs.State, vs.Degraded, vs.Reason, wantReason)
	}

	// The rebuild ends: the next run, unmarked, is judged and clears it.
	if _, err := st.AppendBatch(ctx, "a1", []store.Record{probeRec(t, 25, rebuildStart.Add(9*time.Hour), time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	if n, err := ev.Pass(ctx); err != nil || n != 1 {
		t.Fatalf("Pass = %d, %v; want 1", n, err)
	}
	if vs := st.last(t); vs.State != string(baseline.OK) || strings.Contains(vs.Reason, "rebuilding") {
		t.Errorf("after the rebuild: volume state %s %q, want ok", vs.State, vs.Reason)
	}
}

// TestFirstRunsDuringRebuild: a volume whose first runs are a rebuild's is
// rebuilding, its detector learning with no run judged, their latencies in
// its cumulative histogram; a marked run the busy guard skipped moves the
// state on.
func TestFirstRunsDuringRebuild(t *testing.T) {
	t.Parallel()
	for _, e := range engines {
		t.Run(e.Name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			st0, err := store.Open(ctx, e.DSN(t))
			if err != nil {
				t.Fatal(err)
			}
			defer st0.Close()
			st := &statesStore{Store: st0}
			if err := st.UpsertAgent(ctx, store.Agent{ID: "a1", Hostname: "h1"}); err != nil {
				t.Fatal(err)
			}
			t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
			recs := []store.Record{
				recovering(probeRec(t, 1, t0, 10*time.Millisecond), 1e8),
				recovering(probeRec(t, 2, t0.Add(time.Hour), 10*time.Millisecond), 2e8),
			}
			if _, err := st.AppendBatch(ctx, "a1", recs); err != nil {
				t.Fatal(err)
			}
			ev, err := New(st, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if n, err := ev.Pass(ctx); err != nil || n != 2 {
				t.Fatalf("Pass = %d, %v; want 2", n, err)
			}
			bs, err := st.ListProbeBaselines(ctx)
			if err != nil || len(bs) != 1 {
				t.Fatalf("baselines = %+v, %v; want one", bs, err)
			}
			h, err := wire.DecodeHistogram(bs[0].Histogram)
			if bs[0].Status != string(baseline.Learning) || bs[0].Runs != 0 || err != nil || h.Count() != 100 {
				t.Errorf("baseline = status %q, %d runs judged, histogram %v of %d ops; want learning, 0, 100", bs[0].Status, bs[0].Runs, err, h.Count())
			}
			if vs := st.last(t); vs.State != string(baseline.Rebuilding) || !strings.HasPrefix(vs.Reason, "rebuilding, 20% done: md0 recover") {
				t.Errorf("volume state = %s %q, want rebuilding, 20%% done", vs.State, vs.Reason)
			}

			// The busy guard skips the next run (a rebuild keeps the disks
			// busy); its mark still moves the state on.
			busy := recovering(notRun(3, t0.Add(2*time.Hour), "busy", ""), 3e8)
			if _, err := st.AppendBatch(ctx, "a1", []store.Record{busy}); err != nil {
				t.Fatal(err)
			}
			if n, err := ev.Pass(ctx); err != nil || n != 1 {
				t.Fatalf("Pass = %d, %v; want 1", n, err)
			}
			if vs := st.last(t); vs.State != string(baseline.Rebuilding) || !strings.HasPrefix(vs.Reason, "rebuilding, 30% done: md0 recover") {
				t.Errorf("after a skipped marked run: volume state = %s %q, want rebuilding, 30%% done", vs.State, vs.Reason)
			}
		})
	}
}
