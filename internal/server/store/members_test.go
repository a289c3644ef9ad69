package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func memberRecord(seq uint64, started time.Time, slowMS uint64) Record {
	g := MemberGroup{Device: "md0", Kind: "md", MountPoints: []string{"/data", "/logs"}}
	for i, d := range []string{"sdb", "sdc", "sdd"} {
		c := MemberCounters{Device: d, ByID: []string{"ata-DISK_" + d, "wwn-0x5000" + d}, Serial: "S" + d,
			State: []string{"in_sync"}, Reads: 1000, ReadTimeMS: 1000, Writes: 500, WriteTimeMS: 1500,
			ReadSectors: 16000, WriteSectors: 8000, IOTimeMS: 30000}
		if i == 2 {
			c.ReadTimeMS = slowMS
		}
		g.Members = append(g.Members, c)
	}
	mirror := MemberGroup{Device: "dm-3", Kind: "mirror", Members: []MemberCounters{{Device: "sde", Reads: 1}, {Device: "sdf", Reads: 2}}}
	return Record{Sequence: seq, Kind: KindMemberIO, ProducedAt: started.Add(time.Minute), Payload: []byte(fmt.Sprint("m", seq)),
		MemberIO: &MemberIO{StartedAt: started, Interval: time.Minute, Groups: []MemberGroup{g, mirror}}}
}

// Member I/O is stored with its record, read back by the member judge
// interval by interval (each group whole, in name order) until the judge's
// watermark passes it, and a pass's states round-trip.
func TestMemberIOPendingAndStates(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := open(t, dsn)
		register(t, s, "a1")
		t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
		recs := []Record{probeRecord(1), memberRecord(2, t0, 3000), memberRecord(3, t0.Add(time.Minute), 4000)}
		if _, err := s.AppendBatch(ctx, "a1", recs); err != nil {
			t.Fatal(err)
		}
		got, err := s.PendingMemberIO(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		want := []MemberInterval{{AgentID: "a1", Sequence: 2, MemberIO: *recs[1].MemberIO}}
		// Groups come back in name order: dm-3 before md0.
		want[0].Groups = []MemberGroup{recs[1].MemberIO.Groups[1], recs[1].MemberIO.Groups[0]}
		want[0].Groups[0].MountPoints = nil
		if d := cmp.Diff(want, got); d != "" {
			t.Fatalf("PendingMemberIO(1) (-want +got):\n%s", d)
		}
		all, err := s.PendingMemberIO(ctx, 10)
		if err != nil || len(all) != 2 || all[1].Sequence != 3 || all[1].Groups[1].Members[2].ReadTimeMS != 4000 {
			t.Fatalf("PendingMemberIO(10) = %+v, %v; want sequences 2 and 3", all, err)
		}

		st := MemberState{AgentID: "a1", GroupDevice: "md0", Device: "sdd", GroupKind: "md", MountPoints: []string{"/data"},
			ByID: []string{"ata-DISK_sdd"}, Serial: "Ssdd", Slow: true, Since: t0, Direction: "read", Ratio: 3.5,
			AwaitSeconds: 0.0035, SiblingsAwaitSeconds: 0.001, Utilisation: 0.5, SiblingsUtilisation: 0.4,
			Recent: 0b1111, StreakStart: t0, Last: t0.Add(2 * time.Minute), Drift: 0.75, DriftStart: t0.Add(-time.Minute)}
		ok := st
		ok.Device, ok.Slow, ok.Since, ok.Direction, ok.Ratio, ok.ByID, ok.Serial = "sdb", false, time.Time{}, "", 1, nil, ""
		ok.Drift, ok.DriftStart = 0, time.Time{}
		if err := s.SaveMemberPass(ctx, MemberPass{States: []MemberState{st, ok}, Watermarks: map[string]uint64{"a1": 3}}); err != nil {
			t.Fatal(err)
		}
		if rest, err := s.PendingMemberIO(ctx, 10); err != nil || len(rest) != 0 {
			t.Errorf("PendingMemberIO after the watermark = %+v, %v; want none", rest, err)
		}
		states, err := s.ListMemberStates(ctx)
		if d := cmp.Diff([]MemberState{ok, st}, states); err != nil || d != "" {
			t.Errorf("ListMemberStates (-want +got), %v:\n%s", err, d)
		}
		slow, err := s.ListSlowMembers(ctx)
		if d := cmp.Diff([]MemberState{st}, slow); err != nil || d != "" {
			t.Errorf("ListSlowMembers (-want +got), %v:\n%s", err, d)
		}
		// A watermark never moves back; a removed member is gone.
		if err := s.SaveMemberPass(ctx, MemberPass{Removed: []MemberKey{{"a1", "md0", "sdd"}}, Watermarks: map[string]uint64{"a1": 1}}); err != nil {
			t.Fatal(err)
		}
		if rest, err := s.PendingMemberIO(ctx, 10); err != nil || len(rest) != 0 {
			t.Errorf("PendingMemberIO after an older watermark = %+v, %v; want none", rest, err)
		}
		if slow, err := s.ListSlowMembers(ctx); err != nil || len(slow) != 0 {
			t.Errorf("ListSlowMembers after removal = %+v, %v; want none", slow, err)
		}
	})
}

