package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/plumbline/plumbline/internal/lab/pgtest"
	"github.com/plumbline/plumbline/internal/vocab"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// engines: every store-backed test runs against a real SQLite file and a
// real PostgreSQL.
var engines = pgtest.Engines()

var forEachEngine = pgtest.ForEachEngine

func open(t testing.TB, dsn string) *Store {
	t.Helper()
	s, err := Open(context.Background(), dsn)
	if err != nil {
		t.Fatalf("Open(%q): %v", dsn, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func register(t testing.TB, s *Store, id string) {
	t.Helper()
	if err := s.UpsertAgent(context.Background(), Agent{ID: id, Hostname: id + ".example", OS: "linux", Kernel: "6.1.0", AgentVersion: "0.1.0"}); err != nil {
		t.Fatalf("UpsertAgent(%q): %v", id, err)
	}
}

func probeRecord(seq uint64) Record {
	return Record{
		Sequence:   seq,
		Kind:       KindProbe,
		ProducedAt: time.Unix(1_700_000_000, int64(seq)).UTC(),
		Payload:    []byte(fmt.Sprintf("record-%d", seq)),
		Probe: &ProbeResult{
			MountPoint: "/data", Device: "sdb", Kind: "random-read", BlockSizeBytes: 8192, QueueDepth: 4,
			StartedAt: time.Unix(1_700_000_000, 0).UTC(), Duration: 2 * time.Second,
			Ops: 1000, Bytes: 8192 * 1000, Histogram: []byte("hist"),
		},
	}
}

func probeRecords(from, to uint64) []Record {
	var out []Record
	for seq := from; seq <= to; seq++ {
		out = append(out, probeRecord(seq))
	}
	return out
}

func seqs(from, to uint64) []uint64 {
	var out []uint64
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}

func count(t testing.TB, s *Store, table string) int {
	t.Helper()
	var n int
	if err := s.db.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM "+table).Scan(&n); err != nil {
		t.Fatalf("count %s: %v", table, err)
	}
	return n
}

func latestMigration(t *testing.T) int64 {
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil || len(names) == 0 {
		t.Fatalf("no embedded migrations: %v", err)
	}
	var v int64
	fmt.Sscanf(filepath.Base(names[len(names)-1]), "%d_", &v)
	return max(v, kindsVersion) // the Go migration (migrate_kinds.go)
}

func TestMigrations(t *testing.T) {
	t.Parallel()
	want := latestMigration(t)
	forEachEngine(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := open(t, dsn) // from an empty database
		if v, err := s.SchemaVersion(ctx); err != nil || v != want {
			t.Fatalf("SchemaVersion() = %d, %v; want %d", v, err, want)
		}
		for _, table := range []string{"agents", "records", "volumes", "probe_results"} {
			if n := count(t, s, table); n != 0 {
				t.Errorf("%s has %d rows in a fresh database", table, n)
			}
		}
		register(t, s, "a1")
		if _, err := s.AppendBatch(ctx, "a1", probeRecords(1, 3)); err != nil {
			t.Fatal(err)
		}
		s.Close()

		// Opening again applies nothing and keeps the data.
		s2 := open(t, dsn)
		if v, err := s2.SchemaVersion(ctx); err != nil || v != want {
			t.Fatalf("SchemaVersion() after reopening = %d, %v; want %d", v, err, want)
		}
		if n := count(t, s2, "records"); n != 3 {
			t.Errorf("records after reopening = %d, want 3", n)
		}
		// Twice more in parallel (server replicas starting together).
		var wg sync.WaitGroup
		errs := make(chan error, 2)
		for range 2 {
			wg.Go(func() {
				s, err := Open(ctx, dsn)
				if err == nil {
					s.Close()
				}
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Errorf("concurrent Open: %v", err)
			}
		}
	})
}

func TestAppendBatchDedup(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := open(t, dsn)
		register(t, s, "a1")
		batch := probeRecords(1, 5)
		got, err := s.AppendBatch(ctx, "a1", batch)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(AppendResult{Stored: seqs(1, 5), HighWater: 5}, got); d != "" {
			t.Errorf("first AppendBatch (-want +got):\n%s", d)
		}
		got, err = s.AppendBatch(ctx, "a1", batch) // the replay
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(AppendResult{Duplicates: seqs(1, 5), HighWater: 5}, got); d != "" {
			t.Errorf("replayed AppendBatch (-want +got):\n%s", d)
		}
		// A batch overlapping the stored ones, out of order.
		got, err = s.AppendBatch(ctx, "a1", []Record{probeRecord(7), probeRecord(5), probeRecord(6)})
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(AppendResult{Stored: []uint64{6, 7}, Duplicates: []uint64{5}, HighWater: 7}, got); d != "" {
			t.Errorf("overlapping AppendBatch (-want +got):\n%s", d)
		}
		if n := count(t, s, "records"); n != 7 {
			t.Errorf("records = %d, want 7", n)
		}
		if n := count(t, s, "probe_results"); n != 7 {
			t.Errorf("probe_results = %d, want 7", n)
		}
		// Appending counts as being seen.
		later := time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)
		s.now = func() time.Time { return later }
		if _, err := s.AppendBatch(ctx, "a1", batch); err != nil {
			t.Fatal(err)
		}
		if hosts, err := s.ListHosts(ctx); err != nil || len(hosts) != 1 || !hosts[0].LastSeen.Equal(later) {
			t.Errorf("ListHosts() = %+v, %v; want a1 last seen at %v", hosts, err, later)
		}
		// The same sequences of another agent are other records.
		register(t, s, "a2")
		if got, err := s.AppendBatch(ctx, "a2", batch); err != nil || len(got.Stored) != 5 {
			t.Errorf("AppendBatch(a2) = %+v, %v; want 5 stored", got, err)
		}
		// The payload is kept as given.
		var payload []byte
		if err := s.db.QueryRowContext(ctx, s.q(`SELECT payload FROM records WHERE agent_id = ? AND sequence = ?`), "a1", 3).Scan(&payload); err != nil || string(payload) != "record-3" {
			t.Errorf("payload of a1/3 = %q, %v; want record-3", payload, err)
		}
	})
}

