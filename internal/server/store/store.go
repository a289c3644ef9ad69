// Package store is the server's persistence: agents, the records they
// sent, the latest geometry of every volume and every probe result. It
// runs on two engines behind one SQL text — SQLite (modernc.org/sqlite,
// pure Go, the embedded default) and PostgreSQL (pgx) — with the schema
// managed by embedded goose migrations.
//
// Dedup is the database's job: records are keyed by (agent, sequence), so a
// replayed record is recognised and never stored twice, also when several
// server replicas share one PostgreSQL.
//
// The store does not know the wire format: payloads arrive as serialised
// protobuf bytes, and what queries need (verdicts, counts, times) as
// columns the caller extracted.
package store

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	_ "modernc.org/sqlite"             // database/sql driver "sqlite"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Engine names the database engine behind a Store.
type Engine string

const (
	SQLite   Engine = "sqlite"
	Postgres Engine = "postgres"
)

// Sentinel errors, checked with errors.Is.
var (
	// ErrUnknownAgent: the agent has not been registered with UpsertAgent.
	ErrUnknownAgent = errors.New("unknown agent")
	// ErrInvalid: the caller passed something the store cannot hold
	// (a sequence of 0 or above 2^63-1, a sequence twice in one batch, ...).
	ErrInvalid = errors.New("invalid input")
	// ErrDSN: the DSN names no supported engine or is malformed.
	ErrDSN = errors.New("bad store DSN")
)

// sqliteBusyTimeout is how long an SQLite writer waits for another
// connection's write transaction before giving up.
const sqliteBusyTimeout = 10 * time.Second

// Store is an open database. It is safe for concurrent use.
type Store struct {
	db     *sql.DB
	engine Engine
	now    func() time.Time
	// group commits writes together (group.go): every write on SQLite,
	// the agents' writes (write) on PostgreSQL.
	group *committer
	// idleInTx ends (PostgreSQL) the session of an unfenced write
	// transaction left idle this long (boundIdle).
	idleInTx time.Duration
}

// txIdleTimeout is how long an unfenced write transaction of the Store
// may wait for its client's next statement on PostgreSQL: the Store
// sends a transaction's statements back to back, so one idle this long
// belongs to a paused or stuck replica, whose row locks (an agent's row
// in a group commit) would otherwise hold up every other replica's
// writes of those rows, and the connections of their pools, until it
// resumes.
const txIdleTimeout = 5 * time.Second

// Open opens the database a DSN names and brings its schema up to date:
//
//	sqlite:///var/lib/plumbline/plumbline.db   (a file path after "sqlite://")
//	postgres://user:pass@host:5432/db?sslmode=verify-full   (also postgresql://)
//
// SQLite files are opened in WAL mode with a busy timeout, foreign keys on
// and synchronous=FULL (a committed batch survives power loss), and every
// transaction takes the write lock at BEGIN, so concurrent writers queue
// instead of failing. The Store's own writes on SQLite are group-committed
// (see group.go): concurrent batches share one transaction and one fsync.
// On PostgreSQL the agents' batches are group-committed too, by a few
// workers at once.
//
// Connection pool: the Store keeps at most a bounded number of connections
// open (SQLite: sqliteMaxConns; PostgreSQL: 16 by default), however many
// agents call at once; the others wait for one. A PostgreSQL DSN may set
// it with two parameters of the query, which the Store takes out before
// the DSN reaches the driver:
//
//	pool_max_conns=N               connections at most (also idle); default 16, at least 2
//	pool_max_conn_idle_time=DUR    close a connection idle this long (Go duration); default 5m
//
// Every server replica has its own pool: keep replicas × pool_max_conns
// below PostgreSQL's max_connections (default 100).
func Open(ctx context.Context, dsn string) (*Store, error) {
	engine, driver, source, err := parseDSN(dsn)
	if err != nil {
		return nil, err
	}
	shown := redact(dsn)
	pool := defaultPool(engine)
	if engine == Postgres {
		if source, pool, err = poolFromDSN(source); err != nil {
			return nil, fmt.Errorf("%w %q: %w", ErrDSN, shown, err)
		}
	}
	db, err := sql.Open(driver, source)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", shown, err)
	}
	db.SetMaxOpenConns(pool.maxConns)
	db.SetMaxIdleConns(pool.maxConns)
	db.SetConnMaxIdleTime(pool.maxIdleTime)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open store %s: %w", shown, err)
	}
	s := &Store{db: db, engine: engine, now: time.Now, idleInTx: txIdleTimeout}
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open store %s: %w", shown, err)
	}
	switch engine {
	case SQLite:
		s.group = newCommitter(s, 1, false)
	case Postgres:
		s.group = newCommitter(s, min(pgCommitWorkers, pool.maxConns/2), true)
	}
	return s, nil
}

