package dbio

import (
	"context"
	"database/sql"
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"

	drv "github.com/go-sql-driver/mysql"

	"github.com/plumbline/plumbline/internal/vocab"
)

// MaxFiles is how many of MySQL's files one sample reads: the busiest,
// when it counts more.
const MaxFiles = 10000

// mysql samples a MySQL or MariaDB server over one held connection. Every
// sample is one read-only transaction of four statements: settings, the
// uptime, the file instruments' settings and the file summary.
type mysql struct {
	c        Config
	password func() (string, error)
	now      func() time.Time
	db       *sql.DB
	conn     *sql.Conn
}

// mysqlConfig is the driver configuration of a MySQL or MariaDB source.
func mysqlConfig(c Config, password string) *drv.Config {
	cfg := drv.NewConfig()
	cfg.User, cfg.Passwd = c.User, password
	cfg.Net, cfg.Addr = "tcp", c.Address
	if strings.HasPrefix(c.Address, "/") {
		cfg.Net = "unix"
	}
	cfg.Timeout, cfg.ReadTimeout, cfg.WriteTimeout = c.Timeout, c.Timeout, c.Timeout
	return cfg
}

func (m *mysql) close() {
	if m.conn != nil {
		m.conn.Close()
		m.conn = nil
	}
	if m.db != nil {
		m.db.Close()
		m.db = nil
	}
}

// connect opens the held connection and bounds its statements' run time
// (MariaDB's max_statement_time, MySQL's max_execution_time).
func (m *mysql) connect(ctx context.Context) error {
	pw, err := m.password()
	if err != nil {
		return err
	}
	conn, err := drv.NewConnector(mysqlConfig(m.c, pw))
	if err != nil {
		return fmt.Errorf("mysql connection settings: %w", err)
	}
	m.db = sql.OpenDB(conn)
	m.db.SetMaxOpenConns(1)
	m.db.SetMaxIdleConns(1)
	if m.conn, err = m.db.Conn(ctx); err != nil {
		m.close()
		return fmt.Errorf("connect: %w", err)
	}
	var version string
	if err := m.conn.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		m.close()
		return fmt.Errorf("connect: %w", err)
	}
	limit := "SET SESSION max_execution_time = " + strconv.FormatInt(m.c.Timeout.Milliseconds(), 10)
	if strings.Contains(strings.ToLower(version), "mariadb") {
		limit = "SET SESSION max_statement_time = " + strconv.FormatFloat(m.c.Timeout.Seconds(), 'f', 3, 64)
	}
	if _, err := m.conn.ExecContext(ctx, limit); err != nil {
		m.close()
		return fmt.Errorf("connect: %s: %w", limit, err)
	}
	return nil
}

// sample reads one sample; on an error the connection is closed, and the
// next sample connects again.
func (m *mysql) sample(ctx context.Context) (Sample, error) {
	if m.conn == nil {
		if err := m.connect(ctx); err != nil {
			return Sample{}, err
		}
	}
	tx, err := m.conn.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		m.close()
		return Sample{}, fmt.Errorf("begin read-only transaction: %w", err)
	}
	s, err := m.read(ctx, tx)
	tx.Rollback() // read only: nothing to commit
	if err != nil {
		m.close()
		return Sample{}, err
	}
	return s, nil
}

