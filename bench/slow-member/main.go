//go:build linux

// Command slow-member measures how well Plumbline names a slow member of
// an array, end to end, on members that are kernel block devices: lab
// arrays with member devices (internal/lab/raidlab: each member a loop
// device over a FUSE file that takes the member's time and faults, so
// the kernel's /proc/diskstats carries the evidence), ext4 on each,
// a steady database-like load (8 KiB random reads and writes, direct I/O)
// on every array, `server --dev`, and `agent run` reading the lab's md
// sysfs tree (--path.sysfs, --path.dev) at its default member I/O
// interval. After a warm-up every trial array gets one fault on one
// member, chosen at random: slowed ×2, ×3 or ×5, or stalling 3% of its
// operations; control arrays stay healthy. The server's judge is polled
// for the members it names (the inventory API's slow_members; the
// server's store while the API has none). A trial is right when its faulted member is
// named within -max of the fault, wrong when any other member of its
// array is named at any time; a control naming anything is counted
// apart. bench/slow-member.sh runs it and adds the noise replay. Output
// ends with the line
//
//	trials=N right_member=R wrong_member=W median_seconds=S controls=C controls_named=K
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/plumbline/plumbline/internal/lab/raidlab"
)

type cfg struct {
	bin, dir, judge, record string
	kinds                   string
	trials, controls, qd    int
	preset                  string
	seed                    uint64
	size, loadSize          int64
	rate, writeShare        float64
	warmup, max, poll       time.Duration
	memberEvery, sample     time.Duration
	stallFor                time.Duration
	serverArgs              []string
}

func main() { os.Exit(runMain(os.Args[1:], os.Stdout, os.Stderr)) }

func runMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("slow-member", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c cfg
	var serverArgs, replay string
	var days float64
	var walks int
	fs.StringVar(&c.bin, "bin", "", "directory holding the built server and agent")
	fs.StringVar(&c.dir, "dir", "/var/tmp/plumbline-slow-member", "work directory (lab state and data, mounts, server data, spool)")
	fs.StringVar(&c.judge, "judge", "server", "server: run server and agent and poll the judge; none: record the kernel's evidence only")
	fs.StringVar(&c.record, "record", "", "write every member's interval counters here (JSON lines)")
	fs.IntVar(&c.trials, "trials", 8, "trial arrays (one faulted member each), run at once")
	fs.IntVar(&c.controls, "controls", 2, "control arrays (never faulted)")
	fs.StringVar(&c.preset, "preset", "sas15k", "member model")
	fs.Uint64Var(&c.seed, "seed", 1, "seed: levels, members faulted, load")
	fs.Int64Var(&c.size, "size", 1<<30, "bytes per array")
	fs.Int64Var(&c.loadSize, "load-size", 128<<20, "bytes of each array's load file")
	fs.Float64Var(&c.rate, "rate", 25, "load: operations a second per array")
	fs.Float64Var(&c.writeShare, "write-share", 0.3, "load: share of writes")
	fs.IntVar(&c.qd, "qd", 8, "load: most operations in flight per array")
	fs.DurationVar(&c.warmup, "warmup", 5*time.Minute, "healthy time before the faults")
	fs.DurationVar(&c.max, "max", 15*time.Minute, "longest wait for a faulted member to be named")
	fs.DurationVar(&c.poll, "poll", 10*time.Second, "how often the judge is asked")
	fs.DurationVar(&c.memberEvery, "member-every", 0, "the agent's intervals.member_io (0: its default)")
	fs.DurationVar(&c.sample, "sample", time.Minute, "the bench's own diskstats sampling (evidence lines, -record)")
	fs.StringVar(&c.kinds, "kinds", "", "the faults trials cycle through, comma-separated (default all: slow2, slow3, slow5, stall3pct)")
	fs.DurationVar(&c.stallFor, "stall", 100*time.Millisecond, "how long a stalled operation stalls")
	fs.StringVar(&serverArgs, "server-args", "", "extra server flags (space-separated)")
	fs.StringVar(&replay, "replay", "", "no lab: replay the healthy intervals of these recordings (-record output, comma-separated) through the judge")
	fs.Float64Var(&days, "days", 7, "with -replay: simulated days per recorded array and walk")
	fs.IntVar(&walks, "walks", 4, "with -replay: bootstrap walks per recorded array")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	c.serverArgs = strings.Fields(serverArgs)
	if replay != "" {
		series, every, err := healthySeries(strings.Split(replay, ","))
		if err != nil || len(series) == 0 {
			fmt.Fprintf(stderr, "slow-member: replay: %d healthy series, %v\n", len(series), err)
			return 1
		}
		fmt.Fprintln(stdout, replayNoise(series, every, days, walks, stderr))
		return 0
	}
	if c.judge == "server" && c.bin == "" {
		fmt.Fprintln(stderr, "slow-member: -bin is required with -judge server")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := run(ctx, c, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "slow-member:", err)
		return 1
	}
	fmt.Fprintln(stdout, res)
	return 0
}

