package evaluator

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/plumbline/plumbline/internal/histogram"
	"github.com/plumbline/plumbline/internal/server/baseline"
	"github.com/plumbline/plumbline/internal/server/store"
	"github.com/plumbline/plumbline/internal/wire"
)

// shapedRec is a 50-op run under a 50 IOPS cap: ops around 350 µs, of
// which stallEvery-th (0: none) stall for stall; it took dur.
func shapedRec(t testing.TB, rng *rand.Rand, seq uint64, at time.Time, stallEvery int, stall, dur time.Duration) store.Record {
	var h histogram.Histogram
	for i := range 50 {
		d := time.Duration(float64(350*time.Microsecond) * (0.9 + 0.2*rng.Float64()))
		if stallEvery > 0 && i%stallEvery == stallEvery-1 {
			d = stall
		}
		h.Observe(d)
	}
	b, err := proto.Marshal(wire.HistogramToProto(&h))
	if err != nil {
		t.Fatal(err)
	}
	return store.Record{Sequence: seq, Kind: store.KindProbe, ProducedAt: at, Probe: &store.ProbeResult{
		MountPoint: "/data", Kind: "random-read", BlockSizeBytes: 8192, QueueDepth: 1, StartedAt: at,
		Ops: 50, Bytes: 50 * 8192, Duration: dur, Histogram: b, IOPSCap: 50}}
}

// TestSignalsThroughTheStore: runs whose median never moves — first
// throttled to 20 of 50 IOPS, then (after recovery) stalling one op in
// twenty-five for 100 ms — degrade the volume on the rate (throttled) and
// on the p99, and the stored state and the inventory say so.
func TestSignalsThroughTheStore(t *testing.T) {
	t.Parallel()
	for _, e := range engines {
		t.Run(e.Name, func(t *testing.T) {
			ctx := context.Background()
			st, err := store.Open(ctx, e.DSN(t))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if err := st.UpsertAgent(ctx, store.Agent{ID: "a1", Hostname: "h1"}); err != nil {
				t.Fatal(err)
			}
			ev, err := New(st, Options{})
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(1, 15))
			t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
			seq := uint64(0)
			feed := func(n int, stallEvery int, stall, dur time.Duration) store.ProbeBaseline {
				t.Helper()
				var recs []store.Record
				for range n {
					seq++
					recs = append(recs, shapedRec(t, rng, seq, t0.Add(time.Duration(seq)*3*time.Minute), stallEvery, stall, dur))
				}
				if _, err := st.AppendBatch(ctx, "a1", recs); err != nil {
					t.Fatal(err)
				}
				if _, err := ev.Pass(ctx); err != nil {
					t.Fatal(err)
				}
				rows, err := st.ListProbeBaselines(ctx)
				if err != nil || len(rows) != 1 {
					t.Fatalf("ListProbeBaselines = %d rows, %v; want 1", len(rows), err)
				}
				return rows[0]
			}
			row := feed(20, 0, 0, time.Second)
			if row.Status != "ok" || row.Signal != "median" || row.TailRatio == 0 || row.RateRatio == 0 {
				t.Fatalf("after 20 healthy runs: %+v, want ok on the median with p99 and rate ratios", row)
			}
			// The shipped defaults: as many faulted runs as each signal's
			// Sustain.
			def := baseline.DefaultConfig()
			row = feed(def.Rate.Sustain, 0, 0, 2500*time.Millisecond) // 20 IOPS
			if row.Status != "degraded" || row.Signal != string(baseline.SignalRate) || !strings.Contains(row.Detail, "rate 20/50 IOPS") {
				t.Fatalf("after Sustain throttled runs: status %s signal %s detail %q, want degraded on the rate, \"rate 20/50 IOPS\"", row.Status, row.Signal, row.Detail)
			}
			if row.RateRatio < 2 || row.HistoryRatio > 1.3 {
				t.Errorf("throttled: rate ratio %v, median ratio %v; want >= 2 and the median steady", row.RateRatio, row.HistoryRatio)
			}
			row = feed(3, 0, 0, time.Second)
			if row.Status != "ok" {
				t.Fatalf("after 3 runs at the cap again: %s (%s), want ok", row.Status, row.Detail)
			}
			row = feed(def.Tail.Sustain, 25, 100*time.Millisecond, 1200*time.Millisecond)
			if row.Status != "degraded" || row.Signal != string(baseline.SignalTail) || !strings.Contains(row.Detail, "p99 ×") {
				t.Fatalf("after Sustain stalling runs: status %s signal %s detail %q, want degraded on the p99", row.Status, row.Signal, row.Detail)
			}
			var touched []*entry
			for _, en := range ev.entries {
				touched = append(touched, en)
			}
			states := ev.volumeSummaries(touched)
			if len(states) != 1 || !states[0].Degraded || !strings.Contains(states[0].Reason, "random-read p99 ×") {
				t.Errorf("inventory states = %+v, want degraded with the reason naming the p99", states)
			}
		})
	}
}

