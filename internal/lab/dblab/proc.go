//go:build linux

package dblab

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Password is the monitoring role's password in every lab database.
const Password = "plumbline-lab"

// MonitorUser is the monitoring role the agent connects as.
const MonitorUser = "plumbline"

// run runs a command and returns its combined output; the error carries it.
func run(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, tail(out.String(), 12))
	}
	return out.String(), nil
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// ids returns the uid and gid of user name in the passwd and group files
// under root ("/" for the host).
func ids(root, name string) (uid, gid int, err error) {
	b, err := os.ReadFile(root + "/etc/passwd")
	if err != nil {
		return 0, 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Split(l, ":")
		if len(f) > 3 && f[0] == name {
			uid, err1 := strconv.Atoi(f[2])
			gid, err2 := strconv.Atoi(f[3])
			if err1 != nil || err2 != nil {
				return 0, 0, fmt.Errorf("%s/etc/passwd: bad entry for %s", root, name)
			}
			return uid, gid, nil
		}
	}
	return 0, 0, fmt.Errorf("no user %s in %s/etc/passwd", name, root)
}

// chownTree gives dir (and everything under it) to uid:gid.
func chownTree(ctx context.Context, dir string, uid, gid int) error {
	_, err := run(ctx, "chown", "-R", fmt.Sprintf("%d:%d", uid, gid), dir)
	return err
}

// Load is a running workload process (pgbench, sysbench).
type Load struct {
	cmd  *exec.Cmd
	done chan struct{}
	mu   sync.Mutex
	out  bytes.Buffer
	err  error
}

func startLoad(name string, args ...string) (*Load, error) {
	l := &Load{cmd: exec.Command(name, args...), done: make(chan struct{})}
	w := &lockedWriter{l: l}
	l.cmd.Stdout, l.cmd.Stderr = w, w
	if err := l.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		err := l.cmd.Wait()
		l.mu.Lock()
		l.err = err
		l.mu.Unlock()
		close(l.done)
	}()
	return l, nil
}

type lockedWriter struct{ l *Load }

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.l.mu.Lock()
	defer w.l.mu.Unlock()
	return w.l.out.Write(p)
}

// Stop interrupts the load (its summary is printed on SIGINT) and waits
// up to 20 s for it to exit; it returns the output.
func (l *Load) Stop() string {
	l.cmd.Process.Signal(os.Interrupt)
	select {
	case <-l.done:
	case <-time.After(20 * time.Second):
		l.cmd.Process.Kill()
		<-l.done
	}
	return l.Output()
}

// Wait waits for the load to end by itself and returns its output.
func (l *Load) Wait(ctx context.Context) (string, error) {
	select {
	case <-l.done:
	case <-ctx.Done():
		l.Stop()
		return l.Output(), ctx.Err()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.out.String(), l.err
}

// Exited reports whether the load has ended.
func (l *Load) Exited() bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

// Output is what the load printed so far.
func (l *Load) Output() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.out.String()
}