// faultKind is one of the faults a trial injects.
type faultKind struct {
	name  string
	fault func(m int) raidlab.Fault
}

func faultKinds(stall time.Duration) []faultKind {
	slow := func(f float64) func(int) raidlab.Fault {
		return func(m int) raidlab.Fault { return raidlab.Fault{Kind: raidlab.FaultSlow, Member: &m, Factor: f} }
	}
	return []faultKind{
		{"slow2", slow(2)}, {"slow3", slow(3)}, {"slow5", slow(5)},
		{"stall3pct", func(m int) raidlab.Fault {
			return raidlab.Fault{Kind: raidlab.FaultStall, Member: &m, Fraction: 0.03, Add: stall}
		}},
	}
}

// shapes are the arrays the trials cycle through.
var shapes = []raidlab.Geometry{
	{Level: raidlab.RAID1, Members: 2},
	{Level: raidlab.RAID5, Members: 4, StripeUnit: 64 << 10},
	{Level: raidlab.RAID10, Members: 4, StripeUnit: 64 << 10},
}

// trial is one faulted member and what the judge said of its array.
type trial struct {
	kind   faultKind
	member int
	at     time.Time // when the fault began; zero before
	named  time.Time // when the faulted member was first named after it
	wrong  []string  // other members of the array named, at any time
}

func (t *trial) faultedAt(end time.Time) bool { return !t.at.IsZero() && t.at.Before(end) }

func (t *trial) state(now time.Time) string {
	switch {
	case t.at.IsZero():
		return t.kind.name + " (not yet)"
	case !t.named.IsZero():
		return fmt.Sprintf("%s, named after %s", t.kind.name, t.named.Sub(t.at).Round(time.Second))
	}
	return fmt.Sprintf("%s for %s", t.kind.name, now.Sub(t.at).Round(time.Second))
}

// run builds the stack, runs the trials and returns the summary line.
func run(ctx context.Context, c cfg, log io.Writer) (string, error) {
	p, err := raidlab.LookupPreset(c.preset)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return "", err
	}
	s := &stack{cfg: c, tree: filepath.Join(c.dir, "tree")}
	defer func() {
		if err := s.close(); err != nil {
			fmt.Fprintln(log, "slow-member: close:", err)
		}
	}()
	if err := s.build(ctx, p, log); err != nil {
		return "", err
	}
	var n namer = noNamer{}
	if c.judge == "server" {
		if err := s.startServer(ctx); err != nil {
			return "", err
		}
		if err := s.startAgent(ctx); err != nil {
			return "", err
		}
		sn := newStoreNamer(filepath.Join(c.dir, "server"))
		defer sn.close()
		n = &fallbackNamer{api: newAPINamer(s.webAddr), fallback: sn, log: log}
		fmt.Fprintf(log, "slow-member: server %s, agent on the lab tree %s\n", s.webAddr, s.tree)
	}
	rctx, rstop := context.WithCancel(ctx)
	defer rstop()
	rec := &recorder{arrays: s.arrays, every: c.sample, log: log}
	if c.record != "" {
		f, err := os.Create(c.record)
		if err != nil {
			return "", err
		}
		defer f.Close()
		rec.out = f
	}
	go rec.run(rctx) // owned: stopped by rstop before run returns
	if err := s.watch(ctx, n, time.Now().Add(c.warmup), log); err != nil {
		return "", err
	}
	s.inject(log)
	if err := s.watch(ctx, n, time.Now().Add(c.max), log); err != nil {
		return "", err
	}
	rstop()
	return s.summary(log), nil
}

