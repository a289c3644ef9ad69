// Package pgtest gives tests a real PostgreSQL: a throwaway cluster started
// from the Debian binaries (initdb, pg_ctl) in a temporary directory on a
// free loopback port, or the server PLUMBLINE_TEST_POSTGRES_DSN names. Each
// test gets a database of its own.
//
// Test support only: no non-test code may import it.
//
// Without PostgreSQL the tests that need it skip with the reason, except
// under CI=true, where they fail: nothing may skip in CI.
package pgtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
)

// EnvDSN names an existing server to use instead of starting one. Its role
// must be allowed to create databases.
const EnvDSN = "PLUMBLINE_TEST_POSTGRES_DSN"

var (
	mu      sync.Mutex
	cluster *server // started once per test binary, stopped by Stop
	baseDSN string  // the server's maintenance DSN
	failure error   // why no server is available
	tried   bool
)

type server struct {
	dir    string
	data   string
	pgCtl  string
	runAs  []string // command prefix that runs as the cluster's owner
	logged string
}

// DSN returns the DSN of a fresh, empty database for this test, dropped
// when the test ends. Without PostgreSQL it skips the test (fails it under
// CI=true).
func DSN(tb testing.TB) string {
	tb.Helper()
	mu.Lock()
	if !tried {
		tried = true
		baseDSN, failure = start()
	}
	base, err := baseDSN, failure
	mu.Unlock()
	if err != nil {
		unavailable(tb, err)
	}

	name := "plumbline_test_" + randomHex(6)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := sql.Open("pgx", base)
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	defer admin.Close()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		tb.Fatalf("pgtest: create database %s: %v", name, err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		admin, err := sql.Open("pgx", base)
		if err != nil {
			tb.Errorf("pgtest: %v", err)
			return
		}
		defer admin.Close()
		if _, err := admin.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			tb.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	u.Path = "/" + name
	return u.String()
}

// Stop stops the cluster DSN started, if any, and removes its directory.
// Call it from TestMain after m.Run.
func Stop() {
	mu.Lock()
	defer mu.Unlock()
	if cluster == nil {
		return
	}
	c := cluster
	cluster = nil
	cmd := exec.Command(c.runAs[0], append(c.runAs[1:], c.pgCtl, "stop", "-D", c.data, "-m", "fast", "-w")...)
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: pg_ctl stop: %v\n%s", err, out)
	}
	os.RemoveAll(c.dir)
}

func unavailable(tb testing.TB, err error) {
	tb.Helper()
	msg := fmt.Sprintf("no PostgreSQL for this test: %v (install Debian's postgresql package, or set %s)", err, EnvDSN)
	if os.Getenv("CI") == "true" {
		tb.Fatal(msg + "; CI=true: failing instead of skipping")
	}
	tb.Skip(msg)
}

func start() (string, error) {
	if dsn := os.Getenv(EnvDSN); dsn != "" {
		return dsn, ping(dsn)
	}
	bin, err := findBinDir()
	if err != nil {
		return "", err
	}
	var runAs []string
	owner := ""
	if os.Geteuid() == 0 {
		// initdb refuses to run as root: run the cluster as the postgres user.
		u, err := user.Lookup("postgres")
		if err != nil {
			return "", fmt.Errorf("running as root and there is no postgres user to own the cluster: %w", err)
		}
		owner = u.Username
		runner, err := exec.LookPath("runuser")
		if err != nil {
			return "", fmt.Errorf("running as root and runuser is missing: %w", err)
		}
		runAs = []string{runner, "-u", owner, "--"}
	} else {
		runAs = []string{"env"}
	}

	dir, err := os.MkdirTemp("", "plumbline-pgtest-")
	if err != nil {
		return "", err
	}
	if owner != "" {
		u, _ := user.Lookup(owner)
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return "", err
		}
	}
	s := &server{dir: dir, data: filepath.Join(dir, "data"), pgCtl: filepath.Join(bin, "pg_ctl"), runAs: runAs, logged: filepath.Join(dir, "postgres.log")}
	run := func(name string, args ...string) error {
		cmd := exec.Command(runAs[0], append(append(runAs[1:], filepath.Join(bin, name)), args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %w\n%s", name, err, out)
		}
		return nil
	}
	if err := run("initdb", "-D", s.data, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C"); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	// A free port can be taken between the probe and the start: retry.
	var lastErr error
	for range 3 {
		port, err := freePort()
		if err != nil {
			os.RemoveAll(dir)
			return "", err
		}
		opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s -c max_connections=200", port, dir)
		if err := run("pg_ctl", "start", "-D", s.data, "-l", s.logged, "-w", "-t", "60", "-o", opts); err != nil {
			lastErr = fmt.Errorf("%w\n%s", err, tail(s.logged))
			continue
		}
		dsn := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
		if err := ping(dsn); err != nil {
			lastErr = err
			run("pg_ctl", "stop", "-D", s.data, "-m", "immediate", "-w")
			continue
		}
		cluster = s
		return dsn, nil
	}
	os.RemoveAll(dir)
	return "", lastErr
}

// findBinDir finds initdb and pg_ctl: on PATH, else in the newest
// /usr/lib/postgresql/*/bin (Debian keeps them off PATH).
func findBinDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		dir := filepath.Dir(p)
		if _, err := os.Stat(filepath.Join(dir, "pg_ctl")); err == nil {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", errors.New("initdb and pg_ctl not found on PATH or under /usr/lib/postgresql/*/bin")
}

func version(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func ping(dsn string) error {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		return fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	return nil
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 10 {
		lines = lines[len(lines)-10:]
	}
	return strings.Join(lines, "\n")
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
