//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/plumbline/plumbline/internal/agent/config"
	"github.com/plumbline/plumbline/internal/lab/raidlab"
)

// array is one lab array of the run: a trial (one member faulted) or a
// control (never faulted).
type array struct {
	idx    int
	lab    *raidlab.Lab
	mnt    string
	trial  *trial // nil: a control
	load   *loader
	geo    raidlab.Geometry
	shapes string
	// ctrlNamed are the members of a control array the judge named.
	ctrlNamed map[int]bool
}

// stack is the run's arrays, server and agent.
type stack struct {
	cfg     cfg
	arrays  []*array
	webAddr string
	tree    string

	mu    sync.Mutex
	procs []*proc
}

type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	log  *bytes.Buffer
}

// startArray builds one lab array with member devices in the shared tree,
// ext4 on the whole array device (md arrays are seldom partitioned), and
// mounts it.
func (s *stack) startArray(ctx context.Context, i int, g raidlab.Geometry, p raidlab.Preset) (*array, error) {
	l, err := raidlab.Start(ctx, raidlab.Config{
		Geometry: g, Preset: p, Seed: s.cfg.seed + uint64(i), MemberDevices: true, TreeRoot: s.tree,
		StateRoot: filepath.Join(s.cfg.dir, "state"), DataRoot: filepath.Join(s.cfg.dir, "data"),
	})
	if err != nil {
		return nil, err
	}
	a := &array{idx: i, lab: l, geo: g, mnt: filepath.Join(s.cfg.dir, "mnt", fmt.Sprintf("array%d", i)), ctrlNamed: map[int]bool{}}
	s.arrays = append(s.arrays, a)
	if out, err := exec.CommandContext(ctx, "mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=1,lazy_journal_init=1", l.Device).CombinedOutput(); err != nil {
		return a, fmt.Errorf("mkfs.ext4 %s: %w: %s", l.Device, err, bytes.TrimSpace(out))
	}
	if err := os.MkdirAll(a.mnt, 0o755); err != nil {
		return a, err
	}
	// noinit_itable: no background inode-table zeroing beside the load.
	if out, err := exec.CommandContext(ctx, "mount", "-o", "noinit_itable", l.Device, a.mnt).CombinedOutput(); err != nil {
		return a, fmt.Errorf("mount %s: %w: %s", l.Device, err, bytes.TrimSpace(out))
	}
	return a, l.WriteSysfs()
}

func (s *stack) start(name string, cmd *exec.Cmd) (*proc, error) {
	p := &proc{name: name, cmd: cmd, done: make(chan struct{}), log: &bytes.Buffer{}}
	w := &lockedWriter{w: p.log}
	cmd.Stderr = w
	if cmd.Stdout == nil {
		cmd.Stdout = w
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() { defer close(p.done); cmd.Wait() }() // owned: Close waits on done
	s.mu.Lock()
	s.procs = append(s.procs, p)
	s.mu.Unlock()
	return p, nil
}

var httpLine = regexp.MustCompile(`HTTP:\s+http://(\S+)/api/v1/volumes`)

// startServer starts `server --dev` on free ports and waits for its HTTP
// address.
func (s *stack) startServer(ctx context.Context) error {
	data := filepath.Join(s.cfg.dir, "server")
	pr, pw := io.Pipe()
	args := append([]string{"--dev", "--data-dir", data, "--grpc.listen-address", "127.0.0.1:0",
		"--web.listen-address", "127.0.0.1:0", "--log.level", "warn"}, s.cfg.serverArgs...)
	cmd := exec.Command(filepath.Join(s.cfg.bin, "server"), args...)
	cmd.Stdout = pw
	p, err := s.start("server", cmd)
	if err != nil {
		return err
	}
	found := make(chan string, 1)
	go func() { // owned: ends when the server's stdout closes
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if m := httpLine.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
	}()
	go func() { <-p.done; pw.Close() }() // owned: ends with the server
	select {
	case s.webAddr = <-found:
		return nil
	case <-p.done:
		return fmt.Errorf("server exited: %s", p.log)
	case <-time.After(60 * time.Second):
		return fmt.Errorf("server did not start in 60s: %s", p.log)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// startAgent runs `agent run` on the lab's tree (--path.sysfs, --path.dev)
// with every array's mount point included, no probes, and the member I/O
// interval at its default unless -member-every says otherwise.
func (s *stack) startAgent(ctx context.Context) error {
	dev, err := config.LoadRun(filepath.Join(s.cfg.dir, "server", "dev", "agent.yaml"))
	if err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "server:\n  address: %q\n  tls:\n    ca_file: %q\n    cert_file: %q\n    key_file: %q\n    server_name: localhost\n",
		dev.Server.Address, dev.Server.TLS.CAFile, dev.Server.TLS.CertFile, dev.Server.TLS.KeyFile)
	fmt.Fprintf(&b, "spool:\n  dir: %q\n", filepath.Join(s.cfg.dir, "spool"))
	if s.cfg.memberEvery > 0 {
		fmt.Fprintf(&b, "intervals:\n  member_io: %s\n", s.cfg.memberEvery)
	}
	b.WriteString("include:\n  mount_points:\n")
	for _, a := range s.arrays {
		fmt.Fprintf(&b, "    - %q\n", a.mnt)
	}
	path := filepath.Join(s.cfg.dir, "agent.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		return err
	}
	args := []string{"run", "--config", path, "--path.sysfs", filepath.Join(s.tree, "sys"), "--path.dev", filepath.Join(s.tree, "dev")}
	if out, err := exec.CommandContext(ctx, filepath.Join(s.cfg.bin, "agent"), append(args, "--check")...).CombinedOutput(); err != nil {
		return fmt.Errorf("agent --check: %w: %s", err, bytes.TrimSpace(out))
	}
	_, err = s.start("agent", exec.Command(filepath.Join(s.cfg.bin, "agent"), args...))
	return err
}

// exited names a process that has stopped, if any.
func (s *stack) exited() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.procs {
		select {
		case <-p.done:
			return p.name
		default:
		}
	}
	return ""
}

// logs returns every process's output so far.
func (s *stack) logs() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	for _, p := range s.procs {
		fmt.Fprintf(&b, "----- %s -----\n%s\n", p.name, p.log)
	}
	return b.String()
}

// close stops the agent and the server, the loads, and removes the arrays.
func (s *stack) close() error {
	s.mu.Lock()
	procs := s.procs
	s.procs = nil
	s.mu.Unlock()
	for i := len(procs) - 1; i >= 0; i-- {
		p := procs[i]
		p.cmd.Process.Signal(os.Interrupt)
		select {
		case <-p.done:
		case <-time.After(15 * time.Second):
			p.cmd.Process.Kill()
			<-p.done
		}
	}
	var errs []error
	for _, a := range s.arrays {
		if a.load != nil {
			a.load.stop()
		}
		exec.Command("umount", a.mnt).Run()
		errs = append(errs, a.lab.Close())
	}
	return errors.Join(errs...)
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
