//go:build linux

// Command tails measures how fast the degradation detector (internal/
// baseline, as the server's evaluator drives it) catches each lab fault
// kind, at a given probe schedule, on real probe runs: a lab array
// (cmd/raidlab up, in its own process), ext4 on it, Plumbline's probe
// engine in this process. The runs are real I/O; only the time between
// them is simulated (each run is stamped -every after the last), so a
// 3-minute schedule is measured in seconds. For every fault kind and trial
// it runs -healthy runs, applies the fault through the lab's control
// socket and runs until the volume is degraded (at most -max-runs),
// then restores. Finally it replays the healthy runs it recorded, drawn
// at random, as -replay-days of noise through a fresh detector and counts
// the degraded episodes (false alerts). Output, one line per fault kind
// and a last line:
//
//	fault=<kind> signal=<signal that named it> runs=<faulted runs to degraded, per trial> detect_seconds=<median>
//	false_alerts=<n> replay_days=<d> healthy_runs=<recorded>
//
// detect_seconds = runs × every (the fault began just after the last
// healthy run: a whole interval before the first faulted one) + the
// evaluator's pass interval + the alert's for:. bench/degrade.sh runs it
// (part 3; bench/degrade-tails.sh runs that part alone).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/plumbline/plumbline/internal/agent/probe"
	"github.com/plumbline/plumbline/internal/lab/raidlab"
	replaypkg "github.com/plumbline/plumbline/internal/lab/replay"
	"github.com/plumbline/plumbline/internal/server/baseline"
	"github.com/plumbline/plumbline/internal/server/evaluator"
	"github.com/plumbline/plumbline/internal/server/store"
)

func main() { os.Exit(runMain(os.Args[1:], os.Stdout, os.Stderr)) }

type faultKind struct {
	name  string
	fault raidlab.Fault
}

func runMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("tails", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		raidlabBin = fs.String("raidlab", "", "the raidlab binary (cmd/raidlab)")
		work       = fs.String("work", "/var/tmp/plumbline-tails", "mount point and lab state")
		level      = fs.String("level", "raid1", "lab array level")
		disks      = fs.Int("disks", 2, "lab array members")
		preset     = fs.String("preset", "sas15k", "member model")
		every      = fs.Duration("every", 3*time.Minute, "probe schedule (simulated)")
		ops        = fs.Int("ops", 50, "ops per run")
		iops       = fs.Float64("iops", 100, "IOPS cap of a run")
		healthy    = fs.Int("healthy", 16, "healthy runs before each fault")
		maxRuns    = fs.Int("max-runs", 14, "faulted runs before giving up")
		trials     = fs.Int("trials", 3, "trials per fault kind")
		pass       = fs.Duration("pass", 30*time.Second, "evaluator pass interval (added to detection)")
		forDur     = fs.Duration("for", 2*time.Minute, "the alert's for: (added to detection)")
		days       = fs.Float64("replay-days", 7, "days of noise replayed from the recorded healthy runs")
		only       = fs.String("only", "", "comma-separated fault kinds (default all: slow, stall, throttle, rebuild)")
		record     = fs.String("record", "", "write the recorded healthy runs here (JSON lines)")
		recFaulted = fs.String("record-faulted", "", "write every faulted run here (JSON lines: fault, trial, run) and run each trial to -max-runs")
		kind       = fs.String("kind", string(probe.RandomRead), "probe kind (random-read, random-write, log-write)")
		replayFrom = fs.String("replay-from", "", "no lab: replay the healthy runs recorded in this file")
		noiseFrom  = fs.String("noise", "", "no lab: replay these noise recordings (internal/lab/replay/testdata/*.txt.gz, comma-separated) through bare detectors")
		seeds      = fs.Int("seeds", 8, "with -noise: walks through each recording")
	)
	config := detectorFlags(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	det := config()
	if *noiseFrom != "" {
		if err := noise(stdout, strings.Split(*noiseFrom, ","), det, replaypkg.Schedule{Every: *every, Ops: *ops}, *days, *seeds); err != nil {
			fmt.Fprintln(stderr, "tails:", err)
			return 1
		}
		return 0
	}
	if *replayFrom != "" {
		runs, err := readRuns(*replayFrom)
		if err != nil {
			fmt.Fprintln(stderr, "tails:", err)
			return 1
		}
		replay(stdout, stderr, det, runs, *every, *days)
		return 0
	}
	if *raidlabBin == "" {
		fmt.Fprintln(stderr, "tails: -raidlab is required")
		return 2
	}
	if err := run(context.Background(), stdout, stderr, cfg{
		raidlab: *raidlabBin, work: *work, level: *level, disks: *disks, preset: *preset, every: *every, ops: *ops,
		iops: *iops, healthy: *healthy, maxRuns: *maxRuns, trials: *trials, extra: *pass + *forDur, days: *days, only: *only,
		record: *record, det: det, recordFaulted: *recFaulted, kind: probe.Kind(*kind),
	}); err != nil {
		fmt.Fprintln(stderr, "tails:", err)
		return 1
	}
	return 0
}

