//go:build linux

package dblab

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/plumbline/plumbline/internal/vocab"
)

// MariaDBConfig is a MariaDB server to create and start (the host's
// Debian mariadb-server).
type MariaDBConfig struct {
	// Data is the data directory; it must not exist yet, its parent must.
	Data string
	Port int
	// Extra are more mariadbd options (--name=value).
	Extra []string
}

// MariaDB is a running server. The bench's own connections are root's
// over the Unix socket (unix_socket authentication: the bench runs as
// root); the agent's monitoring role connects over TCP with a password.
type MariaDB struct {
	cfg    MariaDBConfig
	Socket string
	proc   *Load
	log    string
}

// StartMariaDB runs mariadb-install-db and mariadbd (performance_schema
// on, the file instruments on), waits for it to answer, and creates the
// monitoring role: PROCESS and SELECT on performance_schema.
func StartMariaDB(ctx context.Context, cfg MariaDBConfig) (*MariaDB, error) {
	m := &MariaDB{cfg: cfg, Socket: filepath.Join(cfg.Data, "mysqld.sock"), log: cfg.Data + ".err"}
	uid, gid, err := ids("/", "mysql")
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Data, 0o750); err != nil {
		return nil, err
	}
	if err := os.WriteFile(m.log, nil, 0o640); err != nil {
		return nil, err
	}
	for _, f := range []string{cfg.Data, m.log} {
		if err := os.Chown(f, uid, gid); err != nil {
			return nil, err
		}
	}
	if _, err := run(ctx, "mariadb-install-db", "--no-defaults", "--datadir="+cfg.Data, "--user=mysql",
		"--auth-root-authentication-method=socket", "--skip-test-db"); err != nil {
		return nil, err
	}
	args := append([]string{"--no-defaults", "--datadir=" + cfg.Data, "--socket=" + m.Socket, "--port=" + strconv.Itoa(cfg.Port),
		"--bind-address=127.0.0.1", "--user=mysql", "--pid-file=" + filepath.Join(cfg.Data, "mysqld.pid"), "--log-error=" + m.log,
		"--skip-name-resolve", "--performance-schema=ON", "--performance-schema-instrument=wait/io/file/%=ON",
		"--innodb-buffer-pool-size=32M", "--innodb-flush-log-at-trx-commit=1", "--max-connections=60"}, cfg.Extra...)
	m.proc, err = startLoad("mariadbd", args...)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if _, err := m.SQL(ctx, "SELECT 1"); err == nil {
			break
		}
		if m.proc.Exited() || time.Now().After(deadline) {
			m.Stop()
			return nil, fmt.Errorf("mariadbd did not start: %s\n%s", tail(m.proc.Output(), 10), tailFile(m.log))
		}
		time.Sleep(300 * time.Millisecond)
	}
	grants := fmt.Sprintf("CREATE USER '%[1]s'@'127.0.0.1' IDENTIFIED BY '%[2]s'; GRANT PROCESS ON *.* TO '%[1]s'@'127.0.0.1'; "+
		"GRANT SELECT ON performance_schema.* TO '%[1]s'@'127.0.0.1'; CREATE DATABASE sbtest", MonitorUser, Password)
	if _, err := m.SQL(ctx, grants); err != nil {
		m.Stop()
		return nil, err
	}
	return m, nil
}

// SQL runs statements as root with the mariadb client; the output is
// tab-separated, without column names.
func (m *MariaDB) SQL(ctx context.Context, q string) (string, error) {
	return run(ctx, "mariadb", "--no-defaults", "--socket="+m.Socket, "-uroot", "-N", "-B", "-e", q)
}

// Port is the server's TCP port on 127.0.0.1.
func (m *MariaDB) Port() int { return m.cfg.Port }

// Data is the server's data directory.
func (m *MariaDB) Data() string { return m.cfg.Data }

// Stop shuts the server down and waits for it.
func (m *MariaDB) Stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := run(ctx, "mariadb-admin", "--no-defaults", "--socket="+m.Socket, "-uroot", "shutdown")
	if m.proc != nil {
		if _, werr := m.proc.Wait(ctx); werr != nil && err == nil && ctx.Err() != nil {
			err = werr
		}
	}
	return err
}

