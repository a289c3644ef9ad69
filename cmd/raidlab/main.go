//go:build linux

// Command raidlab runs emulated disk arrays as real block devices (see
// internal/raidlab): a FUSE-served array under a loop device with direct
// I/O, on which partition tables, file systems, fio and the agent run.
//
//	raidlab up --level raid10 --disks 4 --stripe-unit 64KiB --size 2GiB --preset fast
//	raidlab down DEV
//	raidlab fault DEV slow --member N --factor F
//	raidlab fault DEV latency --add DUR [--member N]
//	raidlab fault DEV fail --member N
//	raidlab fault DEV restore
//	raidlab stats DEV [--format table|json]
//	raidlab list
//	raidlab reap
//
// `up` starts a daemon and prints the loop device path alone on its last
// line once the device is ready. Needs root and /dev/fuse. It is a lab
// tool: it shells out (losetup, umount, partx), which the agent never does.
package main

import (
	"context"
	"encoding/json"
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
	"text/tabwriter"
	"time"

	"github.com/plumbline/plumbline/internal/bytesize"
	"github.com/plumbline/plumbline/internal/raidlab"
)

const usage = `usage: raidlab <command> [flags]

commands:
  up      start an emulated array in the background; prints its loop device last
  down    DEV: unmount what is mounted from DEV, detach it, stop its emulator
  fault   DEV slow --member N --factor F | latency --add DUR [--member N] | fail --member N | restore
  stats   DEV: requests, split requests and member operations
  list    the labs on this machine
  reap    remove the leftovers of labs whose process died

Members are numbered from 0. The state root (default /run/plumbline-raidlab)
can be changed with --state-root or PLUMBLINE_RAIDLAB_ROOT on every command.
`

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch args[0] {
	case "up":
		err = runUp(ctx, args[1:], stdout, stderr)
	case "serve":
		err = runServe(args[1:], stdout, stderr)
	case "down":
		err = runDown(ctx, args[1:], stdout, stderr)
	case "fault":
		err = runFault(ctx, args[1:], stdout, stderr)
	case "stats":
		err = runStats(ctx, args[1:], stdout, stderr)
	case "list":
		err = runList(args[1:], stdout, stderr)
	case "reap":
		err = runReap(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "raidlab: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if errors.Is(err, errUsage) {
		return 2
	}
	if err != nil {
		fmt.Fprintln(stderr, "raidlab:", strings.TrimPrefix(err.Error(), "raidlab: "))
		return 1
	}
	return 0
}

var errUsage = errors.New("usage")

func stateRootDefault() string {
	if r := os.Getenv("PLUMBLINE_RAIDLAB_ROOT"); r != "" {
		return r
	}
	return raidlab.DefaultStateRoot
}

func newFlags(name string, stderr io.Writer) (*flag.FlagSet, *string) {
	fs := flag.NewFlagSet("raidlab "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	root := fs.String("state-root", stateRootDefault(), "where labs keep their state directories")
	return fs, root
}

// parseFlags parses and turns a flag error into errUsage (already printed).
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "%s: unexpected arguments %q\n", fs.Name(), fs.Args())
		return errUsage
	}
	return nil
}

// arrayFlags are up's (and serve's) array flags.
type arrayFlags struct {
	level, stripe, size, preset, dataRoot string
	disks                                 int
	seed                                  uint64
}

func (a *arrayFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&a.level, "level", "raid10", "single, raid0, raid1, raid5 or raid10 (near 2)")
	fs.IntVar(&a.disks, "disks", 4, "member disks")
	fs.StringVar(&a.stripe, "stripe-unit", "64KiB", "stripe unit (chunk) per member")
	fs.StringVar(&a.size, "size", "2GiB", "size the array presents (a sparse backing file)")
	fs.StringVar(&a.preset, "preset", "fast", "member model: "+strings.Join(raidlab.PresetNames(), ", "))
	fs.Uint64Var(&a.seed, "seed", 0, "rotational-delay sequence (0: from the clock)")
	fs.StringVar(&a.dataRoot, "data-root", raidlab.DefaultDataRoot, "where the sparse backing file goes")
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
	return raidlab.Config{Geometry: g, Preset: p, Seed: a.seed, StateRoot: root, DataRoot: a.dataRoot}, nil
}