// detectorFlags registers the flags that override the detector's
// defaults; the returned function builds the Config once they are parsed.
func detectorFlags(fs *flag.FlagSet) func() baseline.Config {
	var (
		within    = fs.Int("within", 0, "override the tail's and the mean's SignalConfig.Within (0: default)")
		tailRatio = fs.Float64("tail-ratio", 0, "override the tail's DegradeRatio (0: default)")
		meanRatio = fs.Float64("mean-ratio", 0, "override the mean's DegradeRatio (0: default)")
		meanCorr  = fs.Int("mean-corroborated", 0, "override the mean's Corroborated (0: default)")
		rateCorr  = fs.Int("rate-corroborated", 0, "override the rate's Corroborated (0: default)")
		corrRatio = fs.Float64("corroborate-ratio", 0, "override the mean's CorroborateRatio (0: default)")
		sustain   [3]int
		slow      baseline.SlowConfig
	)
	for i, name := range []string{"tail", "mean", "rate"} {
		fs.IntVar(&sustain[i], name+"-sustain", 0, "override the "+name+"'s Sustain (0: default)")
	}
	for _, f := range []struct {
		v    *int
		name string
	}{{&slow.Pool, "pool"}, {&slow.PerRun, "per-run"}, {&slow.Floor, "floor"}, {&slow.Margin, "margin"},
		{&slow.MinHistory, "min-history"}, {&slow.HalfLife, "half-life"}, {&slow.Sustain, "sustain"}} {
		fs.IntVar(f.v, "slow-"+f.name, 0, "override the slow-op count's "+f.name+" (baseline.SlowConfig; 0: default)")
	}
	return func() baseline.Config {
		det := baseline.Config{Slow: slow}
		if *within > 0 {
			det.Tail.Within, det.Mean.Within = *within, *within
		}
		det.Tail.DegradeRatio, det.Mean.DegradeRatio = *tailRatio, *meanRatio
		det.Tail.Sustain, det.Mean.Sustain, det.Rate.Sustain = sustain[0], sustain[1], sustain[2]
		det.Mean.Corroborated, det.Mean.CorroborateRatio, det.Rate.Corroborated = *meanCorr, *corrRatio, *rateCorr
		return det
	}
}

type cfg struct {
	raidlab, work, level, preset, only   string
	record, recordFaulted                string
	kind                                 probe.Kind
	det                                  baseline.Config
	disks, ops, healthy, maxRuns, trials int
	iops, days                           float64
	every, extra                         time.Duration
}