// build starts every array and its load; the first c.trials get a trial.
func (s *stack) build(ctx context.Context, p raidlab.Preset, log io.Writer) error {
	c := s.cfg
	rng := rand.New(rand.NewPCG(c.seed, c.seed+1))
	kinds := faultKinds(c.stallFor)
	if c.kinds != "" {
		want := strings.Split(c.kinds, ",")
		kinds = slices.DeleteFunc(kinds, func(k faultKind) bool { return !slices.Contains(want, k.name) })
		if len(kinds) == 0 {
			return fmt.Errorf("-kinds %q: none of slow2, slow3, slow5, stall3pct", c.kinds)
		}
	}
	for i := range c.trials + c.controls {
		// Kinds (4) and shapes (3) cycle together: 12 trials cover every pair.
		g := shapes[i%len(shapes)]
		g.Size = c.size
		a, err := s.startArray(ctx, i, g, p)
		if err != nil {
			return fmt.Errorf("array %d: %w", i, err)
		}
		a.shapes = fmt.Sprintf("%s x%d", g.Level, g.Members)
		role := "control"
		if i < c.trials {
			a.trial = &trial{kind: kinds[i%len(kinds)], member: rng.IntN(g.Members)}
			role = fmt.Sprintf("trial: %s on member %d (%s)", a.trial.kind.name, a.trial.member, a.lab.Members[a.trial.member])
		}
		fmt.Fprintf(log, "slow-member: array %d %s on %s, members %s: %s\n", i, a.shapes, a.lab.Device, strings.Join(a.lab.Members, " "), role)
		if a.load, err = startLoad(ctx, a.mnt, c.loadSize, c.rate, c.writeShare, c.qd, c.seed*1000+uint64(i)); err != nil {
			return fmt.Errorf("array %d load: %w", i, err)
		}
	}
	return nil
}

// inject applies every trial's fault at once.
func (s *stack) inject(log io.Writer) {
	now := time.Now()
	for _, a := range s.arrays {
		if a.trial == nil {
			continue
		}
		if err := a.lab.Fault(a.trial.kind.fault(a.trial.member)); err != nil {
			fmt.Fprintf(log, "slow-member: array %d: fault: %v\n", a.idx, err)
			continue
		}
		a.trial.at = now
	}
	fmt.Fprintf(log, "slow-member: %s faults injected\n", now.UTC().Format("15:04:05"))
}

// watch polls the judge until deadline (or every trial is named after its
// fault), recording who is named.
func (s *stack) watch(ctx context.Context, n namer, deadline time.Time, log io.Writer) error {
	for {
		if p := s.exited(); p != "" {
			return fmt.Errorf("%s exited:\n%s", p, s.logs())
		}
		named, err := n.named(ctx)
		if err != nil {
			fmt.Fprintln(log, "slow-member: judge:", err)
		}
		now := time.Now()
		done := s.note(named, now, log)
		if done || now.After(deadline) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(min(s.cfg.poll, time.Until(deadline)+time.Millisecond)):
		}
	}
}

// note records the members named now; it says whether every trial has
// been named after its fault.
func (s *stack) note(named map[string]string, now time.Time, log io.Writer) bool {
	all := true
	for _, a := range s.arrays {
		for m, dev := range a.lab.Members {
			why, ok := named[filepath.Base(dev)]
			if !ok {
				continue
			}
			if a.trial != nil && m == a.trial.member && !a.trial.at.IsZero() {
				if a.trial.named.IsZero() {
					a.trial.named = now
					fmt.Fprintf(log, "slow-member: array %d: member %d (%s, %s) named after %s: %s\n",
						a.idx, m, dev, a.trial.kind.name, now.Sub(a.trial.at).Round(time.Second), why)
				}
				continue
			}
			w := fmt.Sprintf("member %d (%s) at %s: %s", m, dev, now.UTC().Format("15:04:05"), why)
			if a.trial == nil {
				if !a.ctrlNamed[m] {
					fmt.Fprintf(log, "slow-member: array %d: control %s\n", a.idx, w)
				}
				a.ctrlNamed[m] = true
				continue
			}
			if !slices.ContainsFunc(a.trial.wrong, func(s string) bool { return strings.HasPrefix(s, fmt.Sprintf("member %d ", m)) }) {
				fmt.Fprintf(log, "slow-member: array %d: WRONG %s\n", a.idx, w)
			}
			a.trial.wrong = append(a.trial.wrong, w)
		}
		if a.trial != nil && a.trial.named.IsZero() {
			all = false
		}
	}
	return all
}