// A member-io record is pruned (with its member rows) only once the judge
// has read it.
func TestMemberIORetention(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := open(t, dsn)
		register(t, s, "a1")
		t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
		if _, err := s.AppendBatch(ctx, "a1", []Record{memberRecord(1, t0, 1000), memberRecord(2, t0, 1000)}); err != nil {
			t.Fatal(err)
		}
		cutoff := time.Now().Add(time.Hour)
		if st := pruneAll(t, ctx, s, cutoff, 10); st.Records != 0 || count(t, s, "member_io") != 10 {
			t.Fatalf("pruned %d records before the judge read them (member rows left %d); want 0 (10)", st.Records, count(t, s, "member_io"))
		}
		if err := s.SaveMemberPass(ctx, MemberPass{Watermarks: map[string]uint64{"a1": 1}}); err != nil {
			t.Fatal(err)
		}
		if st := pruneAll(t, ctx, s, cutoff, 10); st.Records != 1 || count(t, s, "member_io") != 5 {
			t.Fatalf("pruned %d records after the judge read one (member rows left %d); want 1 (5)", st.Records, count(t, s, "member_io"))
		}
	})
}

// Bad member io is refused by the store before anything is written.
func TestMemberIOInvalid(t *testing.T) {
	t.Parallel()
	for name, r := range map[string]Record{
		"kind without member io": {Sequence: 1, Kind: KindMemberIO},
		"member io on a probe":   func() Record { r := probeRecord(1); r.MemberIO = &MemberIO{Interval: time.Second}; return r }(),
		"no interval":            func() Record { r := memberRecord(1, time.Now(), 1); r.MemberIO.Interval = 0; return r }(),
		"counter too big":        func() Record { r := memberRecord(1, time.Now(), 1<<63); return r }(),
	} {
		if _, err := sortedBatch([]Record{r}); err == nil {
			t.Errorf("%s: sortedBatch accepted it", name)
		}
	}
}

// Migration 30 rebuilds records and probe_results without losing a row
// or a link between them, and then takes member-io records.
func TestMigrationMemberIOKeepsRecords(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := open(t, dsn)
		p, err := s.provider()
		if err != nil {
			t.Fatal(err)
		}
		// The rows are written by today's code, then the schema goes back
		// to before migration 30 (today's code cannot write an older
		// schema's columns), keeping them.
		register(t, s, "a1")
		// The rows as the schema of 29 has them (today's code writes
		// columns of later migrations).
		for seq := 1; seq <= 5; seq++ {
			for _, q := range []string{
				fmt.Sprintf(`INSERT INTO records (agent_id, sequence, kind, produced_ns, received_ns, payload, incarnation, agent_sequence)
VALUES ('a1', %d, 'probe', 1, 1, '', '', %d)`, seq, seq),
				fmt.Sprintf(`INSERT INTO probe_results (agent_id, sequence, mount_point, device, kind, block_size_bytes, queue_depth,
started_ns, duration_ns, ops, errors, bytes, skipped, stopped_reason, latency_histogram) VALUES ('a1', %d, '/data', 'sdb', 'random-read', 8192, 1, 0, 0, 0, 0, 0, false, '', '')`, seq),
			} {
				if _, err := s.db.ExecContext(ctx, q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
		}
		if _, err := s.db.ExecContext(ctx, `UPDATE agents SET high_water = 5 WHERE agent_id = 'a1'`); err != nil {
			t.Fatal(err)
		}
		if _, err := s.db.ExecContext(ctx, `UPDATE agent_incarnations SET high_water = 5 WHERE agent_id = 'a1' AND incarnation = ''`); err != nil {
			t.Fatal(err)
		}
		if _, err := p.DownTo(ctx, 29); err != nil {
			t.Fatalf("down to 29: %v", err)
		}
		if r, pr := count(t, s, "records"), count(t, s, "probe_results"); r != 5 || pr != 5 {
			t.Fatalf("at 29: %d records, %d probe results; want 5, 5", r, pr)
		}
		if _, err := p.Up(ctx); err != nil {
			t.Fatalf("up: %v", err)
		}
		if r, pr := count(t, s, "records"), count(t, s, "probe_results"); r != 5 || pr != 5 {
			t.Fatalf("after the upgrade: %d records, %d probe results; want 5, 5", r, pr)
		}
		res, err := s.AppendBatch(ctx, "a1", append(probeRecords(4, 6), memberRecord(7, time.Now(), 1)))
		if err != nil || len(res.Stored) != 2 || len(res.Duplicates) != 2 {
			t.Fatalf("AppendBatch after the upgrade = %+v, %v; want 6 and 7 stored, 4 and 5 duplicates", res, err)
		}
		// The rebuilt probe_results still refers to records.
		if _, err := s.db.ExecContext(ctx, s.q(`INSERT INTO probe_results (agent_id, sequence, mount_point, device, kind, block_size_bytes,
queue_depth, started_ns, duration_ns, ops, errors, bytes, skipped, stopped_reason, latency_histogram) VALUES ('a1', 99, '/d', 'sdb', 'random-read', 1, 1, 0, 0, 0, 0, 0, false, '', '')`)); err == nil {
			t.Error("a probe result without its record was accepted: the foreign key is lost")
		}
	})
}
