package retention

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/plumbline/plumbline/internal/lab/pgtest"
	"github.com/plumbline/plumbline/internal/server/leader"
	"github.com/plumbline/plumbline/internal/server/store"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func openStore(t *testing.T, dsn string) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func probes(from, to uint64) []store.Record {
	var out []store.Record
	for seq := from; seq <= to; seq++ {
		out = append(out, store.Record{Sequence: seq, Kind: store.KindProbe, ProducedAt: time.Unix(1_700_000_000, 0), Payload: []byte("p"),
			Probe: &store.ProbeResult{MountPoint: "/data", Device: "sdb", Kind: "random-read", BlockSizeBytes: 8192, QueueDepth: 1,
				StartedAt: time.Unix(1_700_000_000, 0), Duration: time.Second, Ops: 10, Histogram: []byte("h")}})
	}
	return out
}

// seed registers agent a1 with n probe records, judged by the evaluator.
func seed(t *testing.T, st *store.Store, n uint64) {
	t.Helper()
	ctx := context.Background()
	if err := st.UpsertAgent(ctx, store.Agent{ID: "a1", Hostname: "a1.example", OS: "linux", Kernel: "6.1", AgentVersion: "0.1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AppendBatchFrom(ctx, "a1", "inc", 0, probes(1, n)); err != nil {
		t.Fatal(err)
	}
	if err := st.SaveBaselines(ctx, store.BaselineUpdate{Watermarks: map[string]uint64{"a1": n}}); err != nil {
		t.Fatal(err)
	}
}

// TestPass: a pass prunes every judged record older than the retention,
// batch by batch, counts it in its metrics, and a replay of the pruned
// records afterwards is a duplicate.
func TestPass(t *testing.T) {
	pgtest.ForEachEngine(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		st := openStore(t, dsn)
		seed(t, st, 12)
		later := time.Now().Add(48 * time.Hour) // the records are two days old then
		p := New(st, Options{Retention: 24 * time.Hour, Batch: 5, Pause: time.Millisecond, Now: func() time.Time { return later }})
		if !p.Pass(ctx) {
			t.Fatal("Pass failed")
		}
		want := fmt.Sprintf(`
# HELP plumbline_server_retention_last_success_timestamp_seconds When this replica's last retention pass completed (Unix seconds); 0 when none has.
# TYPE plumbline_server_retention_last_success_timestamp_seconds gauge
plumbline_server_retention_last_success_timestamp_seconds %g
# HELP plumbline_server_retention_pruned_rows_total Rows this server replica pruned as older than store.retention, by table.
# TYPE plumbline_server_retention_pruned_rows_total counter
plumbline_server_retention_pruned_rows_total{table="agent_incarnations"} 0
plumbline_server_retention_pruned_rows_total{table="probe_results"} 12
plumbline_server_retention_pruned_rows_total{table="records"} 12
`, float64(later.UnixNano())/1e9)
		if err := testutil.CollectAndCompare(p, strings.NewReader(want), "plumbline_server_retention_pruned_rows_total",
			"plumbline_server_retention_last_success_timestamp_seconds"); err != nil {
			t.Error(err)
		}
		res, err := st.AppendBatchFrom(ctx, "a1", "inc", 0, probes(1, 12))
		if err != nil || len(res.Stored) != 0 || len(res.Duplicates) != 12 {
			t.Errorf("replay after the pass = %+v, %v; want 12 duplicates, none stored", res, err)
		}
	})
}

