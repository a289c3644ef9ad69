//go:build linux

package dblab

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/plumbline/plumbline/internal/vocab"
)

// need skips the test without root or a tool (fails it under CI=true).
func need(t *testing.T, err error) {
	t.Helper()
	if err == nil && os.Geteuid() != 0 {
		err = os.ErrPermission
	}
	if err == nil {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("dblab: %v; CI=true: failing instead of skipping", err)
	}
	t.Skipf("dblab: %v", err)
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// workDir is a directory the databases' users can reach (TempDir's
// parents are mode 0700 under some runners).
func workDir(t *testing.T) string {
	d, err := os.MkdirTemp("/var/tmp", "dblab-test-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(d, 0o755)
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// checkCounted runs load, and checks that the views counted operations
// of the key between two samples, with a time that is not zero.
func checkCounted(t *testing.T, key Key, sample func(context.Context) (Sample, error), load func() (*Load, error)) {
	ctx := context.Background()
	before, err := sample(ctx)
	if err != nil {
		t.Fatal(err)
	}
	l, err := load()
	if err != nil {
		t.Fatal(err)
	}
	out, err := l.Wait(ctx)
	if err != nil {
		t.Fatalf("load: %v\n%s", err, out)
	}
	time.Sleep(1500 * time.Millisecond) // PostgreSQL flushes its statistics at most once a second
	after, err := sample(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := Diff(before, after)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("views over the load: %s", Format(ds))
	for _, d := range ds {
		if d.Key == key {
			if d.Count == 0 || d.Latency() <= 0 {
				t.Fatalf("%s: %d operations, %g s each; want some, timed", key, d.Count, d.Latency())
			}
			return
		}
	}
	t.Fatalf("no %s counter in %s", key, Format(ds))
}

var walSync = Key{vocab.LocationWAL, vocab.DBOpWALSync}

func TestPostgresHost(t *testing.T) {
	_, err := exec.LookPath("pgbench")
	need(t, err)
	// In a memory cgroup where there is one (v1), as the bench runs it.
	var limit int64
	if _, err := os.Stat(memoryV1); err == nil {
		limit = 256 << 20
	}
	p, err := StartPostgres(context.Background(), PostgresConfig{BinDir: "", Data: filepath.Join(workDir(t), "pg"), Port: freePort(t),
		Settings: DefaultPostgresSettings(), MemoryLimit: limit})
	need(t, err)
	t.Cleanup(func() { p.Stop() })
	if limit > 0 {
		b, err := os.ReadFile(filepath.Join(p.cgroup.dir, "cgroup.procs"))
		if err != nil || len(b) == 0 {
			t.Fatalf("the cluster is not in its memory cgroup %s: %q %v", p.cgroup.dir, b, err)
		}
	}
	if err := p.PgbenchInit(context.Background(), "pgbench", 1); err != nil {
		t.Fatal(err)
	}
	checkCounted(t, walSync, p.Sample, func() (*Load, error) { return p.Pgbench("pgbench", 2, 0, 3*time.Second) })
}

func TestPostgresRoot(t *testing.T) {
	tarball := os.Getenv("PLUMBLINE_DBLAB_ROOTFS")
	if tarball == "" {
		tarball = "/var/cache/plumbline-dbbench/trixie-pg17.tar"
	}
	_, err := os.Stat(tarball)
	need(t, err)
	dir := workDir(t)
	data := filepath.Join(dir, "data")
	os.MkdirAll(data, 0o755)
	r, err := OpenRoot(context.Background(), tarball, filepath.Join(dir, "root"), data)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	p, err := StartPostgres(context.Background(), PostgresConfig{Root: r, Data: filepath.Join(data, "pg"), Port: freePort(t), Settings: DefaultPostgresSettings()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop() })
	if p.Version < 16 {
		t.Fatalf("version %d in %s: want pg_stat_io (16+)", p.Version, tarball)
	}
	if err := p.PgbenchInit(context.Background(), "pgbench", 1); err != nil {
		t.Fatal(err)
	}
	checkCounted(t, walSync, p.Sample, func() (*Load, error) { return p.Pgbench("pgbench", 2, 0, 3*time.Second) })
}

func TestMariaDB(t *testing.T) {
	need(t, MariaDBInstalled())
	_, err := exec.LookPath("sysbench")
	need(t, err)
	m, err := StartMariaDB(context.Background(), MariaDBConfig{Data: filepath.Join(workDir(t), "mariadb"), Port: freePort(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Stop() })
	// More rows than the buffer pool holds: reads reach the files
	// (O_DIRECT), and the views time them.
	if err := m.SysbenchPrepare(context.Background(), 1, 60000); err != nil {
		t.Fatal(err)
	}
	if _, err := m.SQL(context.Background(), "SET GLOBAL innodb_buffer_pool_size = 6291456"); err != nil {
		t.Fatal(err)
	}
	checkCounted(t, Key{vocab.LocationData, vocab.DBOpRead}, m.Sample, func() (*Load, error) { return m.Sysbench(2, 0, 3*time.Second, 1, 60000) })
}
