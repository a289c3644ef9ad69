package dbio

import (
	"context"
	"fmt"
	"math"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/plumbline/plumbline/internal/vocab"
)

// postgres samples a PostgreSQL server over one held connection. Every
// sample is one read-only transaction of at most four statements:
// settings, tablespaces, the relation I/O counters (pg_stat_io on 16+;
// pg_stat_database with pg_stat_bgwriter before) and the WAL's
// (pg_stat_wal on 14–17; pg_stat_io's wal rows on 18+).
type postgres struct {
	c        Config
	password func() (string, error)
	now      func() time.Time
	conn     *pgx.Conn
}

// pgConfig is the connection configuration of a PostgreSQL source: the
// session is read-only by default and every statement and lock wait is
// bounded by the source's timeout.
func pgConfig(c Config, password string) (*pgx.ConnConfig, error) {
	host, port := c.Address, strconv.Itoa(c.Port)
	if strings.HasPrefix(c.Address, "/") {
		// A socket file .s.PGSQL.<port> names its directory and port.
		if p, ok := strings.CutPrefix(path.Base(c.Address), ".s.PGSQL."); ok {
			host, port = path.Dir(c.Address), p
		}
	} else {
		var err error
		if host, port, err = splitHostPort(c.Address); err != nil {
			return nil, err
		}
	}
	dsn := fmt.Sprintf("host=%s port=%s dbname=%s user=%s sslmode=prefer", pgQuote(host), pgQuote(port), pgQuote(c.Database), pgQuote(c.User))
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("postgresql connection settings: %w", err)
	}
	cfg.Password = password
	cfg.ConnectTimeout = c.Timeout
	ms := strconv.FormatInt(c.Timeout.Milliseconds(), 10)
	cfg.RuntimeParams = map[string]string{
		"application_name":                    "plumbline-agent",
		"default_transaction_read_only":       "on",
		"statement_timeout":                   ms,
		"lock_timeout":                        ms,
		"idle_in_transaction_session_timeout": ms,
	}
	// The simple protocol: no prepared statements left in the server's
	// memory, one round trip per statement.
	cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	return cfg, nil
}

// pgQuote quotes a libpq keyword value.
func pgQuote(v string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'"
}

func (p *postgres) close() {
	if p.conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		p.conn.Close(ctx)
		p.conn = nil
	}
}

// sample reads one sample; on an error the connection is closed, and the
// next sample connects again.
func (p *postgres) sample(ctx context.Context) (Sample, error) {
	if p.conn == nil {
		pw, err := p.password()
		if err != nil {
			return Sample{}, err
		}
		cfg, err := pgConfig(p.c, pw)
		if err != nil {
			return Sample{}, err
		}
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			return Sample{}, fmt.Errorf("connect: %w", err)
		}
		p.conn = conn
	}
	var s Sample
	err := pgx.BeginTxFunc(ctx, p.conn, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var err error
		s, err = p.read(ctx, tx)
		return err
	})
	if err != nil {
		p.close()
		return Sample{}, err
	}
	return s, nil
}

// pgSettings are the settings a sample reads.
type pgSettings struct {
	versionNum       int
	version          string
	started          time.Time
	blockSize        int64
	dataDir          string // "" when the role may not read it
	ioTiming         bool
	walTiming        bool
	walTimingPresent bool // track_wal_io_timing exists (14+)
}

const pgSettingsQuery = `SELECT current_setting('server_version_num')::int, current_setting('server_version'),
  pg_postmaster_start_time(), current_setting('block_size')::int8,
  coalesce((SELECT setting FROM pg_settings WHERE name = 'data_directory'), ''),
  current_setting('track_io_timing'),
  coalesce((SELECT setting FROM pg_settings WHERE name = 'track_wal_io_timing'), '')`