func run(ctx context.Context, stdout, stderr io.Writer, c cfg) error {
	lab, mnt, cleanup, err := startLab(ctx, stderr, c)
	defer cleanup()
	if err != nil {
		return err
	}
	probeRun := prober(ctx, mnt, c)
	if _, err := probeRun(); err != nil { // creates and fills the probe file
		return err
	}
	m0 := 0
	kinds := []faultKind{
		{"slow", raidlab.Fault{Kind: raidlab.FaultSlow, Member: &m0, Factor: 3}},
		{"stall", raidlab.Fault{Kind: raidlab.FaultStall, Member: &m0, Fraction: 0.03, Add: 100 * time.Millisecond}},
		{"throttle", raidlab.Fault{Kind: raidlab.FaultThrottle, IOPS: 20, Burst: 30}},
		{"rebuild", raidlab.Fault{Kind: raidlab.FaultRebuild, Member: &m0, Load: 0.8}},
	}
	m := measurer{lab: lab, probe: probeRun, c: c, stderr: stderr, t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	for _, k := range kinds {
		if c.only != "" && !slices.Contains(strings.Split(c.only, ","), k.name) {
			continue
		}
		runsTo, signals, err := m.kind(ctx, k)
		if err != nil {
			return err
		}
		if _, err := lab.Fault(ctx, raidlab.Fault{Kind: raidlab.FaultRestore}); err != nil {
			return err
		}
		fmt.Fprintln(stdout, reportLine(k.name, runsTo, signals, c))
	}
	if c.record != "" {
		if err := writeRuns(c.record, m.recorded); err != nil {
			return err
		}
	}
	if c.recordFaulted != "" {
		if err := writeJSONLines(c.recordFaulted, m.faults); err != nil {
			return err
		}
	}
	replay(stdout, stderr, c.det, m.recorded, c.every, c.days)
	return nil
}

// startLab brings up a lab array (raidlab up, its own process), ext4 on it,
// mounted under c.work; cleanup unmounts it and takes the array down.
func startLab(ctx context.Context, stderr io.Writer, c cfg) (lab *raidlab.Client, mnt string, cleanup func(), err error) {
	var undo []func()
	cleanup = func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	root := filepath.Join(c.work, "state")
	mnt = filepath.Join(c.work, "mnt")
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		return nil, "", cleanup, err
	}
	out, err := exec.CommandContext(ctx, c.raidlab, "up", "--state-root", root, "--data-root", c.work,
		"--level", c.level, "--disks", fmt.Sprint(c.disks), "--size", "512MiB", "--preset", c.preset).Output()
	if err != nil {
		return nil, "", cleanup, fmt.Errorf("raidlab up: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	dev := lines[len(lines)-1]
	undo = append(undo, func() {
		if out, err := exec.Command(c.raidlab, "down", dev, "--state-root", root).CombinedOutput(); err != nil {
			fmt.Fprintf(stderr, "# raidlab down %s: %v: %s (clean up with raidlab reap --state-root %s)\n", dev, err, out, root)
		}
	})
	if out, err := exec.CommandContext(ctx, "mkfs.ext4", "-q", "-F", dev).CombinedOutput(); err != nil {
		return nil, "", cleanup, fmt.Errorf("mkfs: %v: %s", err, out)
	}
	if out, err := exec.CommandContext(ctx, "mount", dev, mnt).CombinedOutput(); err != nil {
		return nil, "", cleanup, fmt.Errorf("mount: %v: %s", err, out)
	}
	undo = append(undo, func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			fmt.Fprintf(stderr, "# umount %s: %v: %s\n", mnt, err, out)
		}
	})
	st, err := raidlab.Find(root, dev)
	if err != nil {
		return nil, "", cleanup, err
	}
	fmt.Fprintf(stderr, "# lab %s: %s ×%d %s, ext4 at %s; %d ops per run at %g IOPS, every %v (simulated)\n",
		dev, c.level, c.disks, c.preset, mnt, c.ops, c.iops, c.every)
	return raidlab.NewClient(st.Control), mnt, cleanup, nil
}

