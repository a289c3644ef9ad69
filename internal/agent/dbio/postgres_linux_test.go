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

// EnvTestRoot names the root of the PostgreSQL that
// PLUMBLINE_TEST_POSTGRES_DSN names, when it runs in a chroot.
const EnvTestRoot = "PLUMBLINE_TEST_POSTGRES_ROOT"

// pgKey is one (location, op) the test checks.
type pgKey struct {
	loc vocab.DatabaseLocation
	op  vocab.DatabaseOp
}

// pgTruth is what the test reads from the views itself: counts and
// milliseconds.
type pgTruth map[pgKey]struct{ count, ms float64 }

// pgTruthQueries are the views as the test reads them, per version: each
// query gives (location, op, count, ms) rows.
func pgTruthQuery(version int) string {
	wal := `SELECT 'wal', 'wal-write', wal_write::float8, wal_write_time FROM pg_stat_wal
	  UNION ALL SELECT 'wal', 'wal-sync', wal_sync::float8, wal_sync_time FROM pg_stat_wal`
	if version < 160000 {
		return `SELECT 'data', 'read', sum(blks_read)::float8, sum(blk_read_time) FROM pg_stat_database
		  UNION ALL SELECT 'data', 'write', (SELECT (buffers_checkpoint + buffers_clean + buffers_backend)::float8 FROM pg_stat_bgwriter), sum(blk_write_time) FROM pg_stat_database
		  UNION ALL ` + wal
	}
	io := `SELECT 'data', op, sum(n)::float8, sum(ms) FROM (
	    SELECT 'read' AS op, reads AS n, read_time AS ms FROM pg_stat_io WHERE object IN ('relation', 'temp relation')
	    UNION ALL SELECT 'write', writes, write_time FROM pg_stat_io WHERE object IN ('relation', 'temp relation')
	    UNION ALL SELECT 'extend', extends, extend_time FROM pg_stat_io WHERE object IN ('relation', 'temp relation')
	    UNION ALL SELECT 'writeback', writebacks, writeback_time FROM pg_stat_io WHERE object IN ('relation', 'temp relation')
	    UNION ALL SELECT 'fsync', fsyncs, fsync_time FROM pg_stat_io WHERE object IN ('relation', 'temp relation')) x GROUP BY op`
	if version >= 180000 {
		wal = `SELECT 'wal', 'wal-write', sum(writes)::float8, sum(write_time) FROM pg_stat_io WHERE object = 'wal'
		  UNION ALL SELECT 'wal', 'wal-sync', sum(fsyncs)::float8, sum(fsync_time) FROM pg_stat_io WHERE object = 'wal'`
	}
	return io + " UNION ALL " + wal
}

