package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/plumbline/plumbline/internal/lab/pgtest"
)

// pruneAll runs a whole pass of PruneBatch and adds up what it removed.
func pruneAll(t *testing.T, ctx context.Context, s *Store, cutoff time.Time, limit int) PruneStats {
	t.Helper()
	var total PruneStats
	cur := PruneCursor{}
	for i := 0; ; i++ {
		st, err := s.PruneBatch(ctx, cutoff, cur, limit)
		if err != nil {
			t.Fatalf("PruneBatch: %v", err)
		}
		total.Records += st.Records
		total.ProbeResults += st.ProbeResults
		cur = st.Next
		if st.Done {
			return total
		}
		if i > 10_000 {
			t.Fatal("PruneBatch never done")
		}
	}
}

func setWatermark(t *testing.T, s *Store, agentID string, through uint64) {
	t.Helper()
	if _, err := s.db.ExecContext(context.Background(), s.q(`INSERT INTO baseline_watermarks (agent_id, evaluated_through) VALUES (?, ?)
ON CONFLICT (agent_id) DO UPDATE SET evaluated_through = excluded.evaluated_through`), agentID, int64(through)); err != nil {
		t.Fatal(err)
	}
}

func setHistoryMark(t *testing.T, s *Store, agentID string, through uint64) {
	t.Helper()
	if _, err := s.db.ExecContext(context.Background(), s.q(`INSERT INTO inventory_history_mark (agent_id, sequence) VALUES (?, ?)
ON CONFLICT (agent_id) DO UPDATE SET sequence = excluded.sequence`), agentID, int64(through)); err != nil {
		t.Fatal(err)
	}
}

// seedJudged registers a1 with probe records 1..n of incarnation, received
// two days ago and judged by the evaluator.
func seedJudged(t *testing.T, s *Store, incarnation string, n uint64) {
	t.Helper()
	register(t, s, "a1")
	old := time.Now().Add(-48 * time.Hour).UTC()
	s.now = func() time.Time { return old }
	if _, err := s.AppendBatchFrom(context.Background(), "a1", incarnation, 0, probeRecords(1, n)); err != nil {
		t.Fatal(err)
	}
	s.now = time.Now
	setWatermark(t, s, "a1", n)
}

func storedAgentSeqs(t *testing.T, s *Store, agentID string) []uint64 {
	t.Helper()
	rows, err := s.db.QueryContext(context.Background(), s.q(`SELECT agent_sequence FROM records WHERE agent_id = ? ORDER BY agent_sequence`), agentID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []uint64
	for rows.Next() {
		var q uint64
		if err := rows.Scan(&q); err != nil {
			t.Fatal(err)
		}
		out = append(out, q)
	}
	return out
}

// TestPruneRespectsCursors: only records older than the cutoff go, and of
// those only what the evaluator judged, the history read and no volume
// still refers to; unsettled sequences (above a gap) stay.
func TestPruneRespectsCursors(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := open(t, dsn)
		register(t, s, "a1")
		old := time.Now().Add(-48 * time.Hour).UTC()
		s.now = func() time.Time { return old }
		// Agent sequences: 1 geometry (/data), 2..6 probes, 7 geometry
		// (/data again: 1 is superseded), 8..10 probes; 12 arrives past a
		// gap at 11 (unsettled).
		batch := []Record{geometryRecord(1, vol("/data", "aligned"))}
		batch = append(batch, probeRecords(2, 6)...)
		batch = append(batch, geometryRecord(7, vol("/data", "aligned")))
		batch = append(batch, probeRecords(8, 10)...)
		batch = append(batch, probeRecord(12))
		if _, err := s.AppendBatch(ctx, "a1", batch); err != nil {
			t.Fatal(err)
		}
		s.now = time.Now
		if _, err := s.AppendBatch(ctx, "a1", probeRecords(20, 22)); err != nil { // recent: kept
			t.Fatal(err)
		}
		cutoff := time.Now().Add(-24 * time.Hour)

		// Nothing judged yet: only geometry 1 goes (7 superseded it; the
		// history recorded both as they were stored).
		if st := pruneAll(t, ctx, s, cutoff, 3); st.Records != 1 {
			t.Fatalf("pruned %d records before the evaluator read any, want 1 (geometry 1)", st.Records)
		}
		// The evaluator judged through server sequence 4 (agent 1..4 here:
		// one batch, so server and agent sequences coincide).
		setWatermark(t, s, "a1", 4)
		if st := pruneAll(t, ctx, s, cutoff, 3); st.Records != 3 || st.ProbeResults != 3 {
			t.Errorf("after the evaluator: pruned %+v, want probes 2..4", st)
		}
		// The history read everything, the evaluator too: geometry 1 goes,
		// 7 (the volume's latest) stays, 12 (unsettled) stays, the recent stay.
		setHistoryMark(t, s, "a1", 100)
		setWatermark(t, s, "a1", 100)
		pruneAll(t, ctx, s, cutoff, 2)
		if d := cmp.Diff([]uint64{7, 12, 20, 21, 22}, storedAgentSeqs(t, s, "a1")); d != "" {
			t.Errorf("records left (-want +got):\n%s", d)
		}
		if n := count(t, s, "probe_results"); n != 4 {
			t.Errorf("probe_results = %d, want 4 (12, 20..22)", n)
		}
		if vols, err := s.ListVolumes(ctx); err != nil || len(vols) != 1 {
			t.Errorf("ListVolumes = %v, %v; want /data kept", vols, err)
		}
	})
}