// prober returns one probe run on mnt as the evaluator judges it: 8 KiB
// random reads at QD 1, c.ops under a c.iops cap.
func prober(ctx context.Context, mnt string, c cfg) func() (baseline.Run, error) {
	o := probe.DefaultOptions()
	o.Dir, o.FileSize, o.FillRate = mnt, 64<<20, 0
	o.MinFreeBytes, o.MinFreePercent, o.BusyThreshold, o.LatencyCeiling = 0, 0, 0, 0
	o.Kind, o.QueueDepth, o.Ops, o.IOPS, o.MaxDuration = c.kind, 1, c.ops, c.iops, 30*time.Second
	return func() (baseline.Run, error) {
		res, err := probe.Run(ctx, o)
		if err != nil {
			return baseline.Run{}, err
		}
		pr := &store.ProbeRun{ProbeResult: store.ProbeResult{Ops: uint64(res.Ops), IOPSCap: res.IOPSCap,
			Duration: time.Duration(res.Duration * float64(time.Second)), StoppedReason: res.StoppedReason}}
		return evaluator.RunOf(pr, res.Histogram), nil
	}
}

// measurer runs the trials of each fault kind, stamping the runs on one
// simulated clock and keeping the healthy runs for the noise replay.
type measurer struct {
	lab      *raidlab.Client
	probe    func() (baseline.Run, error)
	c        cfg
	stderr   io.Writer
	t        time.Time
	recorded []baseline.Run
	faults   []faultedRun
}

// faultedRun is one faulted run, for -record-faulted.
type faultedRun struct {
	Fault string
	Trial int
	Run   baseline.Run
}

// kind runs c.trials trials of one fault kind: c.healthy healthy runs
// through a fresh detector, the fault, then runs until degraded (at most
// c.maxRuns; -1 when it never was). It returns the faulted runs to
// degraded per trial and how often each signal named the state.
func (m *measurer) kind(ctx context.Context, k faultKind) ([]int, map[baseline.Signal]int, error) {
	var runsTo []int
	signals := map[baseline.Signal]int{}
	for trial := range m.c.trials {
		if _, err := m.lab.Fault(ctx, raidlab.Fault{Kind: raidlab.FaultRestore}); err != nil {
			return nil, nil, err
		}
		d, err := baseline.NewDetector(m.c.det)
		if err != nil {
			return nil, nil, err
		}
		for range m.c.healthy {
			r, err := m.probe()
			if err != nil {
				return nil, nil, err
			}
			m.recorded = append(m.recorded, r)
			m.t = m.t.Add(m.c.every)
			if s := d.ObserveRun(m.t, r, baseline.Refs{}); s.Status == baseline.Degraded {
				fmt.Fprintf(m.stderr, "# %s trial %d: degraded before the fault (%s)\n", k.name, trial, s.Detail())
			}
		}
		got, last, err := m.faulted(ctx, k, d, trial)
		if err != nil {
			return nil, nil, err
		}
		if got > 0 {
			signals[last.Signal]++
		}
		fmt.Fprintf(m.stderr, "# %s trial %d: %d faulted runs to degraded (%s)\n", k.name, trial, got, last.Detail())
		runsTo = append(runsTo, got)
	}
	return runsTo, signals, nil
}

// faulted applies the fault and runs until d is degraded: the number of
// faulted runs (-1: not within c.maxRuns) and the last state.
func (m *measurer) faulted(ctx context.Context, k faultKind, d *baseline.Detector, trial int) (int, baseline.State, error) {
	var last baseline.State
	first := -1
	for i := range m.c.maxRuns {
		// The throttle's runs follow each other at once in real time; at
		// the simulated schedule the bucket refills between them (every ×
		// iops tokens ≥ burst): start it full again before each run.
		if i == 0 || k.fault.Kind == raidlab.FaultThrottle {
			if _, err := m.lab.Fault(ctx, k.fault); err != nil {
				return 0, last, err
			}
		}
		r, err := m.probe()
		if err != nil {
			return 0, last, err
		}
		m.t = m.t.Add(m.c.every)
		s := d.ObserveRun(m.t, r, baseline.Refs{})
		if first < 0 {
			last = s
		}
		if m.c.recordFaulted != "" {
			m.faults = append(m.faults, faultedRun{Fault: k.name, Trial: trial, Run: r})
		}
		if s.Status == baseline.Degraded && first < 0 {
			first = i + 1
			if m.c.recordFaulted == "" {
				break
			}
		}
	}
	return first, last, nil
}