func readTruth(t *testing.T, c *pgx.Conn, version int) pgTruth {
	t.Helper()
	rows, err := c.Query(context.Background(), pgTruthQuery(version))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	v := pgTruth{}
	for rows.Next() {
		var loc, op string
		var n, ms *float64
		if err := rows.Scan(&loc, &op, &n, &ms); err != nil {
			t.Fatal(err)
		}
		k := pgKey{vocab.DatabaseLocation(loc), vocab.DatabaseOp(op)}
		e := v[k]
		if n != nil {
			e.count += *n
		}
		if ms != nil {
			e.ms += *ms
		}
		v[k] = e
	}
	if err := rows.Err(); err != nil {
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
// and time against the views' own deltas over the same interval
// (pg_stat_database, pg_stat_bgwriter and pg_stat_wal before 16;
// pg_stat_io from 16); then, with timing switched off, that the times are
// "not measured", never 0. The host's PostgreSQL is 15; a 16+ server is
// tested through PLUMBLINE_TEST_POSTGRES_DSN (docs/dev/database-io.md).
func TestPostgresDeltasMatchViews(t *testing.T) {
	dsn := pgtest.DSN(t)
	admin := pgAdmin(t, dsn)
	var version int
	if err := admin.QueryRow(context.Background(), "SELECT current_setting('server_version_num')::int").Scan(&version); err != nil {
		t.Fatal(err)
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
			before1 := readTruth(t, admin, version)
			if _, ok, err := src.Step(ctx); err != nil || ok {
				t.Fatalf("first Step: ok %v, err %v; want no interval yet", ok, err)
			}
			after1 := readTruth(t, admin, version)
			exec(t, admin, "DROP TABLE IF EXISTS io")
			exec(t, admin, "CREATE TABLE io AS SELECT g AS id, md5(g::text) AS pad FROM generate_series(1, 400000) g")
			exec(t, admin, "CHECKPOINT")
			exec(t, admin, "SELECT count(*) FROM io")
			exec(t, admin, "INSERT INTO io SELECT g, 'x' FROM generate_series(1, 2000) g")
			before2 := readTruth(t, admin, version)
			d, ok, err := src.Step(ctx)
			if err != nil || !ok {
				t.Fatalf("second Step: ok %v, err %v", ok, err)
			}
			after2 := readTruth(t, admin, version)
			// A server in a chroot (a PostgreSQL 17 in a debootstrapped
			// root) names its paths inside it.
			a := NewAttributor(Mounts{Volumes: []*plumblinev1.Volume{{MountPoint: "/", Device: "root0"}}}, nil).WithRoot(os.Getenv(EnvTestRoot))
			rec := Record("pg", d, a)
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
	for k := range after2 {
		o := opOf(t, rec, k.loc, k.op)
		what := string(k.loc) + " " + string(k.op)
		within(t, what+" count", float64(o.GetCount()), before2[k].count-after1[k].count, after2[k].count-before1[k].count)
		if o.GetCount() == 0 && (k.op == vocab.DBOpRead || k.op == vocab.DBOpWrite || k.op == vocab.DBOpWALWrite || k.op == vocab.DBOpWALSync) {
			t.Errorf("%s count = 0: the load did no such I/O", what)
		}
		setting := "track_io_timing"
		if k.loc == vocab.LocationWAL {
			setting = "track_wal_io_timing"
		}
		if !timed {
			if o.TimeNanoseconds != nil || o.GetNotMeasured() != setting+" is off" {
				t.Errorf("%s time = %v, not_measured %q; want none, %q", what, o.TimeNanoseconds, o.GetNotMeasured(), setting+" is off")
			}
			continue
		}
		if o.TimeNanoseconds == nil {
			t.Errorf("%s: no time (%s), want the views' time", what, o.GetNotMeasured())
			continue
		}
		within(t, what+" ms", float64(o.GetTimeNanoseconds())/1e6, before2[k].ms-after1[k].ms, after2[k].ms-before1[k].ms)
	}
	if len(after2) < 4 {
		t.Errorf("the views gave %d (location, op) pairs, want at least 4", len(after2))
	}
}

// TestPostgresOverSocket connects through the server's Unix socket, named
// by its socket file (.s.PGSQL.<port>: the directory and the port) and by
// its directory with the port key.
func TestPostgresOverSocket(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	admin := pgAdmin(t, dsn)
	var dirs string
	var port int
	if err := admin.QueryRow(context.Background(), "SELECT current_setting('unix_socket_directories'), current_setting('port')::int").Scan(&dirs, &port); err != nil {
		t.Fatal(err)
	}
	dir, _, _ := strings.Cut(dirs, ",")
	if dir == "" || !strings.HasPrefix(dir, "/") {
		t.Skipf("the server listens on no socket directory (%q)", dirs)
	}
	u, _ := url.Parse(dsn)
	for _, c := range []Config{
		{Address: filepath.Join(dir, ".s.PGSQL."+strconv.Itoa(port))},
		{Address: dir, Port: port},
	} {
		c.Name, c.Engine, c.User, c.Database = "pg", vocab.EnginePostgreSQL, u.User.Username(), strings.TrimPrefix(u.Path, "/")
		c = agentkeys.WithDatabaseDefaults([]Config{c})[0]
		src, err := NewSource(c, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := src.Step(context.Background()); err != nil {
			t.Errorf("address %s port %d: %v", c.Address, c.Port, err)
		}
		src.Close()
	}
}