func TestAppendBatchConcurrent(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := open(t, dsn)
		// A second Store on the same database stands for a second server replica.
		s2 := open(t, dsn)
		register(t, s, "a1")
		// Writer A sends 1..300, writer B 151..450 backwards: 151..300 overlap.
		type result struct {
			stored []uint64
			err    error
		}
		results := make(chan result, 2)
		var wg sync.WaitGroup
		wg.Go(func() {
			var r result
			for from := uint64(1); from <= 300; from += 25 {
				got, err := s.AppendBatch(ctx, "a1", probeRecords(from, from+24))
				if err != nil {
					r.err = err
					break
				}
				r.stored = append(r.stored, got.Stored...)
			}
			results <- r
		})
		wg.Go(func() {
			var r result
			for to := uint64(450); to > 150; to -= 25 {
				got, err := s2.AppendBatch(ctx, "a1", probeRecords(to-24, to))
				if err != nil {
					r.err = err
					break
				}
				r.stored = append(r.stored, got.Stored...)
			}
			results <- r
		})
		wg.Wait()
		close(results)
		var all []uint64
		for r := range results {
			if r.err != nil {
				t.Fatalf("concurrent AppendBatch: %v", r.err)
			}
			all = append(all, r.stored...)
		}
		slices.Sort(all)
		if d := cmp.Diff(seqs(1, 450), all); d != "" {
			t.Errorf("sequences stored by the two writers together, each exactly once (-want +got):\n%s", d)
		}
		if n := count(t, s, "records"); n != 450 {
			t.Errorf("records = %d, want 450", n)
		}
		if hw, err := s.HighWater(ctx, "a1", ""); err != nil || hw != 450 {
			t.Errorf("HighWater = %d, %v; want 450", hw, err)
		}
	})
}

