package store

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestIncarnationsAreSeparateRecords: a wiped spool starts a new
// incarnation whose sequences start at 1 again; those are new records,
// not replays of the old incarnation's, and each incarnation keeps its own
// high-water mark. Replays within an incarnation are still duplicates.
func TestIncarnationsAreSeparateRecords(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := open(t, dsn)
		register(t, s, "a1")
		step := func(name, inc string, first uint64, recs []Record, want AppendResult) {
			t.Helper()
			got, err := s.AppendBatchFrom(ctx, "a1", inc, first, recs)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("%s (-want +got):\n%s", name, d)
			}
		}
		step("old spool", "old", 0, probeRecords(1, 5), AppendResult{Stored: seqs(1, 5), HighWater: 5})
		step("new spool from 1", "new", 0, probeRecords(1, 3), AppendResult{Stored: seqs(1, 3), HighWater: 3})
		step("old replay", "old", 0, probeRecords(4, 6), AppendResult{Stored: []uint64{6}, Duplicates: []uint64{4, 5}, HighWater: 6})
		step("new replay", "new", 0, probeRecords(1, 3), AppendResult{Duplicates: seqs(1, 3), HighWater: 3})
		step("legacy", "", 0, probeRecords(2, 2), AppendResult{Stored: []uint64{2}, HighWater: 0})
		step("new settles below 10", "new", 10, nil, AppendResult{HighWater: 9})
		for inc, want := range map[string]uint64{"old": 6, "new": 9, "": 0, "never": 0} {
			if hw, err := s.HighWater(ctx, "a1", inc); err != nil || hw != want {
				t.Errorf("HighWater(%q) = %d, %v; want %d", inc, hw, err, want)
			}
		}
		if n := count(t, s, "records"); n != 10 {
			t.Errorf("records = %d, want 10 (6 old, 3 new, 1 legacy)", n)
		}
		if n := count(t, s, "probe_results"); n != 10 {
			t.Errorf("probe_results = %d, want 10", n)
		}
		// Server sequences: 1..10 in arrival order, no gaps; the agent's
		// sequence and incarnation kept beside them.
		rows, err := s.db.QueryContext(ctx, `SELECT sequence, incarnation, agent_sequence FROM records ORDER BY sequence`)
		if err != nil {
			t.Fatal(err)
		}
		type row struct {
			Server int64
			Inc    string
			Agent  int64
		}
		var got []row
		for rows.Next() {
			var r row
			if err := rows.Scan(&r.Server, &r.Inc, &r.Agent); err != nil {
				t.Fatal(err)
			}
			got = append(got, r)
		}
		rows.Close()
		want := []row{{1, "old", 1}, {2, "old", 2}, {3, "old", 3}, {4, "old", 4}, {5, "old", 5},
			{6, "new", 1}, {7, "new", 2}, {8, "new", 3}, {9, "old", 6}, {10, "", 2}}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("records (-want +got):\n%s", d)
		}
		var serverHW int64
		if err := s.db.QueryRowContext(ctx, `SELECT high_water FROM agents WHERE agent_id = 'a1'`).Scan(&serverHW); err != nil || serverHW != 10 {
			t.Errorf("agents.high_water = %d, %v; want 10 (the last server sequence)", serverHW, err)
		}
		if _, err := s.AppendBatchFrom(ctx, "a1", string(make([]byte, MaxIncarnationBytes+1)), 0, nil); err == nil {
			t.Error("an incarnation above MaxIncarnationBytes was accepted")
		}
	})
}

// TestNewIncarnationGeometryWins is the store half of issue 11 §1: the
// first snapshot of a new incarnation (sequence 1) replaces the geometry
// an old incarnation's snapshot at sequence 40 set, while within one
// incarnation a late older snapshot still changes nothing. Hello reports
// the digest of the snapshot that set the geometry.
func TestNewIncarnationGeometryWins(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := open(t, dsn)
		register(t, s, "a1")
		snap := func(seq uint64, digest string, vols ...Volume) []Record {
			r := geometryRecord(seq, vols...)
			r.GeometryDigest = digest
			return []Record{r}
		}
		mounts := func() []string {
			t.Helper()
			vols, err := s.ListVolumes(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, v := range vols {
				out = append(out, v.MountPoint+"="+v.Verdict)
			}
			return out
		}
		digest := func() string {
			t.Helper()
			st, err := s.Hello(ctx, "a1", "new")
			if err != nil {
				t.Fatal(err)
			}
			return st.GeometryDigest
		}
		if _, err := s.AppendBatchFrom(ctx, "a1", "old", 0, snap(40, "aa", vol("/data", "misaligned"), vol("/log", "aligned"))); err != nil {
			t.Fatal(err)
		}
		if got := digest(); got != "aa" {
			t.Errorf("digest after the old snapshot = %q, want aa", got)
		}
		if _, err := s.AppendBatchFrom(ctx, "a1", "new", 0, snap(1, "bb", vol("/data", "aligned"))); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff([]string{"/data=aligned"}, mounts()); d != "" {
			t.Errorf("volumes after the new incarnation's first snapshot (-want +got):\n%s", d)
		}
		if _, err := s.AppendBatchFrom(ctx, "a1", "new", 0, snap(3, "cc", vol("/data", "aligned"), vol("/new", "unknown"))); err != nil {
			t.Fatal(err)
		}
		if _, err := s.AppendBatchFrom(ctx, "a1", "new", 0, snap(2, "dd", vol("/stale", "misaligned"))); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff([]string{"/data=aligned", "/new=unknown"}, mounts()); d != "" {
			t.Errorf("volumes after a late older snapshot of the same incarnation (-want +got):\n%s", d)
		}
		if got := digest(); got != "cc" {
			t.Errorf("digest = %q, want cc (the late snapshot 2 set nothing)", got)
		}
	})
}