func (m *mysql) read(ctx context.Context, tx *sql.Tx) (Sample, error) {
	var version, dataDir string
	var psOn int
	if err := tx.QueryRowContext(ctx, "SELECT VERSION(), @@datadir, @@performance_schema").Scan(&version, &dataDir, &psOn); err != nil {
		return Sample{}, fmt.Errorf("settings: %w", err)
	}
	var name string
	var uptime int64
	if err := tx.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE 'Uptime'").Scan(&name, &uptime); err != nil {
		return Sample{}, fmt.Errorf("uptime: %w", err)
	}
	now := m.now()
	s := Sample{Engine: vocab.EngineMySQL, Version: version, At: now, Started: now.Add(-time.Duration(uptime) * time.Second).Truncate(time.Second)}
	if strings.Contains(strings.ToLower(version), "mariadb") {
		s.Engine = vocab.EngineMariaDB
	}
	if psOn == 0 {
		s.Unknown = append(s.Unknown, Unknown{Field: "performance_schema", Reason: "off: set performance_schema = ON in the server's configuration and restart it"})
		return s, nil
	}
	timed, err := mysqlInstruments(ctx, tx, &s)
	if err != nil {
		return Sample{}, err
	}
	if err := mysqlFiles(ctx, tx, &s, mysqlDir(dataDir), timed); err != nil {
		return Sample{}, err
	}
	s.At = m.now()
	return s, nil
}

