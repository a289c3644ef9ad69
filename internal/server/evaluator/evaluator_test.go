package evaluator

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/protobuf/proto"

	"github.com/plumbline/plumbline/internal/histogram"
	"github.com/plumbline/plumbline/internal/lab/pgtest"
	"github.com/plumbline/plumbline/internal/server/store"
	"github.com/plumbline/plumbline/internal/wire"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// engines: every store-backed test runs against a real SQLite file and a
// real PostgreSQL.
var engines = pgtest.Engines()

func hist(t testing.TB, d time.Duration) []byte {
	var h histogram.Histogram
	for range 50 {
		h.Observe(d)
	}
	b, err := proto.Marshal(wire.HistogramToProto(&h))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func probeRec(t testing.TB, seq uint64, at time.Time, d time.Duration) store.Record {
	return store.Record{Sequence: seq, Kind: store.KindProbe, ProducedAt: at, Probe: &store.ProbeResult{
		MountPoint: "/data", Kind: "random-read", BlockSizeBytes: 8192, QueueDepth: 1, StartedAt: at,
		Ops: 50, Bytes: 50 * 8192, Duration: time.Second, Histogram: hist(t, d)}}
}

// TestPassIdempotentAndLate: runs are judged once, runs that arrive after
// a pass are judged by the next one, and a new Evaluator (a restart)
// continues from the stored detectors. (The store numbers records in
// arrival order, with no gaps, so the evaluator never waits: migration
// 00005. An agent sends its records in ascending order.)
func TestPassIdempotentAndLate(t *testing.T) {
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
			t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
			var recs []store.Record
			for i := range 12 {
				recs = append(recs, probeRec(t, uint64(i+1), t0.Add(time.Duration(i)*time.Hour), time.Millisecond))
			}
			if _, err := st.AppendBatch(ctx, "a1", recs); err != nil {
				t.Fatal(err)
			}
			ev, err := New(st, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if n, err := ev.Pass(ctx); err != nil || n != 12 {
				t.Fatalf("first Pass = %d, %v; want 12", n, err)
			}
			if n, err := ev.Pass(ctx); err != nil || n != 0 {
				t.Fatalf("second Pass = %d, %v; want 0", n, err)
			}
			late := []store.Record{probeRec(t, 13, t0.Add(12*time.Hour), time.Millisecond), probeRec(t, 14, t0.Add(13*time.Hour), time.Millisecond)}
			if _, err := st.AppendBatch(ctx, "a1", late); err != nil {
				t.Fatal(err)
			}
			ev2, err := New(st, Options{}) // a restarted server
			if err != nil {
				t.Fatal(err)
			}
			if n, err := ev2.Pass(ctx); err != nil || n != 2 {
				t.Fatalf("Pass after the late runs = %d, %v; want 2", n, err)
			}
			bs, err := st.ListProbeBaselines(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(bs) != 1 || bs[0].Runs != 14 || !bs[0].Trusted || bs[0].Status != "ok" || bs[0].HistoryRatio < 0.99 || bs[0].HistoryRatio > 1.01 {
				t.Fatalf("baselines = %+v, want one trusted ok state over 14 runs with history ratio 1", bs)
			}
			h, err := wire.DecodeHistogram(bs[0].Histogram)
			if err != nil || h.Count() != 14*50 {
				t.Fatalf("merged histogram: %v, count %d, want %d", err, h.Count(), 14*50)
			}
		})
	}
}

// notRun is a run the agent could not start: refused or failed, no ops.
func notRun(seq uint64, at time.Time, reason, failure string) store.Record {
	return store.Record{Sequence: seq, Kind: store.KindProbe, ProducedAt: at, Probe: &store.ProbeResult{
		MountPoint: "/data", Kind: "random-read", BlockSizeBytes: 8192, QueueDepth: 1, StartedAt: at,
		Skipped: true, StoppedReason: reason, Failure: failure}}
}

// TestFailingStreak: refused and failed runs start a failing streak for the
// volume and kind (since its first run, with the latest reason and
// message), are counted as stops, and a run that does I/O ends the streak;
// a streak that ends and starts again inside one pass starts again.
func TestFailingStreak(t *testing.T) {
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
			t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
			h := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Hour) }
			step := func(recs []store.Record, want []store.ProbeFailing) {
				t.Helper()
				if _, err := st.AppendBatch(ctx, "a1", recs); err != nil {
					t.Fatal(err)
				}
				if _, err := ev.Pass(ctx); err != nil {
					t.Fatal(err)
				}
				got, err := st.ListProbeFailing(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("failing (-want +got):\n%s", diff)
				}
			}
			streak := func(since, last time.Time, reason, msg string, runs uint64) []store.ProbeFailing {
				return []store.ProbeFailing{{AgentID: "a1", MountPoint: "/data", Kind: "random-read", Reason: reason, Failure: msg, Since: since, Last: last, Runs: runs}}
			}
			step([]store.Record{notRun(1, h(0), "refused", "below the floor")}, streak(h(0), h(0), "refused", "below the floor", 1))
			step([]store.Record{notRun(2, h(1), "refused", "below the floor"), notRun(3, h(2), "failed", "fill: EIO")},
				streak(h(0), h(2), "failed", "fill: EIO", 3))
			step([]store.Record{probeRec(t, 4, h(3), time.Millisecond)}, nil)
			step([]store.Record{notRun(5, h(4), "refused", "a"), probeRec(t, 6, h(5), time.Millisecond), notRun(7, h(6), "refused", "b")},
				streak(h(6), h(6), "refused", "b", 1))
			stops, err := st.ListStopCounts(ctx)
			if err != nil {
				t.Fatal(err)
			}
			want := []store.StopCount{
				{AgentID: "a1", MountPoint: "/data", Kind: "random-read", Reason: "failed", Runs: 1},
				{AgentID: "a1", MountPoint: "/data", Kind: "random-read", Reason: "refused", Runs: 4},
			}
			if diff := cmp.Diff(want, stops); diff != "" {
				t.Errorf("stop counts (-want +got):\n%s", diff)
			}
		})
	}
}

// A run whose latencies would overflow the volume's merged histogram (its
// sum past 2^63-1 ns) is left out of it: the stored histogram stays valid
// — before, the sum wrapped negative, the stored histogram no longer
// decoded and the volume's latency series vanished from /metrics.
func TestMergeOverflowKeepsHistogramValid(t *testing.T) {
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
			t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
			huge := time.Duration(math.MaxInt64 / 80) // 50 of them: 5/8 of the int64 range
			recs := []store.Record{probeRec(t, 1, t0, huge), probeRec(t, 2, t0.Add(time.Hour), huge)}
			if _, err := st.AppendBatch(ctx, "a1", recs); err != nil {
				t.Fatal(err)
			}
			ev, err := New(st, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ev.Pass(ctx); err != nil {
				t.Fatal(err)
			}
			bs, err := st.ListProbeBaselines(ctx)
			if err != nil || len(bs) != 1 {
				t.Fatalf("baselines %+v, %v: want one", bs, err)
			}
			h, err := wire.DecodeHistogram(bs[0].Histogram)
			if err != nil {
				t.Fatalf("stored histogram does not decode: %v", err)
			}
			if h.Count() != 50 || h.Sum() != 50*huge || bs[0].Runs != 1 {
				t.Fatalf("stored histogram count %d sum %v over %d runs: want the first run only (50, %v, 1)", h.Count(), h.Sum(), bs[0].Runs, 50*huge)
			}
		})
	}
}
