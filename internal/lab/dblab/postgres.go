//go:build linux

package dblab

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"

	"github.com/plumbline/plumbline/internal/vocab"
)

// PostgresConfig is a PostgreSQL cluster to create and start.
type PostgresConfig struct {
	// Root runs the cluster inside a Debian root (nil: the host).
	Root *Root
	// BinDir holds initdb, pg_ctl and postgres (a path inside Root); empty:
	// the newest /usr/lib/postgresql/*/bin there.
	BinDir string
	// Data is the data directory (a host path, bind-mounted at the same
	// path into Root); it must not exist yet, its parent must.
	Data string
	Port int
	// Settings are extra postgresql.conf lines (name → value, quoted as
	// needed by the caller).
	Settings map[string]string
	// MemoryLimit, when > 0, runs the cluster in a memory cgroup (v1) of
	// that many bytes: its page cache stays small, so that its reads reach
	// the device as on a host whose data outgrows its memory.
	MemoryLimit int64
}

// Postgres is a running cluster.
type Postgres struct {
	cfg     PostgresConfig
	Version int
	db      *sql.DB // superuser, for the ground truth and setup
	log     string
	cgroup  *memoryCgroup
}

// DefaultPostgresSettings are the settings the bench runs with: timing on
// (what the agent reports as measured), small shared buffers, a short
// checkpoint interval so that data-file writes and fsyncs happen within a
// trial.
func DefaultPostgresSettings() map[string]string {
	return map[string]string{
		"track_io_timing": "on", "track_wal_io_timing": "on", "shared_buffers": "'16MB'",
		"checkpoint_timeout": "'60s'", "max_connections": "40", "log_checkpoints": "off",
	}
}

// StartPostgres runs initdb and pg_ctl start, then creates the monitoring
// role (pg_monitor) the agent uses.
func StartPostgres(ctx context.Context, cfg PostgresConfig) (*Postgres, error) {
	if cfg.BinDir == "" {
		d, err := newestBinDir(cfg.Root.rootDir())
		if err != nil {
			return nil, err
		}
		cfg.BinDir = d
	}
	v, err := strconv.Atoi(filepath.Base(filepath.Dir(cfg.BinDir)))
	if err != nil {
		return nil, fmt.Errorf("postgres version of %s: %w", cfg.BinDir, err)
	}
	p := &Postgres{cfg: cfg, Version: v, log: cfg.Data + ".log"}
	uid, gid, err := ids(cfg.Root.rootDir(), "postgres")
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Data, 0o700); err != nil {
		return nil, err
	}
	if err := os.WriteFile(p.log, nil, 0o600); err != nil {
		return nil, err
	}
	for _, f := range []string{cfg.Data, p.log} {
		if err := os.Chown(f, uid, gid); err != nil {
			return nil, err
		}
	}
	if err := p.pg(ctx, "initdb", "-D", cfg.Data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C"); err != nil {
		return nil, err
	}
	if err := p.configure(); err != nil {
		return nil, err
	}
	var prefix []string
	if cfg.MemoryLimit > 0 {
		if p.cgroup, err = newMemoryCgroup(fmt.Sprintf("plumbline-dblab-%d", cfg.Port), cfg.MemoryLimit); err != nil {
			return nil, err
		}
		prefix = p.cgroup.enter()
	}
	if err := p.pgIn(ctx, prefix, "pg_ctl", "start", "-D", cfg.Data, "-l", p.log, "-w", "-t", "120"); err != nil {
		p.cgroup.remove()
		return nil, fmt.Errorf("%w\n%s", err, tailFile(p.log))
	}
	p.db, err = sql.Open("pgx", p.DSN("postgres", "", "postgres"))
	if err != nil {
		return nil, err
	}
	if _, err := p.db.ExecContext(ctx, fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s' IN ROLE pg_monitor", MonitorUser, Password)); err != nil {
		p.Stop()
		return nil, fmt.Errorf("create the monitoring role: %w", err)
	}
	return p, nil
}

func (p *Postgres) pg(ctx context.Context, tool string, args ...string) error {
	return p.pgIn(ctx, nil, tool, args...)
}