// poolConfig bounds a Store's connection pool.
type poolConfig struct {
	maxConns    int
	maxIdleTime time.Duration
}

const (
	// sqliteMaxConns: one writer at a time (the committer) and readers;
	// every SQLite connection has its own page cache (cache_size), so a
	// burst of reads (thousands of agents saying Hello after a restart)
	// must not open one connection each.
	sqliteMaxConns = 8
	// pgDefaultMaxConns: pgCommitWorkers committing groups, the rest for
	// reads (Hello's high-water mark, the API, the exporter).
	pgDefaultMaxConns  = 16
	defaultMaxIdleTime = 5 * time.Minute
)

func defaultPool(engine Engine) poolConfig {
	if engine == SQLite {
		return poolConfig{maxConns: sqliteMaxConns, maxIdleTime: defaultMaxIdleTime}
	}
	return poolConfig{maxConns: pgDefaultMaxConns, maxIdleTime: defaultMaxIdleTime}
}

// poolFromDSN takes the pool parameters (pool_max_conns,
// pool_max_conn_idle_time) out of a PostgreSQL DSN: the driver would send
// them to the server as run-time parameters, which it refuses.
func poolFromDSN(dsn string) (string, poolConfig, error) {
	pool := defaultPool(Postgres)
	u, err := url.Parse(dsn)
	if err != nil {
		return "", pool, err
	}
	q := u.Query()
	if v, ok := q["pool_max_conns"]; ok {
		n, err := strconv.Atoi(v[len(v)-1])
		if err != nil || n < 2 {
			return "", pool, fmt.Errorf("pool_max_conns %q: want a whole number, at least 2", v[len(v)-1])
		}
		pool.maxConns = n
		q.Del("pool_max_conns")
	}
	if v, ok := q["pool_max_conn_idle_time"]; ok {
		d, err := time.ParseDuration(v[len(v)-1])
		if err != nil || d < 0 {
			return "", pool, fmt.Errorf("pool_max_conn_idle_time %q: want a duration such as 5m (0: never closed)", v[len(v)-1])
		}
		pool.maxIdleTime = d
		q.Del("pool_max_conn_idle_time")
	}
	if len(q) == len(u.Query()) {
		return dsn, pool, nil // nothing taken out: the DSN as given
	}
	u.RawQuery = q.Encode()
	return u.String(), pool, nil
}

// Close finishes the group commit in progress, if any, and closes the
// database.
func (s *Store) Close() error {
	if s.group != nil {
		s.group.stop()
	}
	return s.db.Close()
}

// Engine reports which engine the store runs on.
func (s *Store) Engine() Engine { return s.engine }

