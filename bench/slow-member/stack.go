//go:build linux

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/plumbline/plumbline/internal/agent/config"
	"github.com/plumbline/plumbline/internal/lab/labproc"
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
	procs   labproc.Group // server, agent: os.Interrupt, SIGKILL after 15 s
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

var httpLine = regexp.MustCompile(`HTTP:\s+http://(\S+)/api/v1/volumes`)

// startServer starts `server --dev` on free ports and waits for its HTTP
// address.
func (s *stack) startServer(ctx context.Context) error {
	data := filepath.Join(s.cfg.dir, "server")
	args := append([]string{"--dev", "--data-dir", data, "--grpc.listen-address", "127.0.0.1:0",
		"--web.listen-address", "127.0.0.1:0", "--log.level", "warn"}, s.cfg.serverArgs...)
	cmd := exec.Command(filepath.Join(s.cfg.bin, "server"), args...)
	_, m, err := s.procs.StartReady(ctx, "server", cmd, httpLine, 60*time.Second)
	if err != nil {
		return err
	}
	s.webAddr = m[1]
	return nil
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
	_, err = s.procs.Start("agent", exec.Command(filepath.Join(s.cfg.bin, "agent"), args...))
	return err
}

// exited names a process that has stopped, if any.
func (s *stack) exited() string {
	if p := s.procs.Exited(); p != nil {
		return p.Name()
	}
	return ""
}

// logs returns every process's output so far (the last MiB of each).
func (s *stack) logs() string { return s.procs.Logs() }

// close stops the agent and the server, the loads, and removes the arrays.
func (s *stack) close() error {
	s.procs.Close()
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