// TestPrunedReplayIsDuplicate: a record replayed after retention removed
// its row is recognised as a duplicate, not stored again; new records
// still are.
func TestPrunedReplayIsDuplicate(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := open(t, dsn)
		seedJudged(t, s, "inc-1", 10)
		if st := pruneAll(t, ctx, s, time.Now().Add(-time.Hour), 4); st.Records != 10 {
			t.Fatalf("pruned %d records, want 10", st.Records)
		}
		// plumbline_ingest_records_total stays a counter: pruned records count.
		if c, err := s.RecordCounts(ctx); err != nil || c[KindProbe] != 10 {
			t.Errorf("RecordCounts after the prune = %v, %v; want 10 probe records", c, err)
		}
		got, err := s.AppendBatchFrom(ctx, "a1", "inc-1", 0, probeRecords(5, 12))
		if err != nil {
			t.Fatal(err)
		}
		want := AppendResult{Stored: []uint64{11, 12}, Duplicates: seqs(5, 10), HighWater: 12}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("replay after prune (-want +got):\n%s", d)
		}
		if d := cmp.Diff([]uint64{11, 12}, storedAgentSeqs(t, s, "a1")); d != "" {
			t.Errorf("records (-want +got):\n%s", d)
		}
		if c, err := s.RecordCounts(ctx); err != nil || c[KindProbe] != 12 {
			t.Errorf("RecordCounts after the replay = %v, %v; want 12 probe records", c, err)
		}
		// Another incarnation's sequence 1 is another record.
		if got, err := s.AppendBatchFrom(ctx, "a1", "inc-2", 0, probeRecords(1, 1)); err != nil || len(got.Stored) != 1 {
			t.Errorf("AppendBatchFrom(inc-2) = %+v, %v; want stored", got, err)
		}
	})
}

// TestPruneFenced: a prune under a lease epoch that moved on is refused
// and removes nothing.
func TestPruneFenced(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := open(t, dsn)
		seedJudged(t, s, "", 5)
		first, ok, err := s.AcquireLease(ctx, "retention", "r1", time.Millisecond)
		if err != nil || !ok {
			t.Fatalf("AcquireLease = %v, %v", ok, err)
		}
		time.Sleep(5 * time.Millisecond) // r1's lease lapses on the database's clock
		if _, ok, err := s.AcquireLease(ctx, "retention", "r2", time.Minute); err != nil || !ok {
			t.Fatalf("AcquireLease(r2) = %v, %v", ok, err)
		}
		fenced := WithFence(ctx, Fence{Name: "retention", Epoch: first.Epoch})
		if _, err := s.PruneBatch(fenced, time.Now(), PruneCursor{}, 100); !errors.Is(err, ErrFenced) {
			t.Errorf("PruneBatch under a stale epoch: %v, want ErrFenced", err)
		}
		if n := count(t, s, "records"); n != 5 {
			t.Errorf("records = %d after a fenced prune, want 5", n)
		}
	})
}