func TestHighWater(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := open(t, dsn)
		if _, err := s.HighWater(ctx, "nobody", ""); !errors.Is(err, ErrUnknownAgent) {
			t.Errorf("HighWater(unknown) error = %v, want ErrUnknownAgent", err)
		}
		register(t, s, "a1")
		step := func(name string, records []Record, want uint64) {
			t.Helper()
			got, err := s.AppendBatch(ctx, "a1", records)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if got.HighWater != want {
				t.Errorf("%s: AppendResult.HighWater = %d, want %d", name, got.HighWater, want)
			}
			if hw, err := s.HighWater(ctx, "a1", ""); err != nil || hw != want {
				t.Errorf("%s: HighWater = %d, %v; want %d", name, hw, err, want)
			}
		}
		step("empty store", nil, 0)
		step("2 without 1", []Record{probeRecord(2)}, 0)
		step("1 closes the gap", []Record{probeRecord(1), probeRecord(4)}, 2)
		rejected := Record{Sequence: 3, Kind: KindRejected, Payload: []byte("junk"), Reason: "probe.kind \"x\""}
		step("a rejected record settles its sequence", []Record{rejected}, 4)
		step("gap at 5", probeRecords(6, 1200), 4) // more than one page of the walk above the gap

		// The agent dropped 5 (spool cap): it says its oldest is 6.
		hw, err := s.SettleBelow(ctx, "a1", "", 6)
		if err != nil || hw != 1200 {
			t.Errorf("SettleBelow(6) = %d, %v; want 1200", hw, err)
		}
		hw, err = s.SettleBelow(ctx, "a1", "", 3) // older news changes nothing
		if err != nil || hw != 1200 {
			t.Errorf("SettleBelow(3) = %d, %v; want 1200", hw, err)
		}
		hw, err = s.SettleBelow(ctx, "a1", "", 2000) // 1201..1999 dropped
		if err != nil || hw != 1999 {
			t.Errorf("SettleBelow(2000) = %d, %v; want 1999", hw, err)
		}
		step("after the floor", probeRecords(2000, 2001), 2001)
		// A late replay below the mark is a duplicate and moves nothing.
		got, err := s.AppendBatch(ctx, "a1", []Record{probeRecord(5)})
		if err != nil || got.HighWater != 2001 || len(got.Stored) != 1 {
			t.Errorf("late record 5 = %+v, %v; want stored, high water 2001", got, err)
		}
		if _, err := s.SettleBelow(ctx, "nobody", "", 1); !errors.Is(err, ErrUnknownAgent) {
			t.Errorf("SettleBelow(unknown) error = %v, want ErrUnknownAgent", err)
		}
	})
}

// A batch that fails part-way (here: a CHECK constraint on the probe
// result, after its records were inserted) leaves nothing behind.
func TestAppendBatchAtomic(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := open(t, dsn)
		register(t, s, "a1")
		if _, err := s.AppendBatch(ctx, "a1", probeRecords(1, 2)); err != nil {
			t.Fatal(err)
		}
		bad := probeRecords(3, 6)
		bad[2].Probe.Kind = "" // 5
		bad = append(bad, geometryRecord(7, vol("/data", "aligned")))
		if got, err := s.AppendBatch(ctx, "a1", bad); err == nil {
			t.Fatalf("AppendBatch with a bad probe result = %+v, want an error", got)
		}
		badVerdict := append(probeRecords(3, 4), geometryRecord(5, vol("/data", "sort-of")))
		if got, err := s.AppendBatch(ctx, "a1", badVerdict); err == nil {
			t.Fatalf("AppendBatch with a bad verdict = %+v, want an error", got)
		}
		for table, want := range map[string]int{"records": 2, "probe_results": 2, "volumes": 0} {
			if n := count(t, s, table); n != want {
				t.Errorf("%s after the failed batches = %d, want %d", table, n, want)
			}
		}
		if hw, err := s.HighWater(ctx, "a1", ""); err != nil || hw != 2 {
			t.Errorf("HighWater after the failed batches = %d, %v; want 2", hw, err)
		}
		// The corrected batch goes in whole.
		bad[2].Probe.Kind = "random-write"
		got, err := s.AppendBatch(ctx, "a1", bad)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(AppendResult{Stored: seqs(3, 7), HighWater: 7}, got); d != "" {
			t.Errorf("corrected batch (-want +got):\n%s", d)
		}
	})
}

