//go:build linux

// Package mariadbtest gives tests a real MariaDB (or MySQL): a private
// server created with the host's mariadb-install-db and started with
// mariadbd in a temporary directory, performance_schema on, listening on
// a Unix socket and a free loopback port. One server per test binary,
// started at the first Start and stopped by Stop.
//
// Test support only: no non-test code may import it.
//
// Without the binaries the tests that need it skip with the reason, except
// under CI=true, where they fail: nothing may skip in CI.
package mariadbtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	drv "github.com/go-sql-driver/mysql"
)

// Server is the running server. Root connects over the socket without a
// password.
type Server struct {
	Dir    string // the temporary directory
	Data   string // the data directory (@@datadir)
	Socket string
	Port   int
	cmd    *exec.Cmd
	done   chan error
	log    string
}

var (
	mu      sync.Mutex
	running *Server
	failure error
	tried   bool
)

// Start returns the binary's server, starting it at the first call.
// Without MariaDB it skips the test (fails it under CI=true).
func Start(tb testing.TB) *Server {
	tb.Helper()
	mu.Lock()
	defer mu.Unlock()
	if !tried {
		tried = true
		running, failure = start()
	}
	if failure != nil {
		msg := fmt.Sprintf("no MariaDB for this test: %v (apt-get install -y mariadb-server)", failure)
		if os.Getenv("CI") == "true" {
			tb.Fatal(msg + "; CI=true: failing instead of skipping")
		}
		tb.Skip(msg)
	}
	return running
}

// Stop stops the server Start started, if any, and removes its directory.
// Call it from TestMain after m.Run.
func Stop() {
	mu.Lock()
	defer mu.Unlock()
	if running == nil {
		return
	}
	s := running
	running = nil
	s.cmd.Process.Signal(syscall.SIGTERM) // mariadbd shuts down cleanly on SIGTERM
	select {
	case <-s.done:
	case <-time.After(time.Minute):
		s.cmd.Process.Kill()
		<-s.done
	}
	os.RemoveAll(s.Dir)
}

// Root is a connection pool as root over the socket.
func (s *Server) Root(tb testing.TB) *sql.DB {
	tb.Helper()
	db, err := s.open("root", "")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

func (s *Server) open(user, password string) (*sql.DB, error) {
	cfg := drv.NewConfig()
	cfg.User, cfg.Passwd, cfg.Net, cfg.Addr = user, password, "unix", s.Socket
	cfg.MultiStatements = true
	c, err := drv.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(c), nil
}

func start() (*Server, error) {
	install, err := exec.LookPath("mariadb-install-db")
	if err != nil {
		install, err = exec.LookPath("mysql_install_db")
	}
	if err != nil {
		return nil, errors.New("mariadb-install-db is not on PATH")
	}
	server := "/usr/sbin/mariadbd"
	if _, err := os.Stat(server); err != nil {
		if server, err = exec.LookPath("mariadbd"); err != nil {
			return nil, errors.New("mariadbd not found")
		}
	}
	dir, err := os.MkdirTemp("", "plumbline-mariadbtest-")
	if err != nil {
		return nil, err
	}
	s := &Server{Dir: dir, Data: filepath.Join(dir, "data"), Socket: filepath.Join(dir, "mysqld.sock"), log: filepath.Join(dir, "error.log")}
	owner, err := chownTo(dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	out, err := exec.Command(install, "--no-defaults", "--datadir="+s.Data, "--user="+owner,
		"--auth-root-authentication-method=normal", "--skip-test-db").CombinedOutput()
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("mariadb-install-db: %w\n%s", err, out)
	}
	if s.Port, err = freePort(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s.cmd = exec.Command(server, "--no-defaults", "--datadir="+s.Data, "--socket="+s.Socket, "--port="+strconv.Itoa(s.Port),
		"--bind-address=127.0.0.1", "--user="+owner, "--log-error="+s.log, "--pid-file="+filepath.Join(dir, "mysqld.pid"),
		"--performance-schema=ON", "--innodb-buffer-pool-size=16M", "--log-bin="+filepath.Join(s.Data, "binlog"), "--server-id=1",
		"--skip-name-resolve")
	s.done = make(chan error, 1)
	if err := s.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	go func() { s.done <- s.cmd.Wait() }()
	if err := s.ready(); err != nil {
		s.cmd.Process.Kill()
		<-s.done
		log, _ := os.ReadFile(s.log)
		os.RemoveAll(dir)
		return nil, fmt.Errorf("%w\n%s", err, tail(string(log)))
	}
	return s, nil
}

// ready polls until root can connect.
func (s *Server) ready() error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		db, err := s.open("root", "")
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err = db.PingContext(ctx)
			cancel()
			db.Close()
		}
		if err == nil {
			return nil
		}
		select {
		case werr := <-s.done:
			s.done <- werr
			return fmt.Errorf("mariadbd exited: %v", werr)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("mariadbd did not answer in 2 minutes: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// chownTo gives dir to the mysql user when running as root (mariadbd
// refuses to run as root) and says whom the server runs as.
func chownTo(dir string) (string, error) {
	me, err := user.Current()
	if err != nil {
		return "", err
	}
	if os.Geteuid() != 0 {
		return me.Username, nil
	}
	u, err := user.Lookup("mysql")
	if err != nil {
		return "", fmt.Errorf("running as root and there is no mysql user to run the server: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(dir, uid, gid); err != nil {
		return "", err
	}
	return u.Username, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func tail(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	return strings.Join(lines, "\n")
}
