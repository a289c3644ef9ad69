package members

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/plumbline/plumbline/internal/lab/pgtest"
	"github.com/plumbline/plumbline/internal/server/store"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// interval is a member-io record of one minute of md0's four members, sdd
// taking readMS per read.
func interval(seq uint64, at time.Time, readMS float64) store.Record {
	g := md(counters("sdb", 3000, 2, 4), counters("sdc", 3000, 2, 4), counters("sdd", 3000, readMS, 4), counters("sde", 3000, 2, 4))
	g.Members[2].ByID, g.Members[2].Serial = []string{"ata-WDC_WD40_WX11A"}, "WX11A"
	return store.Record{Sequence: seq, Kind: store.KindMemberIO, ProducedAt: at.Add(time.Minute), Payload: []byte{1},
		MemberIO: &store.MemberIO{StartedAt: at, Interval: time.Minute, Groups: []store.MemberGroup{g}}}
}

// Through a real store: a member slowed ×3 is named after Sustain
// intervals with its identity, ratio and since; a new judge (the next
// leader's term) goes on from the stored states and clears it after
// Recover normal intervals; each interval is judged once.
func TestPassNamesAndClears(t *testing.T) {
	t.Parallel()
	pgtest.ForEachEngine(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		st, err := store.Open(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if err := st.UpsertAgent(ctx, store.Agent{ID: "a1", Hostname: "db1"}); err != nil {
			t.Fatal(err)
		}
		t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
		var recs []store.Record
		for i := range 5 {
			ms := 2.0
			if i > 0 {
				ms = 6
			}
			recs = append(recs, interval(uint64(i+1), t0.Add(time.Duration(i)*time.Minute), ms))
		}
		if _, err := st.AppendBatch(ctx, "a1", recs); err != nil {
			t.Fatal(err)
		}
		j := New(st, Options{BatchSize: 2})
		if n, err := j.Pass(ctx); err != nil || n != 5 {
			t.Fatalf("Pass = %d, %v; want 5", n, err)
		}
		slow, err := st.ListSlowMembers(ctx)
		if err != nil || len(slow) != 1 {
			t.Fatalf("ListSlowMembers = %+v, %v; want sdd", slow, err)
		}
		s := slow[0]
		if s.Device != "sdd" || s.GroupDevice != "md0" || s.Serial != "WX11A" || len(s.ByID) != 1 || s.Direction != Read ||
			s.Ratio < 2.9 || s.Ratio > 3.1 || !s.Since.Equal(t0.Add(time.Minute)) || s.MountPoints[0] != "/data" {
			t.Errorf("slow member %+v; want sdd (WX11A) reads ×3 since %s", s, t0.Add(time.Minute))
		}
		if all, err := st.ListMemberStates(ctx); err != nil || len(all) != 4 {
			t.Errorf("ListMemberStates = %d, %v; want 4 members", len(all), err)
		}
		if n, err := j.Pass(ctx); err != nil || n != 0 {
			t.Fatalf("second Pass = %d, %v; want 0", n, err)
		}

		recs = recs[:0]
		for i := range 3 {
			recs = append(recs, interval(uint64(6+i), t0.Add(time.Duration(5+i)*time.Minute), 2))
		}
		if _, err := st.AppendBatch(ctx, "a1", recs); err != nil {
			t.Fatal(err)
		}
		next := New(st, Options{})
		if n, err := next.Pass(ctx); err != nil || n != 3 {
			t.Fatalf("next term's Pass = %d, %v; want 3", n, err)
		}
		if slow, err := st.ListSlowMembers(ctx); err != nil || len(slow) != 0 {
			t.Errorf("after 3 normal intervals: %+v, %v; want none slow", slow, err)
		}
		if s := j.Status(); s.Named != 1 || s.Intervals != 5 || s.Passes != 2 {
			t.Errorf("first judge's status %+v; want 1 named over 5 intervals in 2 passes", s)
		}
		if s := next.Status(); s.Cleared != 1 {
			t.Errorf("next judge's status %+v; want 1 cleared", s)
		}
	})
}

// A member no longer reported is forgotten once the newest interval is
// Stale past its last.
func TestPassForgetsStale(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := store.Open(ctx, "sqlite://"+t.TempDir()+"/s.db")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.UpsertAgent(ctx, store.Agent{ID: "a1", Hostname: "db1"}); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	gone := interval(1, t0, 2)
	later := interval(2, t0.Add(2*time.Hour), 2)
	later.MemberIO.Groups[0].Device = "md1"
	if _, err := st.AppendBatch(ctx, "a1", []store.Record{gone, later}); err != nil {
		t.Fatal(err)
	}
	if _, err := New(st, Options{}).Pass(ctx); err != nil {
		t.Fatal(err)
	}
	all, err := st.ListMemberStates(ctx)
	if err != nil || len(all) != 4 || all[0].GroupDevice != "md1" {
		t.Fatalf("ListMemberStates = %+v, %v; want md1's 4 members only", all, err)
	}
}

// The judge's own series count what its passes did (the server registers
// it beside the other loops').
func TestJudgeMetrics(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := store.Open(ctx, "sqlite://"+t.TempDir()+"/s.db")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.UpsertAgent(ctx, store.Agent{ID: "a1", Hostname: "db1"}); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	var recs []store.Record
	for i := range 4 {
		recs = append(recs, interval(uint64(i+1), t0.Add(time.Duration(i)*time.Minute), 8))
	}
	if _, err := st.AppendBatch(ctx, "a1", recs); err != nil {
		t.Fatal(err)
	}
	j := New(st, Options{})
	if _, err := j.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(j)
	want := `# HELP plumbline_server_members_changes_total Members this replica's member judge named slow (change named) or cleared (change cleared).
# TYPE plumbline_server_members_changes_total counter
plumbline_server_members_changes_total{change="cleared"} 0
plumbline_server_members_changes_total{change="named"} 1
# HELP plumbline_server_members_intervals_total Agent intervals of member I/O this replica's member judge judged.
# TYPE plumbline_server_members_intervals_total counter
plumbline_server_members_intervals_total 4
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "plumbline_server_members_changes_total", "plumbline_server_members_intervals_total"); err != nil {
		t.Error(err)
	}
	if n, err := testutil.GatherAndCount(reg, "plumbline_server_members_last_success_timestamp_seconds", "plumbline_server_members_failures_total"); err != nil || n != 2 {
		t.Errorf("last success and failures: %d series, %v; want 2", n, err)
	}
}
