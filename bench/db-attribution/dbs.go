//go:build linux

package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/plumbline/plumbline/internal/lab/dblab"
	"github.com/plumbline/plumbline/internal/vocab"
)

// database is one database under test, on its own lab array.
type database struct {
	name   string
	engine vocab.DatabaseEngine
	array  int    // index of its array in the stack
	mount  string // the array's mount point
	port   int
	sample func(context.Context) (dblab.Sample, error)
	// load starts the workload: clients connections, rate transactions a
	// second in all, for d.
	load func(clients int, rate float64, d time.Duration) (*dblab.Load, error)
	tps  func(out string) float64
	rate float64 // the base load's transactions a second
	stop func() error

	mu      sync.Mutex
	hist    dblab.History
	current *dblab.Load
}

// setLoad replaces the running workload with clients × rate.
func (d *database) setLoad(clients int, rate float64) error {
	d.mu.Lock()
	old := d.current
	d.current = nil
	d.mu.Unlock()
	if old != nil {
		old.Stop()
	}
	l, err := d.load(clients, rate, 24*time.Hour)
	if err != nil {
		return err
	}
	d.mu.Lock()
	d.current = l
	d.mu.Unlock()
	return nil
}

// loadExited returns the output of a workload that ended by itself.
func (d *database) loadExited() (string, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.current != nil && d.current.Exited() {
		return d.current.Output(), true
	}
	return "", false
}

func (d *database) stopLoad() {
	d.mu.Lock()
	l := d.current
	d.current = nil
	d.mu.Unlock()
	if l != nil {
		l.Stop()
	}
}

// sampleEvery reads the database's views every period into its history
// until ctx ends.
func (d *database) sampleEvery(ctx context.Context, period time.Duration, logf func(string, ...any)) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		s, err := d.sample(ctx)
		if err == nil {
			d.mu.Lock()
			d.hist.Add(s)
			d.mu.Unlock()
		} else if ctx.Err() == nil {
			logf("%s: views: %v", d.name, err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// over returns the views' deltas over [from, to].
func (d *database) over(from, to time.Time) ([]dblab.Delta, time.Duration, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.hist.Over(from, to)
}

// bracket returns the views' deltas that bracket [from, to]
// (dblab.History.Bracket).
func (d *database) bracket(from, to time.Time, guard time.Duration) (inner, outer []dblab.Delta, ok bool, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.hist.Bracket(from, to, guard)
}

// setup is what starting the databases needs.
type setup struct {
	dir      string // work directory
	rootfs   string // the trixie PostgreSQL 17 tarball
	pgbench  string
	scale    int   // pgbench's scale factor
	pgMemory int64 // PostgreSQL's memory cgroup limit (0: none)
	sbTables int
	sbRows   int
	every    time.Duration // the agent's database sampling interval
	logf     func(string, ...any)
}

// startDatabases starts PostgreSQL 15 (host), PostgreSQL 17 (trixie root,
// chroot) and MariaDB on the mounts, loads their data, and returns the
// databases and the agent's databases: YAML.
func startDatabases(ctx context.Context, st setup, mounts []string) (dbs []*database, yaml string, closeAll func(), err error) {
	var closers []func()
	closeAll = func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	defer func() {
		if err != nil {
			closeAll()
			closeAll = nil
		}
	}()
	pass := filepath.Join(st.dir, "db.password")
	if err := os.WriteFile(pass, []byte(dblab.Password+"\n"), 0o600); err != nil {
		return nil, "", closeAll, err
	}
	pg15, err := startPG(ctx, st, nil, "pg15", 0, mounts[0])
	if err != nil {
		return nil, "", closeAll, err
	}
	closers = append(closers, func() { pg15.stop() })
	root, err := dblab.OpenRoot(ctx, st.rootfs, filepath.Join(st.dir, "trixie"), mounts[1])
	if err != nil {
		return nil, "", closeAll, err
	}
	closers = append(closers, func() { root.Close() })
	pg17, err := startPG(ctx, st, root, "pg17", 1, mounts[1])
	if err != nil {
		return nil, "", closeAll, err
	}
	closers = append(closers, func() { pg17.stop() })
	maria, err := startMaria(ctx, st, mounts[2])
	if err != nil {
		return nil, "", closeAll, err
	}
	closers = append(closers, func() { maria.stop() })
	dbs = []*database{pg15, pg17, maria}
	return dbs, agentYAML(dbs, pass, st.every), closeAll, nil
}

// agentYAML is the agent's databases: key for dbs.
func agentYAML(dbs []*database, passwordFile string, every time.Duration) string {
	var b strings.Builder
	b.WriteString("databases:\n")
	for _, d := range dbs {
		fmt.Fprintf(&b, "  - name: %s\n    engine: %s\n    address: \"127.0.0.1:%d\"\n    user: %s\n    password_file: %q\n    every: %s\n",
			d.name, d.engine, d.port, dblab.MonitorUser, passwordFile, every)
	}
	return b.String()
}

func startPG(ctx context.Context, st setup, root *dblab.Root, name string, array int, mount string) (*database, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	// A memory cgroup smaller than the data: reads reach the array, as on
	// a host whose database outgrows its memory.
	p, err := dblab.StartPostgres(ctx, dblab.PostgresConfig{Root: root, Data: filepath.Join(mount, name), Port: port,
		Settings: dblab.DefaultPostgresSettings(), MemoryLimit: st.pgMemory})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	st.logf("%s: PostgreSQL %d on %s (port %d); pgbench -i -s %d", name, p.Version, p.Data(), port, st.scale)
	if err := p.PgbenchInit(ctx, st.pgbench, st.scale); err != nil {
		p.Stop()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &database{
		name: name, engine: vocab.EnginePostgreSQL, array: array, mount: mount, port: port, sample: p.Sample,
		load: func(clients int, rate float64, d time.Duration) (*dblab.Load, error) {
			return p.Pgbench(st.pgbench, clients, rate, d)
		},
		tps: dblab.TPS, rate: 20, stop: p.Stop,
	}, nil
}

func startMaria(ctx context.Context, st setup, mount string) (*database, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	// A buffer pool smaller than the tables: reads reach the data files
	// (O_DIRECT, the lab array).
	m, err := dblab.StartMariaDB(ctx, dblab.MariaDBConfig{Data: filepath.Join(mount, "mariadb"), Port: port,
		Extra: []string{"--innodb-buffer-pool-size=16M"}})
	if err != nil {
		return nil, fmt.Errorf("mariadb: %w", err)
	}
	st.logf("mariadb: on %s (port %d); sysbench prepare %d × %d rows", m.Data(), port, st.sbTables, st.sbRows)
	if err := m.SysbenchPrepare(ctx, st.sbTables, st.sbRows); err != nil {
		m.Stop()
		return nil, err
	}
	return &database{
		name: "mariadb", engine: vocab.EngineMariaDB, array: 2, mount: mount, port: port, sample: m.Sample,
		load: func(clients int, rate float64, d time.Duration) (*dblab.Load, error) {
			return m.Sysbench(clients, rate, d, st.sbTables, st.sbRows)
		},
		tps: dblab.SysbenchTPS, rate: 3, stop: m.Stop,
	}, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
