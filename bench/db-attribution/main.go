//go:build linux

// Command db-attribution is bench/db-attribution.sh's driver: it proves
// on real databases and real I/O that Plumbline reports a database's own
// I/O latency as the database counts it, and says whose fault a
// regression is. It starts the whole product on three lab arrays
// (internal/lab/fleetlab: raidlab RAID 0 × 2 sas15k by default, ext4, `server
// --dev`, `agent run`), puts a database on each (internal/lab/dblab: the
// host's PostgreSQL 15, PostgreSQL 17 in a debootstrapped trixie root,
// MariaDB with performance_schema), runs a light load on each (pgbench,
// sysbench, rate-limited), gives the agent the three as database sources,
// and reads the databases' own views every second as the ground truth.
// Then, database by database and in parallel, each scenario in turn:
//
//	device    member 0 of the array slowed ×factor      expect device
//	load      the workload's clients and rate ×load-x   expect load-or-database
//	throttle  a token bucket in front of the array      expect throttle
//
// each waits until the volume is judged healthy, makes the change, polls
// the server's judgement (its store, read-only) until it attributes a
// regression or -detect passes, and undoes the change. Every database
// interval the server stored is compared with the views over the same
// interval. Last, with -cost-rounds > 0, the agent's CPU and pgbench's
// TPS with the database sources on and off. Output (stdout), one line
// per scenario:
//
//	scenario=<device|load|throttle> trials=N correct=M median_seconds=S db_latency_error=E
//
// after a cost line when measured. It is a benchmark helper only (root,
// /dev/fuse, parted, mkfs.ext4, PostgreSQL, MariaDB, pgbench, sysbench).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/plumbline/plumbline/internal/command"
	"github.com/plumbline/plumbline/internal/ctxtime"
	"github.com/plumbline/plumbline/internal/lab/dblab"
	"github.com/plumbline/plumbline/internal/lab/fleetlab"
)

type flags struct {
	bin, dir, rootfs, pgbench, only, level             string
	every, dbEvery, poll, detect, settle, warmup, cost time.Duration
	ops, rounds, loadX, iops, burst, costRounds, scale int
	factor                                             float64
	smoke, sample, soak                                time.Duration
	pgMemory                                           int64
}

func main() { os.Exit(run()) }

func run() int {
	f := parseFlags()
	ctx, stop := command.Context()
	defer stop()
	if err := runBench(ctx, f); err != nil {
		fmt.Fprintln(os.Stderr, "db-attribution:", err)
		return 1
	}
	return 0
}

// parseFlags reads the command line.
func parseFlags() flags {
	var f flags
	flag.StringVar(&f.bin, "bin", "bin", "directory with the server, agent and raidlab binaries")
	flag.StringVar(&f.dir, "dir", "/var/tmp/plumbline-db-attribution", "work directory (removed first)")
	flag.StringVar(&f.rootfs, "rootfs", "/var/cache/plumbline-dbbench/trixie-pg17.tar", "trixie root with PostgreSQL 17 (bench/db-attribution/rootfs.sh)")
	flag.StringVar(&f.pgbench, "pgbench", "pgbench", "the pgbench binary")
	flag.StringVar(&f.only, "only", "", "comma-separated scenarios (default all: device, load, throttle)")
	flag.StringVar(&f.level, "level", "raid0", "the lab arrays' RAID level: raid0 (2 members), raid5 (3) or raid1 (2; a mirror hides a slow member from reads)")
	flag.DurationVar(&f.every, "every", 20*time.Second, "the agent's probe schedule")
	flag.IntVar(&f.ops, "ops", 50, "ops per probe run")
	flag.DurationVar(&f.dbEvery, "db-every", 20*time.Second, "the agent's database sampling interval")
	flag.DurationVar(&f.poll, "poll", 5*time.Second, "how often the server's judgement is read")
	flag.DurationVar(&f.detect, "detect", 10*time.Minute, "time allowed for the attribution after a change")
	flag.DurationVar(&f.settle, "settle", 8*time.Minute, "time allowed for a volume to be judged healthy again")
	flag.DurationVar(&f.warmup, "warmup", 30*time.Minute, "time allowed for the first healthy judgement")
	flag.IntVar(&f.rounds, "rounds", 2, "trials of each scenario per database (3 databases; 0: the cost alone)")
	flag.Float64Var(&f.factor, "factor", 3, "device: member 0 slowed by this factor")
	flag.IntVar(&f.loadX, "load-x", 8, "load: clients and rate multiplied by this")
	flag.IntVar(&f.iops, "throttle-iops", 20, "throttle: token bucket rate")
	flag.IntVar(&f.burst, "throttle-burst", 30, "throttle: token bucket burst")
	flag.IntVar(&f.scale, "scale", 10, "pgbench scale factor")
	flag.Int64Var(&f.pgMemory, "pg-memory", 128<<20, "PostgreSQL's memory cgroup limit in bytes, below its data (0: none)")
	flag.IntVar(&f.costRounds, "cost-rounds", 2, "cost: windows with and without collection, each (0: not measured)")
	flag.DurationVar(&f.cost, "cost-window", 60*time.Second, "cost: one window's length")
	flag.DurationVar(&f.sample, "sample", time.Second, "how often the bench reads the databases' views (the ground truth)")
	flag.DurationVar(&f.soak, "soak", 0, "with -rounds 0: run the base loads this long, then compare the stored intervals with the views")
	flag.DurationVar(&f.smoke, "smoke", 0, "harness check: no database sources for the agent; run the loads this long, print the views' deltas, stop")
	flag.Parse()
	return f
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s db-attribution: %s\n", time.Now().UTC().Format(time.TimeOnly), fmt.Sprintf(format, args...))
}

