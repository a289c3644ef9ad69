//go:build linux

package dbio

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/plumbline/plumbline/internal/agentkeys"
	"github.com/plumbline/plumbline/internal/lab/mariadbtest"
	"github.com/plumbline/plumbline/internal/vocab"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

func sqlExec(t *testing.T, db *sql.DB, q string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := db.ExecContext(ctx, q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// myTruth is the test's own reading of file_summary_by_instance: the
// files in the data directory, by location (the logs by their names).
type myTruth map[vocab.DatabaseLocation]map[vocab.DatabaseOp]struct{ count, ps uint64 }

func readMyTruth(t *testing.T, db *sql.DB, dataDir string) myTruth {
	t.Helper()
	rows, err := db.Query(`SELECT FILE_NAME, EVENT_NAME, COUNT_READ, SUM_TIMER_READ, COUNT_WRITE, SUM_TIMER_WRITE, COUNT_MISC, SUM_TIMER_MISC
	  FROM performance_schema.file_summary_by_instance WHERE FILE_NAME LIKE ?`, dataDir+"/%")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	v := myTruth{vocab.LocationData: {}, vocab.LocationWAL: {}}
	for rows.Next() {
		var file, event string
		var n [6]uint64
		if err := rows.Scan(&file, &event, &n[0], &n[1], &n[2], &n[3], &n[4], &n[5]); err != nil {
			t.Fatal(err)
		}
		base := filepath.Base(file)
		loc, write, sync := vocab.LocationData, vocab.DBOpWrite, vocab.DBOpFsync
		if strings.HasPrefix(base, "ib_logfile") || strings.HasPrefix(base, "binlog.") {
			loc, write, sync = vocab.LocationWAL, vocab.DBOpWALWrite, vocab.DBOpWALSync
		}
		for i, op := range []vocab.DatabaseOp{vocab.DBOpRead, write, sync} {
			if i == 2 && !strings.HasSuffix(event, "/innodb_data_file") && !strings.HasSuffix(event, "/innodb_log_file") {
				continue // misc is syncs only for InnoDB's files
			}
			c := v[loc][op]
			c.count += n[2*i]
			c.ps += n[2*i+1]
			v[loc][op] = c
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestMariaDBDeltasMatchViews samples a real MariaDB around real I/O (a
// table larger than the buffer pool written, committed and scanned) as a
// user granted only SELECT on performance_schema, and checks each
// location's counts and times against the view's own deltas over the
// same interval, the files placed on the volume holding the data
// directory; then, with the file instruments untimed, that the times are
// "not measured", never 0.
func TestMariaDBDeltasMatchViews(t *testing.T) {
	srv := mariadbtest.Start(t)
	root := srv.Root(t)
	sqlExec(t, root, "CREATE USER IF NOT EXISTS 'plumbline'@'127.0.0.1' IDENTIFIED BY 'secret'")
	sqlExec(t, root, "GRANT SELECT ON performance_schema.* TO 'plumbline'@'127.0.0.1'")
	sqlExec(t, root, "CREATE DATABASE IF NOT EXISTS io")
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := agentkeys.WithDatabaseDefaults([]Config{{Name: "maria", Engine: vocab.EngineMariaDB, Address: "127.0.0.1:" + strconv.Itoa(srv.Port),
		User: "plumbline", PasswordFile: pw, Every: time.Minute, Timeout: 10 * time.Second}})[0]
	mounts := Mounts{Volumes: []*plumblinev1.Volume{{MountPoint: "/", Device: "root0"}, {MountPoint: srv.Dir, Device: "vdb"}}}
	for _, timed := range []bool{true, false} {
		t.Run("timed="+strconv.FormatBool(timed), func(t *testing.T) {
			yes := map[bool]string{true: "YES", false: "NO"}[timed]
			sqlExec(t, root, "UPDATE performance_schema.setup_instruments SET TIMED = '"+yes+"' WHERE NAME LIKE 'wait/io/file/%'")
			defer sqlExec(t, root, "UPDATE performance_schema.setup_instruments SET TIMED = 'YES' WHERE NAME LIKE 'wait/io/file/%'")
			src, err := NewSource(cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			ctx := context.Background()
			// A table of its own, dropped before the interval: a table
			// dropped within it takes its file's counts out of the view's
			// sums.
			table := "io.t_" + yes
			sqlExec(t, root, "DROP TABLE IF EXISTS "+table)
			before1 := readMyTruth(t, root, srv.Data)
			if _, ok, err := src.Step(ctx); err != nil || ok {
				t.Fatalf("first Step: ok %v, err %v; want no interval yet", ok, err)
			}
			after1 := readMyTruth(t, root, srv.Data)
			sqlExec(t, root, "CREATE TABLE "+table+" (id INT PRIMARY KEY, pad VARCHAR(1000)) ENGINE=InnoDB")
			sqlExec(t, root, "INSERT INTO "+table+" SELECT seq, REPEAT('x', 1000) FROM io.seq_1_to_30000")
			for i := range 20 {
				sqlExec(t, root, "INSERT INTO "+table+" VALUES ("+strconv.Itoa(100000+i)+", 'y')") // one commit each
			}
			sqlExec(t, root, "SELECT SUM(LENGTH(pad)) FROM "+table)
			before2 := readMyTruth(t, root, srv.Data)
			d, ok, err := src.Step(ctx)
			if err != nil || !ok {
				t.Fatalf("second Step: ok %v, err %v", ok, err)
			}
			after2 := readMyTruth(t, root, srv.Data)
			rec := Record("maria", d, NewAttributor(mounts, nil))
			t.Logf("record: %v", rec)
			if !slices.ContainsFunc(rec.GetUnknown(), func(u *plumblinev1.Unknown) bool { return u.GetField() == "innodb_log_file" }) {
				t.Errorf("unknown = %v, want the redo log named as not measured (MariaDB 10.8+ has no instrument for it)", rec.GetUnknown())
			}
			checkMyRecord(t, rec, srv.Dir, timed, before1, after1, before2, after2)
		})
	}
}

func checkMyRecord(t *testing.T, rec *plumblinev1.DatabaseIO, volume string, timed bool, before1, after1, before2, after2 myTruth) {
	t.Helper()
	if rec.GetEngine() != "mariadb" || !strings.Contains(rec.GetVersion(), "MariaDB") {
		t.Errorf("engine %s version %s, want mariadb", rec.GetEngine(), rec.GetVersion())
	}
	got := map[vocab.DatabaseLocation]map[vocab.DatabaseOp]*plumblinev1.DatabaseIOOp{}
	for _, s := range rec.GetSets() {
		loc := vocab.DatabaseLocation(s.GetLocation())
		if loc == vocab.LocationFile {
			continue // temporary files outside the data directory
		}
		if s.GetMountPoint() != volume || s.GetDevice() != "vdb" {
			t.Errorf("set %s %s on %q (%s), want %s", loc, s.GetPath(), s.GetMountPoint(), s.GetAttribution(), volume)
		}
		if got[loc] != nil {
			t.Errorf("two %s sets on one volume", loc)
		}
		got[loc] = map[vocab.DatabaseOp]*plumblinev1.DatabaseIOOp{}
		for _, o := range s.GetOps() {
			got[loc][vocab.DatabaseOp(o.GetOp())] = o
		}
	}
	for loc, ops := range after2 {
		for op := range ops {
			o := got[loc][op]
			what := string(loc) + " " + string(op)
			if o == nil {
				t.Errorf("no %s in the record", what)
				continue
			}
			least, most := before2[loc][op].count-after1[loc][op].count, after2[loc][op].count-before1[loc][op].count
			if o.GetCount() < least || o.GetCount() > most {
				t.Errorf("%s count = %d, want within [%d, %d]", what, o.GetCount(), least, most)
			}
			if !timed {
				if o.TimeNanoseconds != nil || !strings.Contains(o.GetNotMeasured(), "is not timed") {
					t.Errorf("%s time = %v (%q), want none, not timed", what, o.TimeNanoseconds, o.GetNotMeasured())
				}
				continue
			}
			const perFile = 200 // ns: each file's picoseconds are truncated to ns on their own
			lo, hi := (before2[loc][op].ps-after1[loc][op].ps)/1000, (after2[loc][op].ps-before1[loc][op].ps)/1000
			if o.TimeNanoseconds == nil || o.GetTimeNanoseconds()+perFile < lo || o.GetTimeNanoseconds() > hi+perFile {
				t.Errorf("%s time = %d ns (%q), want within [%d, %d]", what, o.GetTimeNanoseconds(), o.GetNotMeasured(), lo, hi)
			}
		}
	}
	if got[vocab.LocationWAL][vocab.DBOpWALWrite].GetCount() == 0 {
		t.Errorf("wal-write count 0: the commits wrote no binary log")
	}
	if got[vocab.LocationData][vocab.DBOpWrite].GetCount() == 0 {
		t.Errorf("data write count 0: the insert wrote nothing")
	}
}

// TestMariaDBOverSocket connects through the server's Unix socket.
func TestMariaDBOverSocket(t *testing.T) {
	srv := mariadbtest.Start(t)
	root := srv.Root(t)
	sqlExec(t, root, "CREATE USER IF NOT EXISTS 'plumbline'@'localhost' IDENTIFIED BY 'secret'")
	sqlExec(t, root, "GRANT SELECT ON performance_schema.* TO 'plumbline'@'localhost'")
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := agentkeys.WithDatabaseDefaults([]Config{{Name: "maria", Engine: vocab.EngineMySQL, Address: srv.Socket, User: "plumbline", PasswordFile: pw}})[0]
	src, err := NewSource(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	for range 2 {
		if _, _, err := src.Step(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	// A world-readable password file is refused: the next connection
	// (after the server closed this one) would not start.
	if err := os.Chmod(pw, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readPassword(pw); err == nil || !strings.Contains(err.Error(), "readable by every user") {
		t.Errorf("readPassword(a 0644 file) = %v, want refused", err)
	}
}