// Location is where MariaDB keeps a file, in the wire's words: the redo
// log (ib_logfile*) and binary logs are the log ("wal"), the rest data.
func Location(file string) vocab.DatabaseLocation {
	base := filepath.Base(file)
	if strings.HasPrefix(base, "ib_logfile") || strings.Contains(base, "-bin.") {
		return vocab.LocationWAL
	}
	return vocab.LocationData
}

// Sample reads performance_schema.file_summary_by_instance for the files
// under the data directory: per file,
// reads and writes (count, picoseconds, bytes) and the other operations
// (COUNT_MISC: mostly syncs — the log's are the commit's wait, counted
// as wal-sync; the data files' as fsync).
func (m *MariaDB) Sample(ctx context.Context) (Sample, error) {
	out, err := m.SQL(ctx, "SELECT FILE_NAME, COUNT_READ, SUM_TIMER_READ, SUM_NUMBER_OF_BYTES_READ, COUNT_WRITE, SUM_TIMER_WRITE, "+
		"SUM_NUMBER_OF_BYTES_WRITE, COUNT_MISC, SUM_TIMER_MISC FROM performance_schema.file_summary_by_instance")
	if err != nil {
		return Sample{}, err
	}
	s := Sample{At: time.Now(), Counters: map[Key]Counter{}}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Split(l, "\t")
		if len(f) != 9 || !strings.HasPrefix(f[0], m.cfg.Data+"/") {
			continue // not a file of the data directory (character sets)
		}
		var n [8]float64
		for i := range n {
			n[i], _ = strconv.ParseFloat(f[i+1], 64)
		}
		loc := Location(f[0])
		s.add(Key{loc, vocab.DBOpRead}, Counter{Count: uint64(n[0]), Nanos: n[1] / 1e3, Bytes: uint64(n[2])})
		write, sync := vocab.DBOpWrite, vocab.DBOpFsync
		if loc == vocab.LocationWAL {
			write, sync = vocab.DBOpWALWrite, vocab.DBOpWALSync
		}
		s.add(Key{loc, write}, Counter{Count: uint64(n[3]), Nanos: n[4] / 1e3, Bytes: uint64(n[5])})
		s.add(Key{loc, sync}, Counter{Count: uint64(n[6]), Nanos: n[7] / 1e3})
	}
	return s, nil
}

// SysbenchPrepare creates sysbench's tables in database sbtest.
func (m *MariaDB) SysbenchPrepare(ctx context.Context, tables, rows int) error {
	_, err := run(ctx, "sysbench", append(m.sysbenchArgs("oltp_read_write", tables, rows), "prepare")...)
	return err
}

// Sysbench starts an OLTP read/write load: threads connections, at most
// rate transactions a second in all (0: as fast as it goes), for d.
func (m *MariaDB) Sysbench(threads int, rate float64, d time.Duration, tables, rows int) (*Load, error) {
	args := append(m.sysbenchArgs("oltp_read_write", tables, rows), "--threads="+strconv.Itoa(threads),
		"--time="+strconv.Itoa(int(d.Seconds())), "--rate="+strconv.Itoa(int(rate)), "run")
	return startLoad("sysbench", args...)
}

func (m *MariaDB) sysbenchArgs(test string, tables, rows int) []string {
	return []string{test, "--db-driver=mysql", "--mysql-socket=" + m.Socket, "--mysql-user=root", "--mysql-db=sbtest",
		"--tables=" + strconv.Itoa(tables), "--table-size=" + strconv.Itoa(rows)}
}

// SysbenchTPS parses sysbench's summary ("transactions: 123 (4.56 per
// sec.)"); 0 when it has none.
func SysbenchTPS(out string) float64 {
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		if !strings.HasPrefix(l, "transactions:") {
			continue
		}
		if i := strings.Index(l, "("); i >= 0 {
			f, _ := strconv.ParseFloat(strings.Fields(l[i+1:])[0], 64)
			return f
		}
	}
	return 0
}

// MariaDBInstalled reports whether the tools a MariaDB lab needs are on PATH.
func MariaDBInstalled() error {
	for _, t := range []string{"mariadbd", "mariadb-install-db", "mariadb", "mariadb-admin"} {
		if _, err := exec.LookPath(t); err != nil {
			return fmt.Errorf("%s not found (apt-get install -y mariadb-server)", t)
		}
	}
	return nil
}