// BenchmarkPrunePostgres measures pruning throughput on PostgreSQL: a
// pass over PLUMBLINE_PRUNE_ROWS (default 100,000) aged, judged probe
// records of 100 agents (with 1 KB payloads and their probe results),
// 5,000 a batch. Reports records/s (each with its probe result).
//
//	PLUMBLINE_PRUNE_ROWS=1000000 go test ./internal/server/store -run '^$' -bench PrunePostgres -benchtime 1x
func BenchmarkPrunePostgres(b *testing.B) {
	rows := 100_000
	if v := os.Getenv("PLUMBLINE_PRUNE_ROWS"); v != "" {
		fmt.Sscan(v, &rows)
	}
	ctx := context.Background()
	var total time.Duration
	for range b.N {
		s := open(b, pgtest.DSN(b))
		seedAged(b, s, rows, 100)
		start := time.Now()
		st := PruneStats{}
		n := 0
		for !st.Done {
			var err error
			if st, err = s.PruneBatch(ctx, time.Now(), st.Next, 5000); err != nil {
				b.Fatal(err)
			}
			n += st.Records
		}
		total += time.Since(start)
		if n != rows {
			b.Fatalf("pruned %d records, want %d", n, rows)
		}
	}
	b.ReportMetric(float64(rows*b.N)/total.Seconds(), "records/s")
}

// seedAged writes rows probe records (a day old, judged, settled) of
// agents agents straight in SQL.
func seedAged(b *testing.B, s *Store, rows, agents int) {
	b.Helper()
	ctx := context.Background()
	per := rows / agents
	day := time.Now().Add(-24 * time.Hour).UnixNano()
	for _, q := range []string{
		`INSERT INTO agents (agent_id, hostname, os, kernel, machine_id, agent_version, first_seen_ns, last_seen_ns, high_water)
SELECT 'a' || g, 'a' || g, 'linux', '6.1', '', '0.1', 0, 0, $1 FROM generate_series(1, $2) g`,
		`INSERT INTO agent_incarnations (agent_id, incarnation, high_water, first_seen_ns, last_seen_ns)
SELECT 'a' || g, 'inc', $1, 0, 0 FROM generate_series(1, $2) g`,
		`INSERT INTO baseline_watermarks (agent_id, evaluated_through) SELECT 'a' || g, $1 FROM generate_series(1, $2) g`,
		`INSERT INTO records (agent_id, sequence, incarnation, agent_sequence, kind, produced_ns, received_ns, payload, reason)
SELECT 'a' || a, q, 'inc', q, 'probe', $3::BIGINT, $3::BIGINT + q, convert_to(repeat('x', 1000), 'UTF8'), ''
FROM generate_series(1, $2) a, generate_series(1, $1) q`,
		`INSERT INTO probe_results (agent_id, sequence, mount_point, device, kind, block_size_bytes, queue_depth, started_ns, duration_ns,
    ops, errors, bytes, skipped, stopped_reason, latency_histogram)
SELECT 'a' || a, q, '/data', 'sdb', 'random-read', 8192, 1, $3::BIGINT, 1000000000, 100, 0, 819200, false, '', convert_to(repeat('h', 200), 'UTF8')
FROM generate_series(1, $2) a, generate_series(1, $1) q`,
		`ANALYZE`,
	} {
		var args []any
		if strings.Contains(q, "$1") {
			args = []any{per, agents}
		}
		if strings.Contains(q, "$3") {
			args = append(args, day)
		}
		if _, err := s.db.ExecContext(ctx, q, args...); err != nil {
			b.Fatalf("seed: %v\n%s", err, q)
		}
	}
}

// TestSQLiteFileBounded: on SQLite the pages retention frees are reused —
// after pruning a window of records and storing as many new ones, the
// file is no larger than after the first window (README "Retention":
// the file stays at its largest size, no auto_vacuum).
func TestSQLiteFileBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "plumbline.db")
	s := open(t, "sqlite://"+path)
	register(t, s, "a1")
	const window = 2000
	fill := func(from uint64) {
		recs := probeRecords(from, from+window-1)
		for i := range recs {
			recs[i].Payload = make([]byte, 1500)
		}
		old := time.Now().Add(-48 * time.Hour)
		s.now = func() time.Time { return old }
		defer func() { s.now = time.Now }()
		for start := 0; start < len(recs); start += 500 {
			if _, err := s.AppendBatch(ctx, "a1", recs[start:start+500]); err != nil {
				t.Fatal(err)
			}
		}
		setWatermark(t, s, "a1", from+window-1)
	}
	size := func() int64 {
		if _, err := s.db.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	fill(1)
	first := size()
	if first < window*1500 {
		t.Fatalf("file %d bytes after %d records of 1.5 KB", first, window)
	}
	for round := range 3 {
		if st := pruneAll(t, ctx, s, time.Now(), 500); st.Records != window {
			t.Fatalf("round %d: pruned %d records, want %d", round, st.Records, window)
		}
		fill(uint64(window*(round+1) + 1))
	}
	if got := size(); got > first+first/20 {
		t.Errorf("file %d bytes after three prune-and-refill rounds, %d after the first fill: freed pages not reused", got, first)
	}
}
