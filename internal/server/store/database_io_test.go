package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func databaseRecord(seq uint64, started time.Time) Record {
	return Record{Sequence: seq, Kind: KindDatabase, ProducedAt: started.Add(time.Minute), Payload: []byte("db"),
		Database: &DatabaseIO{Source: "main", Engine: "postgresql", Version: "15.8", StartedAt: started, Interval: time.Minute,
			Ops: []DatabaseOp{
				{Location: "data", Path: "/srv/pg", MountPoint: "/srv", Device: "md0", Op: "read", Count: 1200, Bytes: 1200 * 8192, Measured: true, Time: 600 * time.Millisecond},
				{Location: "wal", Path: "/srv/pg/pg_wal", MountPoint: "/srv", Device: "md0", Op: "wal-sync", Count: 300, NotMeasured: "track_wal_io_timing is off"},
				{Location: "tablespace", Path: "/mnt/x", Attribution: "no volume holds /mnt/x", Op: "write", Count: 5, Measured: true},
			}}}
}

// A database interval is stored with its record, each operation a row: a
// time the database did not take is NULL, not 0, and comes back not
// measured; a measured 0 stays a measured 0. The evaluator reads the
// intervals whole, once (its watermark), and a volume's history is its
// own operations.
func TestDatabaseIO(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := open(t, dsn)
		register(t, s, "a1")
		t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
		recs := []Record{databaseRecord(1, t0), probeRecord(2), databaseRecord(3, t0.Add(time.Minute))}
		if _, err := s.AppendBatch(ctx, "a1", recs); err != nil {
			t.Fatal(err)
		}
		var nulls int
		if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM database_io WHERE time_ns IS NULL`).Scan(&nulls); err != nil || nulls != 2 {
			t.Errorf("rows not measured = %d, %v; want 2", nulls, err)
		}
		// limit 4 cuts the second interval: it comes back whole.
		runs, err := s.PendingDatabaseRuns(ctx, 4)
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) != 2 || runs[0].Sequence != 1 || runs[1].Sequence != 3 {
			t.Fatalf("PendingDatabaseRuns = %d runs %+v; want server sequences 1 and 3", len(runs), runs)
		}
		want := *recs[0].Database
		if diff := cmp.Diff(want, runs[0].DatabaseIO); diff != "" {
			t.Errorf("interval read back (-want +got):\n%s", diff)
		}
		if len(runs[1].Ops) != 3 {
			t.Errorf("second interval: %d ops, want 3 (read whole past the limit)", len(runs[1].Ops))
		}
		if err := s.SaveDatabaseStates(ctx, DatabaseUpdate{Watermarks: map[string]uint64{"a1": 3}}); err != nil {
			t.Fatal(err)
		}
		if runs, err := s.PendingDatabaseRuns(ctx, 100); err != nil || len(runs) != 0 {
			t.Errorf("after the watermark: %d runs, %v; want none", len(runs), err)
		}
		hist, err := s.DatabaseHistory(ctx, "a1", "/srv", t0, 100)
		if err != nil || len(hist) != 2 || len(hist[0].Ops) != 2 {
			t.Fatalf("DatabaseHistory = %+v, %v; want 2 intervals of 2 ops on /srv", hist, err)
		}
	})
}

// A database record without its interval, or with counters a BIGINT
// cannot hold, is refused before anything is written.
func TestDatabaseIOInvalid(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, dsn string) {
		s := open(t, dsn)
		register(t, s, "a1")
		r := databaseRecord(1, time.Now())
		r.Database.Ops[0].Count = 1 << 63
		noIO := Record{Sequence: 2, Kind: KindDatabase, Payload: []byte("x")}
		for _, rec := range []Record{r, noIO} {
			if _, err := s.AppendBatch(context.Background(), "a1", []Record{rec}); !errors.Is(err, ErrInvalid) {
				t.Errorf("AppendBatch(%d) = %v, want ErrInvalid", rec.Sequence, err)
			}
		}
	})
}