func runBench(ctx context.Context, f flags) error {
	os.RemoveAll(f.dir)
	if err := os.MkdirAll(f.dir, 0o755); err != nil {
		return err
	}
	st := setup{dir: f.dir, rootfs: f.rootfs, pgbench: f.pgbench, scale: f.scale, pgMemory: f.pgMemory, sbTables: 2, sbRows: 50000, every: f.dbEvery, logf: logf}
	var dbs []*database
	var closeDBs func()
	var closeOnce sync.Once
	arr, err := labArray(f.level)
	if err != nil {
		return err
	}
	s, err := fleetlab.Start(ctx, fleetlab.Plan{
		Bin: fleetlab.Binaries{Server: f.bin + "/server", Agent: f.bin + "/agent", Raidlab: f.bin + "/raidlab"},
		Dir: f.dir, Arrays: []fleetlab.Array{arr, arr, arr}, Every: f.every, Ops: f.ops, FileSize: "64MiB",
		BusyThreshold: 70, ReportInterval: 10 * time.Second, BaselineInterval: 30 * time.Second, Log: os.Stderr,
		BeforeAgent: func(ctx context.Context, s *fleetlab.Stack) (string, error) {
			var y string
			var err error
			dbs, y, closeDBs, err = startDatabases(ctx, st, s.Mounts)
			if f.smoke > 0 {
				y = ""
			}
			return y, err
		},
		// The databases stop before their arrays are unmounted.
		BeforeClose: func() {
			closeOnce.Do(func() {
				for _, d := range dbs {
					d.stopLoad()
				}
				if closeDBs != nil {
					closeDBs()
				}
			})
		},
	})
	if s != nil {
		defer s.Close()
	}
	if err != nil {
		return err
	}
	obs, err := openObserver(filepath.Join(f.dir, "server", "plumbline.db"))
	if err != nil {
		return err
	}
	defer obs.Close()
	b := &bench{stack: s, obs: obs, poll: f.poll, detect: f.detect, settle: f.settle, loadX: f.loadX, factor: f.factor,
		iops: f.iops, burst: f.burst, logf: logf}
	return b.run(ctx, f, dbs)
}