// TestIdentityConflict: two live agents on one identity (two hosts with
// one certificate) are two incarnations that keep taking turns; an
// incarnation that a newer one superseded speaking again is counted. One
// agent restarting with a wiped spool (the old incarnation never speaks
// again) and an upgraded agent (legacy "" after its new incarnation) are
// not conflicts.
func TestIdentityConflict(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := open(t, dsn)
		register(t, s, "a1")
		hello := func(inc string, wantConflict bool) {
			t.Helper()
			st, err := s.Hello(ctx, "a1", inc)
			if err != nil {
				t.Fatal(err)
			}
			if st.IdentityConflict != wantConflict {
				t.Errorf("Hello(%q) conflict = %v, want %v", inc, st.IdentityConflict, wantConflict)
			}
		}
		report := func(inc string, seq uint64, wantConflict bool) {
			t.Helper()
			res, err := s.AppendBatchFrom(ctx, "a1", inc, 0, probeRecords(seq, seq))
			if err != nil {
				t.Fatal(err)
			}
			if res.IdentityConflict != wantConflict {
				t.Errorf("report from %q conflict = %v, want %v", inc, res.IdentityConflict, wantConflict)
			}
		}
		conflicts := func() (uint64, string) {
			t.Helper()
			hosts, err := s.ListHosts(ctx)
			if err != nil || len(hosts) != 1 {
				t.Fatalf("ListHosts = %v, %v", hosts, err)
			}
			if hosts[0].IdentityConflicts > 0 && hosts[0].IdentityConflictAt.IsZero() {
				t.Error("IdentityConflicts > 0 without IdentityConflictAt")
			}
			return hosts[0].IdentityConflicts, hosts[0].Incarnation
		}
		report("", 1, false) // an agent from before incarnations
		hello("A", false)    // upgraded
		report("", 2, false) // its legacy records
		report("A", 3, false)
		hello("A", false) // reconnects
		hello("B", false) // spool wiped: B replaces A
		report("B", 1, false)
		if n, cur := conflicts(); n != 0 || cur != "B" {
			t.Errorf("after a spool reset: conflicts %d, incarnation %q; want 0, B", n, cur)
		}
		// A is alive after all: a second host with the same certificate.
		// Each time the other one speaks is a conflict, and the one that
		// spoke is the current incarnation.
		report("A", 4, true)
		hello("A", false) // A spoke last: no conflict
		report("B", 2, true)
		if n, cur := conflicts(); n != 2 || cur != "B" {
			t.Errorf("two live agents: conflicts %d, incarnation %q; want 2, B", n, cur)
		}
		// B stops: A's next batch is the last conflict of the episode, not
		// every batch after it.
		report("A", 5, true)
		report("A", 6, false)
		report("A", 7, false)
		if n, cur := conflicts(); n != 3 || cur != "A" {
			t.Errorf("after the second agent stopped: conflicts %d, incarnation %q; want 3, A", n, cur)
		}
	})
}

// TestMigrationKeepsLegacyDedup upgrades a database written before
// incarnations: old records keep deduplicating under the legacy
// incarnation "" with their old high-water mark (gaps still open), and
// new records get server sequences above every old one.
func TestMigrationKeepsLegacyDedup(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := open(t, dsn)
		p, err := s.provider()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.DownTo(ctx, 4); err != nil {
			t.Fatalf("down to 4: %v", err)
		}
		for _, q := range []string{
			`INSERT INTO agents (agent_id, hostname, os, kernel, machine_id, agent_version, first_seen_ns, last_seen_ns, high_water)
VALUES ('a1', 'db1', 'linux', '6.1', '', '0.1', 1, 2, 2)`,
			// 1, 2, then a gap at 3, then 4 and 5.
			`INSERT INTO records (agent_id, sequence, kind, produced_ns, received_ns, payload) VALUES
('a1', 1, 'probe', 1, 1, ''), ('a1', 2, 'probe', 1, 1, ''), ('a1', 4, 'probe', 1, 1, ''), ('a1', 5, 'probe', 1, 1, '')`,
		} {
			if _, err := s.db.ExecContext(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		if _, err := p.Up(ctx); err != nil {
			t.Fatalf("up: %v", err)
		}
		if hw, err := s.HighWater(ctx, "a1", ""); err != nil || hw != 2 {
			t.Errorf("legacy high water after the upgrade = %d, %v; want 2", hw, err)
		}
		got, err := s.AppendBatch(ctx, "a1", probeRecords(2, 6))
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(AppendResult{Stored: []uint64{3, 6}, Duplicates: []uint64{2, 4, 5}, HighWater: 6}, got); d != "" {
			t.Errorf("legacy batch after the upgrade (-want +got):\n%s", d)
		}
		var server []int64
		rows, err := s.db.QueryContext(ctx, `SELECT sequence FROM records WHERE agent_sequence IN (3, 6) ORDER BY agent_sequence`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var q int64
			rows.Scan(&q)
			server = append(server, q)
		}
		rows.Close()
		if d := cmp.Diff([]int64{6, 7}, server); d != "" {
			t.Errorf("server sequences of the late records (-want +got):\n%s", d)
		}
	})
}
