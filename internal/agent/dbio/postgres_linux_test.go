//go:build linux

package dbio

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/plumbline/plumbline/internal/agentkeys"
	"github.com/plumbline/plumbline/internal/lab/pgtest"
	"github.com/plumbline/plumbline/internal/vocab"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// pgAdmin connects to the test's database as the superuser pgtest gives.
func pgAdmin(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func exec(t *testing.T, c *pgx.Conn, sql string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := c.Exec(ctx, sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// setSystem sets a setting server-wide and waits until a new session sees
// it (the reload reaches the postmaster asynchronously).
func setSystem(t *testing.T, dsn string, admin *pgx.Conn, name, value string) {
	t.Helper()
	exec(t, admin, "ALTER SYSTEM SET "+name+" = "+value)
	exec(t, admin, "SELECT pg_reload_conf()")
	deadline := time.Now().Add(30 * time.Second)
	for {
		c := pgAdmin(t, dsn)
		var got string
		if err := c.QueryRow(context.Background(), "SELECT current_setting('"+name+"')").Scan(&got); err != nil {
			t.Fatal(err)
		}
		c.Close(context.Background())
		if got == value {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is still %s, want %s", name, got, value)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// monitor creates a login role that is only a member of pg_monitor, with a
// password in a file, and the source configuration reading as it.
func monitor(t *testing.T, dsn string, admin *pgx.Conn) Config {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	role := "plumbline_mon_" + strings.TrimPrefix(u.Path, "/plumbline_test_")
	exec(t, admin, "CREATE ROLE "+role+" LOGIN PASSWORD 'secret' IN ROLE pg_monitor")
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), dsn)
		if err == nil {
			c.Exec(context.Background(), "DROP ROLE IF EXISTS "+role)
			c.Close(context.Background())
		}
	})
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return agentkeys.WithDatabaseDefaults([]Config{{
		Name: "pg", Engine: vocab.EnginePostgreSQL, Address: u.Host, Database: strings.TrimPrefix(u.Path, "/"),
		User: role, PasswordFile: pwFile, Every: time.Minute, Timeout: 10 * time.Second,
	}})[0]
}

// pgTruth is what the test reads from the views itself.
type pgTruth struct {
	reads, writes, walWrites, walSyncs     int64
	readMS, writeMS, walWriteMS, walSyncMS float64
}

func readTruth(t *testing.T, c *pgx.Conn) pgTruth {
	t.Helper()
	var v pgTruth
	err := c.QueryRow(context.Background(), `SELECT (SELECT sum(blks_read)::int8 FROM pg_stat_database), (SELECT sum(blk_read_time) FROM pg_stat_database),
	  (SELECT (buffers_checkpoint + buffers_clean + buffers_backend)::int8 FROM pg_stat_bgwriter), (SELECT sum(blk_write_time) FROM pg_stat_database),
	  wal_write, wal_write_time, wal_sync, wal_sync_time FROM pg_stat_wal`).Scan(&v.reads, &v.readMS, &v.writes, &v.writeMS, &v.walWrites, &v.walWriteMS, &v.walSyncs, &v.walSyncMS)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// within checks that the reported delta lies between what the views moved
// by from the truth read just after the first sample to the one just
// before the second (the least) and from just before the first to just
// after the second (the most).
func within(t *testing.T, what string, got, least, most float64) {
	t.Helper()
	if got < least-1e-6 || got > most+1e-6 {
		t.Errorf("%s = %v, want within [%v, %v] (the views' own deltas around the samples)", what, got, least, most)
	}
}

func opOf(t *testing.T, rec *plumblinev1.DatabaseIO, loc vocab.DatabaseLocation, op vocab.DatabaseOp) *plumblinev1.DatabaseIOOp {
	t.Helper()
	for _, s := range rec.GetSets() {
		if s.GetLocation() != string(loc) {
			continue
		}
		for _, o := range s.GetOps() {
			if o.GetOp() == string(op) {
				return o
			}
		}
	}
	t.Fatalf("no %s %s op in %v", loc, op, rec)
	return nil
}

// TestPostgresDeltasMatchViews samples a real PostgreSQL around real I/O
// (a table larger than the shared buffers' ring, written, checkpointed and
// read back) as a pg_monitor-only role, and checks every reported count
// and time against the views' own deltas over the same interval; then,
// with timing switched off, that the times are "not measured", never 0.
func TestPostgresDeltasMatchViews(t *testing.T) {
	dsn := pgtest.DSN(t)
	admin := pgAdmin(t, dsn)
	var version int
	if err := admin.QueryRow(context.Background(), "SELECT current_setting('server_version_num')::int").Scan(&version); err != nil {
		t.Fatal(err)
	}
	if version >= 160000 {
		t.Skipf("PostgreSQL %d: this test reads the views of 14 and 15", version)
	}
	cfg := monitor(t, dsn, admin)
	ctx := context.Background()
	for _, timed := range []bool{true, false} {
		t.Run("timing="+strconv.FormatBool(timed), func(t *testing.T) {
			onOff := map[bool]string{true: "on", false: "off"}[timed]
			setSystem(t, dsn, admin, "track_io_timing", onOff)
			setSystem(t, dsn, admin, "track_wal_io_timing", onOff)
			src, err := NewSource(cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			before1 := readTruth(t, admin)
			if _, ok, err := src.Step(ctx); err != nil || ok {
				t.Fatalf("first Step: ok %v, err %v; want no interval yet", ok, err)
			}
			after1 := readTruth(t, admin)
			exec(t, admin, "DROP TABLE IF EXISTS io")
			exec(t, admin, "CREATE TABLE io AS SELECT g AS id, md5(g::text) AS pad FROM generate_series(1, 400000) g")
			exec(t, admin, "CHECKPOINT")
			exec(t, admin, "SELECT count(*) FROM io")
			exec(t, admin, "INSERT INTO io SELECT g, 'x' FROM generate_series(1, 2000) g")
			before2 := readTruth(t, admin)
			d, ok, err := src.Step(ctx)
			if err != nil || !ok {
				t.Fatalf("second Step: ok %v, err %v", ok, err)
			}
			after2 := readTruth(t, admin)
			rec := Record("pg", d, NewAttributor(Mounts{Volumes: []*plumblinev1.Volume{{MountPoint: "/", Device: "root0"}}}, nil))
			checkPGRecord(t, rec, timed, before1, after1, before2, after2)
		})
	}
}

func checkPGRecord(t *testing.T, rec *plumblinev1.DatabaseIO, timed bool, before1, after1, before2, after2 pgTruth) {
	t.Helper()
	t.Logf("record: %v", rec)
	if rec.GetEngine() != "postgresql" || rec.GetInterval().AsDuration() <= 0 || rec.GetVersion() == "" {
		t.Errorf("record head = %s %s %v, want postgresql, a version and an interval", rec.GetEngine(), rec.GetVersion(), rec.GetInterval().AsDuration())
	}
	for _, s := range rec.GetSets() {
		if s.GetMountPoint() != "/" || s.GetDevice() != "root0" || s.GetAttribution() != "" {
			t.Errorf("set %s at %s on %q %q (%s), want / root0", s.GetLocation(), s.GetPath(), s.GetMountPoint(), s.GetDevice(), s.GetAttribution())
		}
	}
	type check struct {
		loc     vocab.DatabaseLocation
		op      vocab.DatabaseOp
		count   func(pgTruth) float64
		ms      func(pgTruth) float64
		setting string
	}
	checks := []check{
		{vocab.LocationData, vocab.DBOpRead, func(v pgTruth) float64 { return float64(v.reads) }, func(v pgTruth) float64 { return v.readMS }, "track_io_timing"},
		{vocab.LocationData, vocab.DBOpWrite, func(v pgTruth) float64 { return float64(v.writes) }, func(v pgTruth) float64 { return v.writeMS }, "track_io_timing"},
		{vocab.LocationWAL, vocab.DBOpWALWrite, func(v pgTruth) float64 { return float64(v.walWrites) }, func(v pgTruth) float64 { return v.walWriteMS }, "track_wal_io_timing"},
		{vocab.LocationWAL, vocab.DBOpWALSync, func(v pgTruth) float64 { return float64(v.walSyncs) }, func(v pgTruth) float64 { return v.walSyncMS }, "track_wal_io_timing"},
	}
	for _, c := range checks {
		o := opOf(t, rec, c.loc, c.op)
		what := string(c.loc) + " " + string(c.op)
		within(t, what+" count", float64(o.GetCount()), c.count(before2)-c.count(after1), c.count(after2)-c.count(before1))
		if o.GetCount() == 0 {
			t.Errorf("%s count = 0: the load did no such I/O", what)
		}
		if !timed {
			if o.TimeNanoseconds != nil || o.GetNotMeasured() != c.setting+" is off" {
				t.Errorf("%s time = %v, not_measured %q; want none, %q", what, o.TimeNanoseconds, o.GetNotMeasured(), c.setting+" is off")
			}
			continue
		}
		if o.TimeNanoseconds == nil {
			t.Errorf("%s: no time (%s), want the views' time", what, o.GetNotMeasured())
			continue
		}
		within(t, what+" ms", float64(o.GetTimeNanoseconds())/1e6, c.ms(before2)-c.ms(after1), c.ms(after2)-c.ms(before1))
	}
}