// mysqlDir is @@datadir without its trailing slash.
func mysqlDir(d string) string {
	if len(d) > 1 {
		return strings.TrimRight(d, `/\`)
	}
	return d
}

// mysqlInstruments reads which file instruments are timed; the disabled
// ones are named in s.Unknown (their files are not counted).
func mysqlInstruments(ctx context.Context, tx *sql.Tx, s *Sample) (map[string]bool, error) {
	rows, err := tx.QueryContext(ctx, "SELECT NAME, ENABLED, TIMED FROM performance_schema.setup_instruments WHERE NAME LIKE 'wait/io/file/%'")
	if err != nil {
		return nil, fmt.Errorf("performance_schema.setup_instruments: %w", err)
	}
	defer rows.Close()
	timed := map[string]bool{}
	var disabled []string
	redo := false
	for rows.Next() {
		var name, enabled string
		var isTimed sql.NullString // MySQL 8: NULL for instruments it never times
		if err := rows.Scan(&name, &enabled, &isTimed); err != nil {
			return nil, fmt.Errorf("performance_schema.setup_instruments: %w", err)
		}
		timed[name] = enabled == "YES" && isTimed.String == "YES"
		redo = redo || strings.HasSuffix(name, "/innodb_log_file")
		if enabled != "YES" && mysqlLogEvent(name) != "" {
			disabled = append(disabled, name)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("performance_schema.setup_instruments: %w", err)
	}
	if !redo {
		s.Unknown = append(s.Unknown, Unknown{Field: "innodb_log_file", Reason: "the server has no performance_schema instrument for the InnoDB redo log (MariaDB 10.8 and later): the redo log's writes and syncs are not measured"})
	}
	if len(disabled) > 0 {
		s.Unknown = append(s.Unknown, Unknown{Field: "setup_instruments", Reason: "disabled, their files are not counted: " + strings.Join(disabled, ", ")})
	}
	return timed, nil
}

// mysqlLogEvent is the location of a log's file instrument (redo, binary
// and relay logs: wal), "" for the others.
func mysqlLogEvent(event string) vocab.DatabaseLocation {
	switch {
	case strings.HasSuffix(event, "/innodb_log_file"),
		strings.HasPrefix(event, "wait/io/file/sql/binlog"),
		strings.HasPrefix(event, "wait/io/file/sql/relaylog"):
		return vocab.LocationWAL
	}
	return ""
}

const mysqlFileSummary = `SELECT FILE_NAME, EVENT_NAME, COUNT_READ, SUM_TIMER_READ, SUM_NUMBER_OF_BYTES_READ,
  COUNT_WRITE, SUM_TIMER_WRITE, SUM_NUMBER_OF_BYTES_WRITE, COUNT_MISC, SUM_TIMER_MISC
FROM performance_schema.file_summary_by_instance
WHERE COUNT_READ + COUNT_WRITE > 0
ORDER BY COUNT_READ + COUNT_WRITE DESC LIMIT ` + "10001"

// mysqlFiles reads the files' counters into one set per file.
func mysqlFiles(ctx context.Context, tx *sql.Tx, s *Sample, dataDir string, timed map[string]bool) error {
	rows, err := tx.QueryContext(ctx, mysqlFileSummary)
	if err != nil {
		return fmt.Errorf("performance_schema.file_summary_by_instance: %w", err)
	}
	defer rows.Close()
	byFile := map[Location]int{}
	for rows.Next() {
		var file, event string
		var reads, readPS, readBytes, writes, writePS, writeBytes, misc, miscPS uint64
		if err := rows.Scan(&file, &event, &reads, &readPS, &readBytes, &writes, &writePS, &writeBytes, &misc, &miscPS); err != nil {
			return fmt.Errorf("performance_schema.file_summary_by_instance: %w", err)
		}
		if len(byFile) == MaxFiles {
			s.Truncated = true
			break
		}
		loc := Location{Kind: mysqlLocation(file, event, dataDir), Path: file}
		i, ok := byFile[loc]
		if !ok {
			i = len(s.Sets)
			byFile[loc] = i
			s.Sets = append(s.Sets, Set{Location: loc, File: true, FromZero: true, Ops: map[vocab.DatabaseOp]Counter{}})
		}
		t := mysqlTiming(timed[event], event)
		write := vocab.DBOpWrite
		if loc.Kind == vocab.LocationWAL {
			write = vocab.DBOpWALWrite
		}
		add(&s.Sets[i], vocab.DBOpRead, mysqlCounter(reads, readBytes, readPS, t))
		add(&s.Sets[i], write, mysqlCounter(writes, writeBytes, writePS, t))
		if op := mysqlSyncOp(event); op != "" {
			add(&s.Sets[i], op, mysqlCounter(misc, 0, miscPS, t))
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("performance_schema.file_summary_by_instance: %w", err)
	}
	if s.Truncated {
		s.Unknown = append(s.Unknown, Unknown{Field: "file_summary_by_instance", Reason: fmt.Sprintf("more than %d files did I/O: the %d busiest are counted", MaxFiles, MaxFiles)})
		for i := range s.Sets {
			s.Sets[i].FromZero = false // the busiest change: a file new to the list is not new
		}
	}
	return nil
}

// mysqlLocation classifies a file: a log (wal) by its instrument, else
// data inside the data directory and file outside it.
func mysqlLocation(file, event, dataDir string) vocab.DatabaseLocation {
	if l := mysqlLogEvent(event); l != "" {
		return l
	}
	f := strings.ReplaceAll(file, `\`, "/")
	d := strings.ReplaceAll(dataDir, `\`, "/")
	if d != "" && (strings.HasPrefix(f, strings.TrimSuffix(d, "/")+"/") || path.Dir(f) == d) {
		return vocab.LocationData
	}
	return vocab.LocationFile
}

// mysqlSyncOp is the op a file's "misc" operations are counted as, for
// the instruments whose files are opened once and kept open, so that
// their misc operations are their syncs: MySQL's redo log's (wal-sync,
// the commit's wait) and InnoDB's data files' (fsync). The other files'
// misc operations (open, close, stat, seek and sync mixed; the binary
// log's are syncs only with sync_binlog) are not reported.
func mysqlSyncOp(event string) vocab.DatabaseOp {
	switch {
	case strings.HasSuffix(event, "/innodb_log_file"):
		return vocab.DBOpWALSync
	case strings.HasSuffix(event, "/innodb_data_file"):
		return vocab.DBOpFsync
	}
	return ""
}

type mysqlTimed struct {
	on  bool
	why string
}

func mysqlTiming(on bool, event string) mysqlTimed {
	return mysqlTimed{on: on, why: event + " is not timed (performance_schema.setup_instruments)"}
}

// mysqlCounter converts MySQL's picoseconds.
func mysqlCounter(count, bytes, ps uint64, t mysqlTimed) Counter {
	c := Counter{Count: count, Bytes: bytes}
	if t.on {
		c.Timed, c.TimeNS = true, ps/1000
	} else {
		c.NotMeasured = t.why
	}
	return c
}
