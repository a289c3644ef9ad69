//go:build linux

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/plumbline/plumbline/internal/bytesize"
	"github.com/plumbline/plumbline/internal/lab/raidlab"
)

// arrayFlags are up's (and serve's) array flags.
type arrayFlags struct {
	level, stripe, size, preset, dataRoot string
	disks                                 int
	seed                                  uint64
	memberDevices                         bool
	treeRoot                              string
}

func (a *arrayFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&a.level, "level", "raid10", "single, raid0, raid1, raid5 or raid10 (near 2)")
	fs.IntVar(&a.disks, "disks", 4, "member disks")
	fs.StringVar(&a.stripe, "stripe-unit", "64KiB", "stripe unit (chunk) per member")
	fs.StringVar(&a.size, "size", "2GiB", "size the array presents (a sparse backing file)")
	fs.StringVar(&a.preset, "preset", "fast", "member model: "+strings.Join(raidlab.PresetNames(), ", "))
	fs.Uint64Var(&a.seed, "seed", 0, "rotational-delay sequence (0: from the clock)")
	fs.StringVar(&a.dataRoot, "data-root", raidlab.DefaultDataRoot, "where the sparse backing file goes")
	fs.BoolVar(&a.memberDevices, "member-devices", false, "give every member a loop device of its own that member operations go through, and write the array's md sysfs tree")
	fs.StringVar(&a.treeRoot, "tree-root", "", "with --member-devices: where the sysfs tree (sys/) and device links (dev/) go; labs may share one (default: the lab's state directory)")
}

func (a *arrayFlags) config(root string) (raidlab.Config, error) {
	var cfg raidlab.Config
	lvl, err := raidlab.ParseLevel(a.level)
	if err != nil {
		return cfg, err
	}
	su, err := bytesize.Parse(a.stripe)
	if err != nil {
		return cfg, fmt.Errorf("--stripe-unit: %w", err)
	}
	sz, err := bytesize.Parse(a.size)
	if err != nil {
		return cfg, fmt.Errorf("--size: %w", err)
	}
	p, err := raidlab.LookupPreset(a.preset)
	if err != nil {
		return cfg, err
	}
	if su > 1<<40 || sz > 1<<50 {
		return cfg, errors.New("--stripe-unit or --size too large")
	}
	g := raidlab.Geometry{Level: lvl, Members: a.disks, StripeUnit: int64(su), Size: int64(sz)}
	if lvl == raidlab.Single && a.disks == 4 {
		g.Members = 1 // --disks left at its default
	}
	if err := g.Validate(); err != nil {
		return cfg, err
	}
	tree := a.treeRoot
	if tree != "" {
		if tree, err = filepath.Abs(tree); err != nil {
			return cfg, fmt.Errorf("--tree-root: %w", err)
		}
	}
	return raidlab.Config{Geometry: g, Preset: p, Seed: a.seed, StateRoot: root, DataRoot: a.dataRoot, MemberDevices: a.memberDevices, TreeRoot: tree}, nil
}

func (a *arrayFlags) args() []string {
	return []string{"--level", a.level, "--disks", fmt.Sprint(a.disks), "--stripe-unit", a.stripe,
		"--size", a.size, "--preset", a.preset, "--seed", fmt.Sprint(a.seed), "--data-root", a.dataRoot,
		fmt.Sprintf("--member-devices=%v", a.memberDevices), "--tree-root", a.treeRoot}
}

// runUp starts `raidlab serve` as a daemon in its own session, with its
// output in <state dir>/daemon.log, and waits on a pipe until the daemon
// says the device is ready (or why it is not).
func runUp(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, root := newFlags("up", stderr)
	var a arrayFlags
	a.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if _, err := a.config(*root); err != nil {
		return err
	}
	if _, err := raidlab.Reap(*root); err != nil {
		fmt.Fprintln(stderr, "raidlab: reap:", err)
	}
	id := newID()
	dir := filepath.Join(*root, id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	logPath := filepath.Join(dir, "daemon.log")
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(self, append([]string{"serve", "--state-root", *root, "--id", id}, a.args()...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = []*os.File{pw} // fd 3: the readiness pipe
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		os.RemoveAll(dir)
		return fmt.Errorf("start daemon: %w", err)
	}
	pw.Close()
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }() // reaps the daemon only if it dies while we wait
	msg := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(io.LimitReader(pr, 4096))
		pr.Close()
		msg <- strings.TrimSpace(string(b))
	}()
	var m string
	select {
	case m = <-msg:
	case <-ctx.Done():
		cmd.Process.Signal(syscall.SIGTERM)
		return fmt.Errorf("interrupted; daemon %d told to stop", cmd.Process.Pid)
	}
	dev, ok := strings.CutPrefix(m, "ready ")
	if !ok {
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
		}
		log, _ := os.ReadFile(logPath)
		if m == "" {
			m = "daemon exited without saying why"
		}
		os.Remove(logPath)
		os.Remove(dir) // only if empty: a reapable lab stays
		return fmt.Errorf("up: %s\n%s", strings.TrimPrefix(m, "error "), strings.TrimSpace(string(log)))
	}
	fmt.Fprintf(stderr, "raidlab: lab %s (pid %d): %s %d × %s, stripe unit %s, %s; control %s; log %s\n",
		id, cmd.Process.Pid, a.level, a.disks, a.preset, a.stripe, a.size, filepath.Join(dir, "control.sock"), logPath)
	cmd.Process.Release()
	fmt.Fprintln(stdout, dev)
	return nil
}

func newID() string {
	var b [6]byte
	f, err := os.Open("/dev/urandom")
	if err == nil {
		io.ReadFull(f, b[:])
		f.Close()
	}
	return fmt.Sprintf("%x", b)
}

// runServe is the daemon: it starts the lab, reports on fd 3, and serves
// until SIGTERM, SIGINT or SIGHUP, then removes everything.
func runServe(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs, root := newFlags("serve", stderr)
	var a arrayFlags
	a.register(fs)
	id := fs.String("id", "", "lab id (chosen by up)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	ready := os.NewFile(3, "ready")
	report := func(s string) {
		if ready != nil {
			fmt.Fprintln(ready, s)
			ready.Close()
			ready = nil
		}
	}
	defer report("error daemon ended before the device was ready")
	cfg, err := a.config(*root)
	if err != nil {
		report("error " + err.Error())
		return err
	}
	cfg.ID, cfg.Daemon = *id, true
	// Signals are caught before the lab exists so that a stop during
	// start-up still cleans up.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	signal.Ignore(syscall.SIGPIPE)
	l, err := raidlab.Start(context.Background(), cfg)
	if err != nil {
		report("error " + err.Error())
		return err
	}
	fmt.Fprintf(stdout, "%s lab %s up: %s on %s\n", time.Now().UTC().Format(time.RFC3339), l.ID, l.Device, l.Mountpoint)
	report("ready " + l.Device)
	sig := <-sigs
	fmt.Fprintf(stdout, "%s %v: stopping\n", time.Now().UTC().Format(time.RFC3339), sig)
	return l.Close()
}