func TestAppendBatchInvalid(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := open(t, dsn)
		register(t, s, "a1")
		noProbe := probeRecord(2)
		noProbe.Probe = nil
		tests := []struct {
			name  string
			batch []Record
			want  error
		}{
			{"sequence 0", []Record{probeRecord(0)}, ErrInvalid},
			{"sequence above int64", []Record{probeRecord(1 << 63)}, ErrInvalid},
			{"sequence twice", []Record{probeRecord(1), probeRecord(2), probeRecord(1)}, ErrInvalid},
			{"unknown kind", []Record{{Sequence: 1, Kind: "metrics"}}, ErrInvalid},
			{"probe kind without probe", []Record{noProbe}, ErrInvalid},
		}
		for _, tt := range tests {
			if got, err := s.AppendBatch(ctx, "a1", tt.batch); !errors.Is(err, tt.want) {
				t.Errorf("%s: AppendBatch = %+v, %v; want %v", tt.name, got, err, tt.want)
			}
		}
		if _, err := s.AppendBatch(ctx, "nobody", probeRecords(1, 1)); !errors.Is(err, ErrUnknownAgent) {
			t.Errorf("AppendBatch(unknown agent) error = %v, want ErrUnknownAgent", err)
		}
		if n := count(t, s, "records"); n != 0 {
			t.Errorf("records = %d, want 0", n)
		}
	})
}

func ptr[T any](v T) *T { return &v }

// vol is a volume with its judged record; listed (ListVolumes) it has
// the judged columns in Verdict and its neighbours and no Judged.
func vol(mount, verdict string) Volume {
	return Volume{
		MountPoint: mount, Device: "/dev/sdb1", FSType: "xfs", Geometry: []byte("geom " + mount + " " + verdict),
		Judged: InventoryVolume{Verdict: verdict, DataOffsetBytes: 32256, StripeUnitBytes: 65536,
			SplitFraction: [vocab.NumIOSizes]float64{0.125, 1.0}, Severity: "none", RulesVersion: "test"},
		Verdict: verdict, DataOffsetBytes: ptr(uint64(32256)), StripeUnitBytes: 65536,
		SplitFraction: [vocab.NumIOSizes]*float64{ptr(0.125), ptr(1.0)},
	}
}

// listed is v as ListVolumes returns it.
func listed(v Volume) Volume {
	v.Judged = InventoryVolume{}
	return v
}

func geometryRecord(seq uint64, vols ...Volume) Record {
	return Record{Sequence: seq, Kind: KindGeometry, ProducedAt: time.Unix(1_700_000_000+int64(seq), 0).UTC(), Payload: []byte("snapshot"), Volumes: vols}
}