func (a *arrayFlags) args() []string {
	return []string{"--level", a.level, "--disks", fmt.Sprint(a.disks), "--stripe-unit", a.stripe,
		"--size", a.size, "--preset", a.preset, "--seed", fmt.Sprint(a.seed), "--data-root", a.dataRoot}
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
func runServe(args []string, stdout, stderr io.Writer) error {
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

func runDown(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	dev, rest, err := devArg("down", args, stderr)
	if err != nil {
		return err
	}
	fs, root := newFlags("down", stderr)
	if err := parseFlags(fs, rest); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	return raidlab.Down(ctx, *root, dev)
}

func devArg(cmd string, args []string, stderr io.Writer) (string, []string, error) {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		fmt.Fprintf(stderr, "usage: raidlab %s DEV ...\n", cmd)
		return "", nil, errUsage
	}
	return args[0], args[1:], nil
}

func client(root, dev string) (*raidlab.Client, raidlab.State, error) {
	s, err := raidlab.Find(root, dev)
	if err != nil {
		return nil, s, err
	}
	if !s.Alive() {
		return nil, s, fmt.Errorf("%s: lab %s's process %d is gone (run raidlab reap)", dev, s.ID, s.PID)
	}
	return raidlab.NewClient(s.Control), s, nil
}

func runFault(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	dev, rest, err := devArg("fault", args, stderr)
	if err != nil {
		return err
	}
	if len(rest) == 0 {
		fmt.Fprintln(stderr, "usage: raidlab fault DEV slow|latency|fail|restore [flags]")
		return errUsage
	}
	kind := raidlab.FaultKind(rest[0])
	fs, root := newFlags("fault "+rest[0], stderr)
	member := fs.Int("member", -1, "member (from 0)")
	factor := fs.Float64("factor", 0, "slow: service-time multiplier")
	add := fs.Duration("add", 0, "latency: added to every request (or, with --member, to that member's every op)")
	if err := parseFlags(fs, rest[1:]); err != nil {
		return err
	}
	f := raidlab.Fault{Kind: kind, Factor: *factor, Add: *add}
	if *member >= 0 {
		f.Member = member
	}
	switch kind {
	case raidlab.FaultSlow:
		if *member < 0 || *factor == 0 {
			return errors.New("fault slow needs --member and --factor")
		}
	case raidlab.FaultFail:
		if *member < 0 {
			return errors.New("fault fail needs --member")
		}
	case raidlab.FaultLatency:
		if *add == 0 && !flagSet(fs, "add") {
			return errors.New("fault latency needs --add (0 clears it)")
		}
	case raidlab.FaultRestore:
	default:
		return fmt.Errorf("unknown fault %q (want slow, latency, fail or restore)", kind)
	}
	c, _, err := client(*root, dev)
	if err != nil {
		return err
	}
	if _, err := c.Fault(ctx, f); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: %s applied\n", dev, describe(f))
	return nil
}

func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func describe(f raidlab.Fault) string {
	switch f.Kind {
	case raidlab.FaultSlow:
		return fmt.Sprintf("member %d slow ×%g", *f.Member, f.Factor)
	case raidlab.FaultFail:
		return fmt.Sprintf("member %d failed", *f.Member)
	case raidlab.FaultLatency:
		if f.Member != nil {
			return fmt.Sprintf("member %d +%v per op", *f.Member, f.Add)
		}
		return fmt.Sprintf("+%v per request", f.Add)
	}
	return "restore (all faults cleared)"
}

func runStats(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	dev, rest, err := devArg("stats", args, stderr)
	if err != nil {
		return err
	}
	fs, root := newFlags("stats", stderr)
	format := fs.String("format", "table", "table or json")
	if err := parseFlags(fs, rest); err != nil {
		return err
	}
	c, _, err := client(*root, dev)
	if err != nil {
		return err
	}
	s, err := c.Stats(ctx)
	if err != nil {
		return err
	}
	switch *format {
	case "json":
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(s)
	case "table":
	default:
		return fmt.Errorf("--format %q: want table or json", *format)
	}
	fmt.Fprintf(stdout, "%s: %s, %d members, stripe unit %d, size %d, preset %s\n", dev, s.Level, s.Members, s.StripeUnit, s.Size, s.Preset)
	fmt.Fprintf(stdout, "requests: %d reads (%d split), %d writes (%d split), %d flushes, %d failed; member ops %d; most in flight %d; added latency %v\n",
		s.ReadRequests, s.SplitReads, s.WriteRequests, s.SplitWrites, s.Flushes, s.Failed, s.Ops(), s.MaxInFlight, s.AddLatency)
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MEMBER\tREAD_OPS\tWRITE_OPS\tREAD_BYTES\tWRITE_BYTES\tBUSY_S\tSTATE")
	for i, m := range s.MemberStats {
		state := "ok"
		switch {
		case m.Failed:
			state = "failed"
		case m.SlowFactor > 0 && m.AddLatency > 0:
			state = fmt.Sprintf("slow ×%g, +%v per op", m.SlowFactor, m.AddLatency)
		case m.SlowFactor > 0:
			state = fmt.Sprintf("slow ×%g", m.SlowFactor)
		case m.AddLatency > 0:
			state = fmt.Sprintf("+%v per op", m.AddLatency)
		}
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%.3f\t%s\n", i, m.ReadOps, m.WriteOps, m.ReadBytes, m.WriteBytes, m.BusySeconds, state)
	}
	return tw.Flush()
}

func runList(args []string, stdout, stderr io.Writer) error {
	fs, root := newFlags("list", stderr)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	labs, err := raidlab.List(*root)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DEVICE\tID\tPID\tSTATE\tLEVEL\tDISKS\tSTRIPE_UNIT\tSIZE\tPRESET\tSTARTED")
	for _, s := range labs {
		state := "up"
		if !s.Alive() {
			state = "dead (raidlab reap)"
		} else if !s.Daemon {
			state = "up (in-process)"
		}
		g := s.Geometry
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", orDash(s.Device), s.ID, s.PID, state, g.Level, g.Members,
			bytesize.Size(g.StripeUnit), bytesize.Size(g.Size), s.Preset, s.Started)
	}
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func runReap(args []string, stdout, stderr io.Writer) error {
	fs, root := newFlags("reap", stderr)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	ids, err := raidlab.Reap(*root)
	for _, id := range ids {
		fmt.Fprintln(stdout, "reaped", id)
	}
	return err
}