// reportLine is one fault kind's result line.
func reportLine(name string, runsTo []int, signals map[baseline.Signal]int, c cfg) string {
	med := medianInt(runsTo)
	detect := "none"
	if med > 0 {
		detect = fmt.Sprintf("%.0f", (time.Duration(med)*c.every + c.extra).Seconds())
	}
	var sigs []string
	for s, n := range signals {
		sigs = append(sigs, fmt.Sprintf("%s:%d", s, n))
	}
	slices.Sort(sigs)
	return fmt.Sprintf("fault=%s signal=%s runs=%v detect_seconds=%s", name, strings.Join(sigs, ","), runsTo, detect)
}

// noise replays each recording for days × seeds through bare detectors
// (replay.Quick: six volumes, every kind) and prints the degraded
// transitions — false alerts — by signal:
//
//	noise=<source> days=<days × seeds> false_alerts=<n> median=<n> p99=<n> mean=<n> rate=<n>
func noise(stdout io.Writer, files []string, det baseline.Config, sch replaypkg.Schedule, days float64, seeds int) error {
	for _, path := range files {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		rec, err := replaypkg.Read(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		total := map[baseline.Signal]int{}
		for seed := range seeds {
			got, err := replaypkg.Quick(rec, sch, det, 6, days, uint64(seed))
			if err != nil {
				return err
			}
			for s, n := range got {
				total[s] += n
			}
		}
		sum := 0
		for _, n := range total {
			sum += n
		}
		fmt.Fprintf(stdout, "noise=%s days=%g false_alerts=%d", rec.Source, days*float64(seeds), sum)
		for _, s := range baseline.Signals() {
			fmt.Fprintf(stdout, " %s=%d", s, total[s])
		}
		fmt.Fprintln(stdout)
	}
	return nil
}

// replay feeds days of the recorded healthy runs, drawn at random, through
// a fresh detector and counts its degraded episodes: false alerts.
func replay(stdout, stderr io.Writer, det baseline.Config, recorded []baseline.Run, every time.Duration, days float64) {
	n := int(days * 24 * float64(time.Hour/every))
	rng := rand.New(rand.NewPCG(1, 1))
	d, _ := baseline.NewDetector(det)
	t := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	falseAlerts := 0
	prev := baseline.OK
	for i := range n {
		s := d.ObserveRun(t.Add(time.Duration(i+1)*every), recorded[rng.IntN(len(recorded))], baseline.Refs{})
		if s.Status == baseline.Degraded && prev != baseline.Degraded {
			falseAlerts++
			fmt.Fprintf(stderr, "# replay run %d: degraded (%s)\n", i, s.Detail())
		}
		prev = s.Status
	}
	fmt.Fprintf(stdout, "false_alerts=%d replay_days=%g healthy_runs=%d\n", falseAlerts, days, len(recorded))
}

func writeRuns(path string, runs []baseline.Run) error { return writeJSONLines(path, runs) }

func writeJSONLines[T any](path string, runs []T) error {
	var b []byte
	for _, r := range runs {
		line, err := json.Marshal(r)
		if err != nil {
			return err
		}
		b = append(append(b, line...), '\n')
	}
	return os.WriteFile(path, b, 0o644)
}

func readRuns(path string) ([]baseline.Run, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []baseline.Run
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var r baseline.Run
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, r)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no runs", path)
	}
	return out, nil
}

func medianInt(xs []int) int {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return -1
	}
	// A trial that never degraded (-1) counts as the slowest.
	for i, x := range s {
		if x < 0 {
			s[i] = 1 << 30
		}
	}
	slices.Sort(s)
	m := s[len(s)/2]
	if m == 1<<30 {
		return -1
	}
	return m
}