func (p *postgres) read(ctx context.Context, tx pgx.Tx) (Sample, error) {
	var st pgSettings
	var ioT, walT string
	if err := tx.QueryRow(ctx, pgSettingsQuery).Scan(&st.versionNum, &st.version, &st.started, &st.blockSize, &st.dataDir, &ioT, &walT); err != nil {
		return Sample{}, fmt.Errorf("settings: %w", err)
	}
	st.ioTiming, st.walTiming, st.walTimingPresent = ioT == "on", walT == "on", walT != ""
	s := Sample{Engine: vocab.EnginePostgreSQL, Version: st.version, Started: st.started}
	if st.dataDir == "" {
		s.Unknown = append(s.Unknown, Unknown{Field: "data_directory", Reason: "the role may not read it (grant pg_monitor or pg_read_all_settings): its volume is unknown"})
	}
	tablespaces, err := pgTablespaces(ctx, tx)
	if err != nil {
		return Sample{}, err
	}
	data := Set{Location: Location{Kind: vocab.LocationData, Path: st.dataDir}, Also: tablespaces}
	wal := Set{Location: Location{Kind: vocab.LocationWAL, Path: pgWALDir(st)}}
	var epochs []string
	s.At = p.now()
	if st.versionNum >= 160000 {
		e, err := pgStatIO(ctx, tx, st, &data, &wal)
		if err != nil {
			return Sample{}, err
		}
		epochs = append(epochs, e)
	} else {
		e, err := pgStatDatabaseRead(ctx, tx, st, &data)
		if err != nil {
			return Sample{}, err
		}
		epochs = append(epochs, e)
	}
	if st.versionNum >= 140000 && st.versionNum < 180000 {
		e, err := pgStatWALRead(ctx, tx, st, &wal)
		if err != nil {
			return Sample{}, err
		}
		epochs = append(epochs, e)
	} else if st.versionNum < 140000 {
		s.Unknown = append(s.Unknown, Unknown{Field: "pg_stat_wal", Reason: "PostgreSQL " + st.version + " has no WAL I/O statistics (14 and later)"})
	}
	s.Sets = append(s.Sets, data)
	if len(wal.Ops) > 0 {
		s.Sets = append(s.Sets, wal)
	}
	s.Epoch = strings.Join(epochs, " ")
	return s, nil
}

// pgWALDir is the WAL directory as PostgreSQL names it (a link the agent
// follows on the file system when it attributes it).
func pgWALDir(st pgSettings) string {
	if st.dataDir == "" {
		return ""
	}
	if st.versionNum < 100000 {
		return path.Join(st.dataDir, "pg_xlog")
	}
	return path.Join(st.dataDir, "pg_wal")
}

func pgTablespaces(ctx context.Context, tx pgx.Tx) ([]string, error) {
	rows, err := tx.Query(ctx, `SELECT pg_tablespace_location(oid) FROM pg_tablespace WHERE pg_tablespace_location(oid) <> '' ORDER BY 1 LIMIT 1000`)
	if err != nil {
		return nil, fmt.Errorf("pg_tablespace: %w", err)
	}
	locs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("pg_tablespace: %w", err)
	}
	return locs, nil
}

// timing is a counter's time when timed, else why not.
func timing(on bool, setting string) func(ms float64) (uint64, bool, string) {
	return func(ms float64) (uint64, bool, string) {
		if !on {
			return 0, false, setting + " is off"
		}
		return msToNS(ms), true, ""
	}
}

// msToNS converts PostgreSQL's float milliseconds.
func msToNS(ms float64) uint64 {
	if ms <= 0 || math.IsNaN(ms) {
		return 0
	}
	return uint64(math.Round(ms * 1e6))
}

func counter(count, bytes int64, ms float64, t func(float64) (uint64, bool, string)) Counter {
	ns, timed, why := t(ms)
	return Counter{Count: uint64(max(count, 0)), Bytes: uint64(max(bytes, 0)), TimeNS: ns, Timed: timed, NotMeasured: why}
}