func TestVolumesAndHosts(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := open(t, dsn)
		seen := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
		if err := s.UpsertAgent(ctx, Agent{ID: "a1", Hostname: "db1", OS: "linux", Kernel: "6.1", MachineID: "m1", AgentVersion: "0.1.0", LastSeen: seen}); err != nil {
			t.Fatal(err)
		}
		if err := s.UpsertAgent(ctx, Agent{ID: "a1", Hostname: "db1", OS: "linux", Kernel: "6.12", MachineID: "m1", AgentVersion: "0.2.0", LastSeen: seen.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		register(t, s, "a0") // hostname a0.example sorts first
		hosts, err := s.ListHosts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(hosts) != 2 || hosts[0].ID != "a0" {
			t.Fatalf("ListHosts() = %+v, want a0 then a1", hosts)
		}
		want := Agent{ID: "a1", Hostname: "db1", OS: "linux", Kernel: "6.12", MachineID: "m1", AgentVersion: "0.2.0", FirstSeen: seen, LastSeen: seen.Add(time.Hour)}
		if d := cmp.Diff(want, hosts[1]); d != "" {
			t.Errorf("ListHosts()[1] (-want +got):\n%s", d)
		}

		unknown := vol("/log", "unknown")
		unknown.DataOffsetBytes, unknown.SplitFraction, unknown.StripeUnitBytes = nil, [vocab.NumIOSizes]*float64{}, 0
		unknown.Judged.DataOffsetBytes, unknown.Judged.SplitFraction, unknown.Judged.StripeUnitBytes = -1, [vocab.NumIOSizes]float64{-1, -1}, 0
		steps := []struct {
			name  string
			batch []Record
		}{
			{"first snapshot", []Record{geometryRecord(1, vol("/data", "misaligned"), unknown)}},
			{"/log gone, /data fixed", []Record{geometryRecord(3, vol("/data", "aligned"))}},
			{"a late older snapshot changes nothing", []Record{geometryRecord(2, vol("/data", "misaligned"), vol("/log", "misaligned"), vol("/old", "aligned"))}},
		}
		for _, st := range steps {
			if _, err := s.AppendBatch(ctx, "a1", st.batch); err != nil {
				t.Fatalf("%s: %v", st.name, err)
			}
		}
		got, err := s.ListVolumes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		wantVol := listed(vol("/data", "aligned"))
		// Sequence is the server's: snapshot 3 was the second record stored.
		wantVol.AgentID, wantVol.Hostname, wantVol.Sequence, wantVol.ObservedAt = "a1", "db1", 2, time.Unix(1_700_000_003, 0).UTC()
		for i := range got {
			if got[i].JudgedAt.IsZero() {
				t.Errorf("ListVolumes()[%d]: no JudgedAt", i)
			}
			got[i].JudgedAt = time.Time{}
		}
		if d := cmp.Diff([]Volume{wantVol}, got); d != "" {
			t.Errorf("ListVolumes() (-want +got):\n%s", d)
		}

		// Both volumes of one snapshot, unknown values kept as unknown.
		if _, err := s.AppendBatch(ctx, "a1", []Record{geometryRecord(4, vol("/data", "aligned"), unknown)}); err != nil {
			t.Fatal(err)
		}
		got, err = s.ListVolumes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[1].MountPoint != "/log" || got[1].DataOffsetBytes != nil || got[1].SplitFraction[0] != nil || got[1].Verdict != "unknown" {
			t.Errorf("ListVolumes() = %+v, want /data and /log with unknown offset and split", got)
		}
	})
}

func TestOpenBadDSN(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		dsn  string
		want string // in the error
	}{
		{"", "bad store DSN"},
		{"/var/lib/plumbline.db", "want sqlite:///path"},
		{"mysql://root@localhost/plumbline", `engine "mysql" is not supported`},
		{"sqlite://", "no file path"},
		{"sqlite:///tmp/x.db?mode=memory", "plain file path"},
		{"sqlite://" + filepath.Join(t.TempDir(), "missing-dir", "x.db"), "open store"},
		{"postgres://plumbline:s3cret@127.0.0.1:1/plumbline?connect_timeout=2", "open store postgres://plumbline:xxxxx@127.0.0.1:1"},
	}
	for _, tt := range tests {
		s, err := Open(ctx, tt.dsn)
		if err == nil {
			s.Close()
			t.Errorf("Open(%q) succeeded, want an error", tt.dsn)
			continue
		}
		if !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Open(%q) error = %q, want it to say %q", tt.dsn, err, tt.want)
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Open(%q) error = %q shows the password", tt.dsn, err)
		}
	}
}

// BenchmarkAppendBatch stores batches of 100 probe records (about the size
// the agent sends: a 600-byte payload and a 300-byte histogram each) and
// reports records per second.
func BenchmarkAppendBatch(b *testing.B) {
	for _, e := range engines {
		b.Run(e.Name, func(b *testing.B) {
			s := open(b, e.DSN(b))
			register(b, s, "bench")
			payload := make([]byte, 600)
			hist := make([]byte, 300)
			const batch = 100
			next := uint64(1)
			ctx := context.Background()
			b.ResetTimer()
			for b.Loop() {
				recs := probeRecords(next, next+batch-1)
				for i := range recs {
					recs[i].Payload = payload
					recs[i].Probe.Histogram = hist
				}
				if _, err := s.AppendBatch(ctx, "bench", recs); err != nil {
					b.Fatal(err)
				}
				next += batch
			}
			b.ReportMetric(float64(next-1)/b.Elapsed().Seconds(), "records/s")
		})
	}
}