// TestPassPrunesIncarnations: an agent starts three times (a spool
// incarnation each); once the first run's records are pruned, a pass
// removes the rows of the two past incarnations and keeps the current
// one, counting them.
func TestPassPrunesIncarnations(t *testing.T) {
	pgtest.ForEachEngine(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		st := openStore(t, dsn)
		if err := st.UpsertAgent(ctx, store.Agent{ID: "a1", Hostname: "a1.example", OS: "linux", Kernel: "6.1", AgentVersion: "0.1"}); err != nil {
			t.Fatal(err)
		}
		for _, inc := range []string{"run-1", "run-2", "run-3"} {
			if _, err := st.Hello(ctx, "a1", inc); err != nil {
				t.Fatal(err)
			}
			if inc == "run-1" {
				if _, err := st.AppendBatchFrom(ctx, "a1", inc, 0, probes(1, 3)); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := st.SaveBaselines(ctx, store.BaselineUpdate{Watermarks: map[string]uint64{"a1": 3}}); err != nil {
			t.Fatal(err)
		}
		later := time.Now().Add(48 * time.Hour)
		p := New(st, Options{Retention: 24 * time.Hour, Batch: 1, Pause: time.Millisecond, Now: func() time.Time { return later }})
		if !p.Pass(ctx) {
			t.Fatal("Pass failed")
		}
		want := `
# HELP plumbline_server_retention_pruned_rows_total Rows this server replica pruned as older than store.retention, by table.
# TYPE plumbline_server_retention_pruned_rows_total counter
plumbline_server_retention_pruned_rows_total{table="agent_incarnations"} 2
plumbline_server_retention_pruned_rows_total{table="probe_results"} 3
plumbline_server_retention_pruned_rows_total{table="records"} 3
`
		if err := testutil.CollectAndCompare(p, strings.NewReader(want), "plumbline_server_retention_pruned_rows_total"); err != nil {
			t.Error(err)
		}
		if hw, err := st.HighWater(ctx, "a1", "run-1"); err != nil || hw != 0 {
			t.Errorf("run-1's high water after the pass = %d, %v; want 0 (row removed)", hw, err)
		}
	})
}

// TestKeepForever: retention 0 prunes nothing (Run returns at once).
func TestKeepForever(t *testing.T) {
	p := New(nil, Options{})
	done := make(chan struct{})
	go func() { p.Run(context.Background()); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run with retention 0 did not return")
	}
}

// counting is a replica's store: it counts the batches it was asked for.
type counting struct {
	*store.Store
	batches atomic.Int64
}

func (c *counting) PruneBatch(ctx context.Context, cutoff time.Time, cur store.PruneCursor, limit int) (store.PruneStats, error) {
	c.batches.Add(1)
	return c.Store.PruneBatch(ctx, cutoff, cur, limit)
}

// TestOnlyLeaderPrunes: two replicas on one PostgreSQL run the loop
// through the election; only the leader prunes, and after it stops the
// other takes over.
func TestOnlyLeaderPrunes(t *testing.T) {
	dsn := pgtest.DSN(t)
	seed(t, openStore(t, dsn), 3)
	later := time.Now().Add(48 * time.Hour)
	type replica struct {
		st   *counting
		el   *leader.Elector
		stop context.CancelFunc
		done chan struct{}
	}
	var rs []*replica
	for i := range 2 {
		ctx, stop := context.WithCancel(context.Background())
		r := &replica{st: &counting{Store: openStore(t, dsn)}, stop: stop, done: make(chan struct{})}
		r.el = leader.New(r.st, leader.Options{TTL: time.Second, Holder: fmt.Sprintf("replica-%d", i)})
		p := New(r.st, Options{Retention: 24 * time.Hour, Interval: 10 * time.Millisecond, Now: func() time.Time { return later }})
		go func() { defer close(r.done); r.el.Run(ctx, leader.Loop{Name: "retention", Run: p.Run}) }()
		t.Cleanup(func() { stop(); <-r.done })
		rs = append(rs, r)
	}
	lead := waitFor(t, func() int {
		for i, r := range rs {
			if ok, _ := r.el.Leading("retention"); ok && r.st.batches.Load() >= 5 {
				return i
			}
		}
		return -1
	})
	other := rs[1-lead]
	if n := other.st.batches.Load(); n != 0 {
		t.Fatalf("the follower ran %d prune batches while replica-%d led", n, lead)
	}
	rs[lead].stop()
	<-rs[lead].done
	waitFor(t, func() int {
		if other.st.batches.Load() > 0 {
			return 1
		}
		return -1
	})
}

func waitFor(t *testing.T, f func() int) int {
	t.Helper()
	deadline := time.Now().Add(leader.FailoverBound(time.Second) + 10*time.Second)
	for time.Now().Before(deadline) {
		if v := f(); v >= 0 {
			return v
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("timed out")
	return -1
}