// pgIn runs a PostgreSQL tool as the cluster's owner, after prefix (a
// command that execs its arguments, e.g. into a cgroup).
func (p *Postgres) pgIn(ctx context.Context, prefix []string, tool string, args ...string) error {
	argv, err := p.cfg.Root.command("postgres", filepath.Join(p.cfg.BinDir, tool), args...)
	if err != nil {
		return err
	}
	argv = append(prefix, argv...)
	_, err = run(ctx, argv[0], argv[1:]...)
	return err
}

// configure writes the settings and pg_hba.conf: trust for the
// superuser over loopback (the bench's own connections), a password for
// everyone else (the agent's monitoring role).
func (p *Postgres) configure() error {
	settings := map[string]string{"listen_addresses": "'127.0.0.1'", "port": strconv.Itoa(p.cfg.Port),
		"unix_socket_directories": "'" + p.cfg.Data + "'", "password_encryption": "'scram-sha-256'"}
	for k, v := range p.cfg.Settings {
		settings[k] = v
	}
	keys := make([]string, 0, len(settings))
	for k := range settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("\n# dblab\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "%s = %s\n", k, settings[k])
	}
	f, err := os.OpenFile(filepath.Join(p.cfg.Data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(b.String()); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	hba := "local all all trust\nhost all postgres 127.0.0.1/32 trust\nhost all all 127.0.0.1/32 scram-sha-256\n"
	return os.WriteFile(filepath.Join(p.cfg.Data, "pg_hba.conf"), []byte(hba), 0o600)
}

// DSN is a URL to database db as user (password may be empty).
func (p *Postgres) DSN(user, password, db string) string {
	auth := user
	if password != "" {
		auth += ":" + password
	}
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", auth, p.cfg.Port, db)
}

// Port is the cluster's TCP port on 127.0.0.1.
func (p *Postgres) Port() int { return p.cfg.Port }

// Data is the cluster's data directory.
func (p *Postgres) Data() string { return p.cfg.Data }

// Exec runs a statement as the superuser.
func (p *Postgres) Exec(ctx context.Context, q string) error {
	_, err := p.db.ExecContext(ctx, q)
	return err
}

// Stop stops the cluster (fast shutdown).
func (p *Postgres) Stop() error {
	if p.db != nil {
		p.db.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := p.pg(ctx, "pg_ctl", "stop", "-D", p.cfg.Data, "-m", "fast", "-w")
	p.cgroup.remove()
	return err
}

// Sample reads the cluster's own I/O views: pg_stat_io (16 and later:
// relation I/O of every backend type — read, write, extend, writeback,
// fsync), else pg_stat_database (reads; writes with the buffers
// pg_stat_bgwriter counts written); and pg_stat_wal (WAL writes and
// syncs). Times are the views' milliseconds.
func (p *Postgres) Sample(ctx context.Context) (Sample, error) {
	tx, err := p.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return Sample{}, err
	}
	defer tx.Rollback()
	// One snapshot of the statistics for the whole transaction.
	if _, err := tx.ExecContext(ctx, "SET LOCAL stats_fetch_consistency = snapshot"); err != nil {
		return Sample{}, err
	}
	s := Sample{At: time.Now()}
	if p.Version >= 16 {
		err = p.sampleIO(ctx, tx, &s)
	} else {
		err = p.sampleDatabase(ctx, tx, &s)
	}
	if err != nil {
		return Sample{}, err
	}
	if p.Version <= 17 {
		var write, sync uint64
		var writeMS, syncMS float64
		if err := tx.QueryRowContext(ctx, "SELECT wal_write, wal_sync, wal_write_time, wal_sync_time FROM pg_stat_wal").
			Scan(&write, &sync, &writeMS, &syncMS); err != nil {
			return Sample{}, fmt.Errorf("pg_stat_wal: %w", err)
		}
		s.add(Key{vocab.LocationWAL, vocab.DBOpWALWrite}, Counter{Count: write, Nanos: writeMS * 1e6})
		s.add(Key{vocab.LocationWAL, vocab.DBOpWALSync}, Counter{Count: sync, Nanos: syncMS * 1e6})
	}
	return s, nil
}

func (p *Postgres) sampleIO(ctx context.Context, tx *sql.Tx, s *Sample) error {
	rows, err := tx.QueryContext(ctx, `SELECT coalesce(sum(reads),0), coalesce(sum(read_time),0), coalesce(sum(writes),0), coalesce(sum(write_time),0),
	  coalesce(sum(extends),0), coalesce(sum(extend_time),0), coalesce(sum(writebacks),0), coalesce(sum(writeback_time),0),
	  coalesce(sum(fsyncs),0), coalesce(sum(fsync_time),0)
	  FROM pg_stat_io WHERE object IN ('relation', 'temp relation')`)
	if err != nil {
		return fmt.Errorf("pg_stat_io: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var c [5]float64
		var ms [5]float64
		if err := rows.Scan(&c[0], &ms[0], &c[1], &ms[1], &c[2], &ms[2], &c[3], &ms[3], &c[4], &ms[4]); err != nil {
			return fmt.Errorf("pg_stat_io: %w", err)
		}
		for i, op := range []vocab.DatabaseOp{vocab.DBOpRead, vocab.DBOpWrite, vocab.DBOpExtend, vocab.DBOpWriteback, vocab.DBOpFsync} {
			s.add(Key{vocab.LocationData, op}, Counter{Count: uint64(c[i]), Nanos: ms[i] * 1e6})
		}
	}
	return rows.Err()
}

func (p *Postgres) sampleDatabase(ctx context.Context, tx *sql.Tx, s *Sample) error {
	var reads, written uint64
	var readMS, writeMS float64
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(sum(blks_read),0)::bigint, coalesce(sum(blk_read_time),0), coalesce(sum(blk_write_time),0)
	  FROM pg_stat_database`).Scan(&reads, &readMS, &writeMS); err != nil {
		return fmt.Errorf("pg_stat_database: %w", err)
	}
	if err := tx.QueryRowContext(ctx, `SELECT buffers_checkpoint + buffers_clean + buffers_backend FROM pg_stat_bgwriter`).Scan(&written); err != nil {
		return fmt.Errorf("pg_stat_bgwriter: %w", err)
	}
	s.add(Key{vocab.LocationData, vocab.DBOpRead}, Counter{Count: reads, Nanos: readMS * 1e6})
	s.add(Key{vocab.LocationData, vocab.DBOpWrite}, Counter{Count: written, Nanos: writeMS * 1e6})
	return nil
}

// PgbenchInit creates pgbench's tables at the scale factor.
func (p *Postgres) PgbenchInit(ctx context.Context, pgbench string, scale int) error {
	_, err := run(ctx, pgbench, "-i", "-q", "-s", strconv.Itoa(scale), "-h", "127.0.0.1", "-p", strconv.Itoa(p.cfg.Port), "-U", "postgres", "postgres")
	return err
}

// Pgbench starts pgbench's TPC-B-like load: clients connections, at most
// rate transactions a second in all (0: as fast as it goes), for d.
func (p *Postgres) Pgbench(pgbench string, clients int, rate float64, d time.Duration) (*Load, error) {
	args := []string{"-n", "-c", strconv.Itoa(clients), "-j", "1", "-T", strconv.Itoa(int(d.Seconds())),
		"-h", "127.0.0.1", "-p", strconv.Itoa(p.cfg.Port), "-U", "postgres"}
	if rate > 0 {
		args = append(args, "-R", strconv.FormatFloat(rate, 'f', -1, 64))
	}
	return startLoad(pgbench, append(args, "postgres")...)
}

// TPS parses pgbench's summary ("tps = 123.4 (without initial connection
// time)"); 0 when it has none.
func TPS(out string) float64 {
	for _, l := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(l), "tps = "); ok {
			f, _ := strconv.ParseFloat(strings.Fields(rest)[0], 64)
			return f
		}
	}
	return 0
}

func newestBinDir(root string) (string, error) {
	dirs, _ := filepath.Glob(filepath.Join(root, "usr/lib/postgresql/*/bin"))
	best, bestV := "", 0
	for _, d := range dirs {
		v, err := strconv.Atoi(filepath.Base(filepath.Dir(d)))
		if err == nil && v > bestV {
			best, bestV = d, v
		}
	}
	if best == "" {
		return "", fmt.Errorf("no PostgreSQL under %s/usr/lib/postgresql", root)
	}
	rel, _ := filepath.Rel(root, best)
	return "/" + rel, nil
}

func tailFile(path string) string {
	b, _ := os.ReadFile(path)
	return tail(string(b), 12)
}