// TestSlowOpsThroughTheStore: after a history long enough for the slow-op
// count, runs stalling 2 of their 50 ops for 100 ms degrade the volume on
// the slow-op count before the p99's 6 runs, and the stored state and the
// inventory name it ("slow ops N of M vs history ≤C").
func TestSlowOpsThroughTheStore(t *testing.T) {
	t.Parallel()
	for _, e := range engines {
		t.Run(e.Name, func(t *testing.T) { slowOpsThroughTheStore(t, e.DSN(t)) })
	}
}

func slowOpsThroughTheStore(t *testing.T, dsn string) {
	ctx := context.Background()
	st, err := store.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.UpsertAgent(ctx, store.Agent{ID: "a1", Hostname: "h1"}); err != nil {
		t.Fatal(err)
	}
	ev, err := New(st, Options{})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(2, 15))
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	seq := uint64(0)
	feed := func(n int, stallEvery int) store.ProbeBaseline {
		t.Helper()
		var recs []store.Record
		for range n {
			seq++
			recs = append(recs, shapedRec(t, rng, seq, t0.Add(time.Duration(seq)*3*time.Minute), stallEvery, 100*time.Millisecond, time.Second))
		}
		if _, err := st.AppendBatch(ctx, "a1", recs); err != nil {
			t.Fatal(err)
		}
		if _, err := ev.Pass(ctx); err != nil {
			t.Fatal(err)
		}
		rows, err := st.ListProbeBaselines(ctx)
		if err != nil || len(rows) != 1 {
			t.Fatalf("ListProbeBaselines = %d rows, %v; want 1", len(rows), err)
		}
		return rows[0]
	}
	def := baseline.DefaultConfig()
	if row := feed(def.Slow.MinHistory+2*def.Slow.Pool, 0); row.Status != "ok" {
		t.Fatalf("after the history: %+v, want ok", row)
	}
	var row store.ProbeBaseline
	for i := range def.Tail.Sustain - 1 {
		if row = feed(1, 25); row.Status == "degraded" {
			t.Logf("degraded at stalled run %d", i+1)
			break
		}
	}
	if row.Status != "degraded" || row.Signal != string(baseline.SignalSlow) || !strings.HasPrefix(row.Detail, "slow ops ") || !strings.Contains(row.Detail, " of 300 vs history ≤0") {
		t.Fatalf("after stalled runs: status %s signal %s detail %q, want degraded on the slow-op count, \"slow ops N of 300 vs history ≤0\"", row.Status, row.Signal, row.Detail)
	}
	var touched []*entry
	for _, en := range ev.entries {
		touched = append(touched, en)
	}
	if states := ev.volumeSummaries(touched); len(states) != 1 || !strings.Contains(states[0].Reason, "random-read slow ops ") {
		t.Errorf("inventory states = %+v, want the reason naming the slow ops", states)
	}
}

// TestRunOfSlowOps: RunOf counts the ops at least SlowFactor × the run's
// median.
func TestRunOfSlowOps(t *testing.T) {
	t.Parallel()
	var h histogram.Histogram
	for range 45 {
		h.Observe(time.Millisecond)
	}
	for _, d := range []time.Duration{5 * time.Millisecond, 7 * time.Millisecond, 9 * time.Millisecond, 50 * time.Millisecond, time.Second} {
		h.Observe(d)
	}
	r := &store.ProbeRun{ProbeResult: store.ProbeResult{Ops: 50}}
	if got := RunOf(r, &h).Slow; got != 3 {
		t.Errorf("RunOf(45 ops at 1 ms, then 5, 7, 9, 50 ms and 1 s).Slow = %d, want 3 (at least %d× the 1 ms median)", got, baseline.SlowFactor)
	}
}