func (b *bench) run(ctx context.Context, f flags, dbs []*database) error {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	start := time.Now()
	for _, d := range dbs {
		wg.Add(1)
		go func() { defer wg.Done(); d.sampleEvery(sctx, f.sample, logf) }()
		if err := d.setLoad(1, d.rate); err != nil {
			return err
		}
	}
	if f.smoke > 0 {
		return smoke(ctx, f.smoke, dbs)
	}
	var scs []scenario
	for _, sc := range b.scenarios() {
		if f.only == "" || strings.Contains(","+f.only+",", ","+sc.name+",") {
			scs = append(scs, sc)
		}
	}
	results := b.runTrials(ctx, f, dbs, scs)
	if f.rounds == 0 && f.soak > 0 {
		logf("soak: %s of the base loads", f.soak)
		ctxtime.Sleep(ctx, f.soak)
	}
	// Interrupted (SIGINT, SIGTERM): the trials that finished are still
	// summed up.
	interrupted := ctx.Err() != nil
	if interrupted {
		var cancelPost context.CancelFunc
		ctx, cancelPost = context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancelPost()
	}
	var trials []trial
	var comps []comparison
	for i, d := range dbs {
		trials = append(trials, results[i]...)
		cs, err := compare(ctx, b.obs, d, start, results[i], 50, 1500*time.Millisecond)
		if err != nil {
			logf("%s: %v", d.name, err)
		}
		comps = append(comps, cs...)
	}
	for _, c := range comps {
		logf("compare: %s", c)
	}
	var cost string
	if f.costRounds > 0 && !interrupted {
		for _, d := range dbs {
			d.stopLoad()
		}
		rs, err := b.measureCost(ctx, dbs[0], agentYAML(dbs, filepath.Join(f.dir, "db.password"), 10*time.Second), f.costRounds, f.cost)
		if err != nil {
			logf("cost: %v", err)
		}
		cost = costLine(rs, 10*time.Second)
	}
	e, near, n := worst(comps, "quiet")
	logf("quiet intervals: %d compared, largest distance outside the views' range %.3f, largest difference from the nearest samples %.3f", n, e, near)
	if cost != "" {
		fmt.Println(cost)
	}
	for _, sc := range scs {
		e, near, n := worst(comps, sc.name)
		logf("%s intervals: %d compared, largest distance outside the views' range %.3f, largest difference from the nearest samples %.3f", sc.name, n, e, near)
	}
	for _, sc := range scs {
		fmt.Println(summary(sc.name, trials, comps))
	}
	return nil
}

// summary is a scenario's result line.
func summary(name string, trials []trial, comps []comparison) string {
	n, correct := 0, 0
	var secs []float64
	for _, t := range trials {
		if t.scenario != name {
			continue
		}
		n++
		if t.correct {
			correct++
			secs = append(secs, t.seconds)
		}
	}
	e, _, _ := worst(comps, name)
	med := "NA"
	if len(secs) > 0 {
		med = fmt.Sprintf("%.0f", median(secs))
	}
	return fmt.Sprintf("scenario=%s trials=%d correct=%d median_seconds=%s db_latency_error=%.3f", name, n, correct, med, e)
}

// smoke runs the base loads for d and prints each database's views over
// it: the harness alone, before the agent has database sources.
func smoke(ctx context.Context, d time.Duration, dbs []*database) error {
	from := time.Now()
	if err := ctxtime.Sleep(ctx, d); err != nil {
		return err
	}
	for _, db := range dbs {
		ds, off, err := db.over(from.Add(2*time.Second), time.Now())
		if err != nil {
			return fmt.Errorf("%s: %w", db.name, err)
		}
		if out, ok := db.loadExited(); ok {
			return fmt.Errorf("%s: the load ended: %s", db.name, out)
		}
		fmt.Printf("smoke %s: %s (misaligned %s)\n", db.name, dblab.Format(ds), off)
	}
	return nil
}

// runTrials runs the scenarios' trials on every database at once, each
// database's one after the other, once it is judged healthy; the trials of
// database i are results[i].
func (b *bench) runTrials(ctx context.Context, f flags, dbs []*database, scs []scenario) [][]trial {
	results := make([][]trial, len(dbs))
	if f.rounds == 0 {
		return results // the cost alone
	}
	var rw sync.WaitGroup
	for i, d := range dbs {
		rw.Add(1)
		go func() {
			defer rw.Done()
			if !b.waitQuiet(ctx, d, f.warmup) {
				logf("%s: not judged healthy within the warm-up (%s): trials run anyway", d.name, f.warmup)
			}
			results[i] = b.runDB(ctx, d, scs, f.rounds)
		}()
	}
	rw.Wait()
	return results
}

// labArray is one of the bench's arrays at level. RAID 0 is the default:
// a slow member shows in the database's own timed reads and synchronous
// writes (half the chunks live on it), as on RAID 5 (a third, and each
// partial-stripe write reads and writes parity); a RAID 1 mirror sends
// reads to the shorter queue, i.e. the healthy member, and hides a slow
// member from them. On RAID 5 the parity writes keep the arrays near the
// busy guard's threshold under the bench's base loads and double
// PostgreSQL's usual WAL sync, which the ×8 load then raised too little
// to be a regression (bench/RESULTS-db.md).
func labArray(level string) (fleetlab.Array, error) {
	a := fleetlab.Array{Level: level, Size: "8GiB", Preset: "sas15k"}
	switch level {
	case "raid5":
		a.Disks, a.StripeUnit = 3, "64KiB"
	case "raid0":
		a.Disks, a.StripeUnit = 2, "64KiB"
	case "raid1":
		a.Disks = 2
	default:
		return a, fmt.Errorf("-level %q: want raid5, raid0 or raid1", level)
	}
	return a, nil
}