func parseDSN(dsn string) (engine Engine, driver, source string, err error) {
	scheme, rest, ok := strings.Cut(dsn, "://")
	if !ok {
		return "", "", "", fmt.Errorf("%w %q: want sqlite:///path/to/file.db or postgres://...", ErrDSN, redact(dsn))
	}
	switch scheme {
	case "sqlite":
		path := rest
		if path == "" {
			return "", "", "", fmt.Errorf("%w %q: no file path after sqlite://", ErrDSN, dsn)
		}
		if strings.ContainsAny(path, "?#") || strings.HasPrefix(path, "file:") || path == ":memory:" {
			return "", "", "", fmt.Errorf("%w %q: want a plain file path after sqlite:// (no query, no :memory:)", ErrDSN, dsn)
		}
		q := url.Values{}
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "busy_timeout("+strconv.FormatInt(sqliteBusyTimeout.Milliseconds(), 10)+")")
		q.Add("_pragma", "foreign_keys(1)")
		q.Add("_pragma", "synchronous(FULL)")
		// Group commits (group.go) write many pages per transaction: a page
		// cache that holds them (32 MiB rather than 2) keeps SQLite from
		// spilling mid-transaction, and temporary files (a savepoint's
		// sub-journal) stay in memory.
		q.Add("_pragma", "cache_size(-32768)")
		q.Add("_pragma", "temp_store(MEMORY)")
		q.Set("_txlock", "immediate")
		return SQLite, "sqlite", path + "?" + q.Encode(), nil
	case "postgres", "postgresql":
		if _, err := url.Parse(dsn); err != nil {
			return "", "", "", fmt.Errorf("%w %q: %w", ErrDSN, redact(dsn), err)
		}
		return Postgres, "pgx", dsn, nil
	default:
		return "", "", "", fmt.Errorf("%w %q: engine %q is not supported (want sqlite or postgres)", ErrDSN, redact(dsn), scheme)
	}
}

// redact hides a password in a DSN for error messages.
func redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.User == nil {
		if err != nil && strings.Contains(dsn, "@") {
			return "(unparsable DSN)"
		}
		return dsn
	}
	return u.Redacted()
}

// provider is goose over the embedded migrations, for this engine.
func (s *Store) provider() (*goose.Provider, error) {
	dialect := goose.DialectSQLite3
	var opts []goose.ProviderOption
	if s.engine == Postgres {
		dialect = goose.DialectPostgres
		// Several server replicas may start at once against one database:
		// a session advisory lock makes them migrate one after another.
		locker, err := lock.NewPostgresSessionLocker()
		if err != nil {
			return nil, err
		}
		opts = append(opts, goose.WithSessionLocker(locker))
	}
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return nil, err
	}
	opts = append(opts, goose.WithGoMigrations(s.kindsMigration()))
	return goose.NewProvider(dialect, s.db, sub, opts...)
}

func (s *Store) migrate(ctx context.Context) error {
	p, err := s.provider()
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	return nil
}

// SchemaVersion returns the version of the last migration applied.
func (s *Store) SchemaVersion(ctx context.Context) (int64, error) {
	p, err := s.provider()
	if err != nil {
		return 0, fmt.Errorf("schema version: %w", err)
	}
	v, err := p.GetDBVersion(ctx)
	if err != nil {
		return 0, fmt.Errorf("schema version: %w", err)
	}
	return v, nil
}

// q rewrites the one SQL text for the engine: "?" placeholders become
// "$1", "$2", ... for PostgreSQL. The store's SQL has no "?" inside string
// literals, so a plain scan is enough.
func (s *Store) q(query string) string {
	if s.engine != Postgres {
		return query
	}
	var b strings.Builder
	b.Grow(len(query) + 16)
	n := 0
	for i := 0; i < len(query); i++ {
		if query[i] == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(query[i])
	}
	return b.String()
}

// unixNano is t in Unix nanoseconds, 0 for the zero time, clamped to the
// nanoseconds an int64 holds (years 1678–2262), where UnixNano's result
// is undefined: a certificate may say 9999-12-31 (RFC 5280's "no
// expiry"), an agent's clock anything.
func unixNano(t time.Time) int64 {
	lo, hi := time.Unix(0, math.MinInt64+1), time.Unix(0, math.MaxInt64)
	switch {
	case t.IsZero():
		return 0
	case t.Before(lo):
		return lo.UnixNano()
	case t.After(hi):
		return hi.UnixNano()
	}
	return t.UnixNano()
}

// fromUnixNano is the inverse of unixNano (UTC).
func fromUnixNano(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}
