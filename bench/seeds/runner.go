//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/plumbline/plumbline/internal/agent/probe"
	"github.com/plumbline/plumbline/internal/align"
	"github.com/plumbline/plumbline/internal/lab/raidlab"
)

// Experiment is one of the seeds' comparisons: the same array with a
// partition at offset A (the tested one, usually 63 sectors) and one at
// offset B (the reference), the same I/O on both.
type Experiment struct {
	ID       string
	Title    string
	Geometry raidlab.Geometry
	A, B     int64 // partition start, 512-byte sectors
	Log      bool  // synced sequential log writes (8 and 64 KiB, 1 thread) instead of 8 KiB random I/O at QD 8
	Seeds    string
}

const (
	kib = int64(1) << 10
	gib = int64(1) << 30
)

// Experiments are the rows of DESIGN.md's measured-effects table that a
// lab can reproduce.
func Experiments() []Experiment {
	r10 := raidlab.Geometry{Level: raidlab.RAID10, Members: 4, StripeUnit: 64 * kib, Size: 2*gib + 64<<20}
	r5 := raidlab.Geometry{Level: raidlab.RAID5, Members: 4, StripeUnit: 128 * kib, Size: 2*gib + 64<<20}
	r1 := raidlab.Geometry{Level: raidlab.RAID1, Members: 2, Size: 2*gib + 64<<20}
	return []Experiment{
		{ID: "raid10-64k-31.5k", Title: "RAID 10, 4 disks, 64 KiB: 31.5 KiB vs 64 KiB", Geometry: r10, A: 63, B: 128, Seeds: "+11% reads, +10.6% writes"},
		{ID: "raid5-128k-31.5k", Title: "RAID 5, 4 disks, 128 KiB: 31.5 KiB vs 64 KiB", Geometry: r5, A: 63, B: 128, Seeds: "+5.7% reads, +5.5% writes"},
		{ID: "raid1-31.5k", Title: "RAID 1: 31.5 KiB vs 64 KiB", Geometry: r1, A: 63, B: 128, Seeds: "no practical difference"},
		{ID: "raid1-log-31.5k", Title: "RAID 1 log writes 8/64 KiB synced, 1 thread: 31.5 KiB vs 64 KiB", Geometry: r1, A: 63, B: 128, Log: true, Seeds: "no difference"},
		{ID: "raid10-64k-1m", Title: "RAID 10, 4 disks, 64 KiB: 64 KiB vs 1 MiB", Geometry: r10, A: 128, B: 2048, Seeds: "~+1%"},
	}
}

// Predicted is the split model's answer (internal/align): the share of the
// experiment's I/Os that split at offset A minus the share at B, for 8 KiB
// I/Os on the file system's grid. Levels without a stripe unit never split.
func (e Experiment) Predicted(grid int64) float64 {
	if e.Geometry.Level == raidlab.RAID1 || e.Geometry.Level == raidlab.Single {
		return 0
	}
	su := uint64(e.Geometry.StripeUnit)
	g := uint64(grid)
	return align.SplitFraction(uint64(e.A*512), 8192, g, su) - align.SplitFraction(uint64(e.B*512), 8192, g, su)
}

// Workload is one measured I/O pattern.
type Workload struct {
	Name      string // read, write, log8k, log64k
	Kind      string // agent probe --kind
	BlockSize int64
	QD        int
}

func (e Experiment) Workloads() []Workload {
	if e.Log {
		return []Workload{{"log8k", "log-write", 8 * kib, 1}, {"log64k", "log-write", 64 * kib, 1}}
	}
	return []Workload{{"read", "random-read", 8 * kib, 8}, {"write", "random-write", 8 * kib, 8}}
}

// Runner runs experiments on in-process labs.
type Runner struct {
	Agent     string // agent binary
	Preset    raidlab.Preset
	FS        string // ext4-bigalloc (64 KiB clusters), ext4 (4 KiB blocks) or xfs (su = stripe unit)
	Rounds    int
	Ops       int // 8 KiB random ops per run
	LogOps    int // log writes per run
	Fio       bool
	FileSize  int64 // probe file
	StateRoot string
	DataRoot  string
	Work      string // mount points go here
	Log       io.Writer
	Only      []string // workload names to run (default: all of the experiment's)
	QD        int      // queue depth of the random workloads (default 8, the seeds' SQLIO threads)
}

func (r *Runner) workloads(e Experiment) []Workload {
	var ws []Workload
	for _, w := range e.Workloads() {
		if r.QD > 0 && w.QD > 1 {
			w.QD = r.QD
		}
		if len(r.Only) == 0 || slices.Contains(r.Only, w.Name) {
			ws = append(ws, w)
		}
	}
	return ws
}

// Grid is the placement grid of 8 KiB I/Os the runner's file system gives:
// min(8 KiB, allocation unit) — what DESIGN.md's model takes.
func (r *Runner) Grid() int64 {
	if r.FS == "ext4" || r.FS == "xfs-4k" {
		return 4 * kib
	}
	return 8 * kib // 64 KiB clusters (ext4 bigalloc) or stripe-aligned XFS extents: 8 KiB I/Os land on an 8 KiB grid
}

// Sample is one measured run.
type Sample struct {
	Side     string // "A" or "B"
	Workload string
	Tool     string // probe or fio
	IOPS     float64
	Split    float64 // the array's counted split fraction during the run
	Ops      float64 // member ops per request during the run
}

// Result is an experiment's samples.
type Result struct {
	Experiment Experiment
	Predicted  float64
	Samples    []Sample
	Load       [2]string // /proc/loadavg before and after
}

func (r *Runner) logf(format string, args ...any) {
	if r.Log != nil {
		fmt.Fprintf(r.Log, format+"\n", args...)
	}
}

// Run builds the experiment's lab and runs Rounds rounds; in each round
// both sides run every workload (probe, then fio), the side order
// alternating between rounds so that drift cancels.
func (r *Runner) Run(ctx context.Context, e Experiment) (res Result, err error) {
	res = Result{Experiment: e, Predicted: e.Predicted(r.Grid())}
	res.Load[0] = loadavg()
	lab, err := raidlab.Start(ctx, raidlab.Config{Geometry: e.Geometry, Preset: r.Preset, StateRoot: r.StateRoot, DataRoot: r.DataRoot})
	if err != nil {
		return res, err
	}
	defer func() {
		if cerr := lab.Close(); cerr != nil {
			err = errors.Join(err, cerr)
		}
	}()
	r.logf("%s: lab %s on %s (%s, %d × %s, stripe unit %d)", e.ID, lab.ID, lab.Device, e.Geometry.Level, e.Geometry.Members, r.Preset.Name, e.Geometry.StripeUnit)
	dirs, err := r.prepare(ctx, lab, e)
	if err != nil {
		return res, err
	}
	for round := range r.Rounds {
		sides := []int{0, 1}
		if round%2 == 1 {
			sides = []int{1, 0}
		}
		for _, w := range r.workloads(e) {
			for _, si := range sides {
				side := "AB"[si : si+1]
				for _, tool := range r.tools() {
					before := lab.Array().Stats()
					iops, err := r.measure(ctx, tool, dirs[si], w)
					if err != nil {
						return res, fmt.Errorf("%s round %d side %s %s %s: %w", e.ID, round+1, side, w.Name, tool, err)
					}
					s := sample(before, lab.Array().Stats(), w)
					s.Side, s.Workload, s.Tool, s.IOPS = side, w.Name, tool, iops
					res.Samples = append(res.Samples, s)
					r.logf("%s round %d %s side %s (%d s) %-5s %8.1f IOPS  split %.4f  member ops/request %.2f",
						e.ID, round+1, w.Name, side, []int64{e.A, e.B}[si], tool, iops, s.Split, s.Ops)
				}
			}
		}
	}
	res.Load[1] = loadavg()
	return res, nil
}

func (r *Runner) tools() []string {
	if r.Fio {
		return []string{"probe", "fio"}
	}
	return []string{"probe"}
}

// sample turns the array's counters around one run into a split fraction
// and member ops per request.
func sample(b, a raidlab.Stats, w Workload) Sample {
	var reqs, splits uint64
	if w.Kind == "random-read" {
		reqs, splits = a.ReadRequests-b.ReadRequests, a.SplitReads-b.SplitReads
	} else {
		reqs, splits = a.WriteRequests-b.WriteRequests, a.SplitWrites-b.SplitWrites
	}
	s := Sample{}
	if reqs > 0 {
		s.Split = float64(splits) / float64(reqs)
		all := (a.ReadRequests + a.WriteRequests) - (b.ReadRequests + b.WriteRequests)
		s.Ops = float64(a.Ops()-b.Ops()) / float64(all)
	}
	return s
}

// prepare makes the two partitions (at A, and at 1 GiB + B, so both sit
// at the same offsets modulo every stripe unit as A and B alone would),
// their file systems and the probe files.
func (r *Runner) prepare(ctx context.Context, lab *raidlab.Lab, e Experiment) ([2]string, error) {
	var dirs [2]string
	dev := lab.Device
	half := gib / 512
	if err := run(ctx, "parted", "-s", dev, "mklabel", "msdos"); err != nil {
		return dirs, err
	}
	if err := run(ctx, "parted", "-s", dev, "unit", "s", "mkpart", "primary", fmt.Sprintf("%ds", e.A), fmt.Sprintf("%ds", half-1)); err != nil {
		return dirs, err
	}
	if err := run(ctx, "parted", "-s", dev, "--", "unit", "s", "mkpart", "primary", fmt.Sprintf("%ds", half+e.B), "-1s"); err != nil {
		return dirs, err
	}
	parts := [2]string{dev + "p1", dev + "p2"}
	if err := waitParts(ctx, dev, parts[:]); err != nil {
		return dirs, err
	}
	for i, p := range parts {
		if err := r.mkfs(ctx, p, e); err != nil {
			return dirs, err
		}
		dirs[i] = filepath.Join(r.Work, lab.ID, "AB"[i:i+1])
		if err := os.MkdirAll(dirs[i], 0o755); err != nil {
			return dirs, err
		}
		if err := run(ctx, "mount", p, dirs[i]); err != nil {
			return dirs, err
		}
		// Create and fill the probe file (one op measured, not kept).
		if _, err := r.probe(ctx, dirs[i], Workload{"fill", "random-read", 8 * kib, 1}, 1); err != nil {
			return dirs, fmt.Errorf("create the probe file on %s: %w", p, err)
		}
	}
	return dirs, nil
}

func (r *Runner) mkfs(ctx context.Context, part string, e Experiment) error {
	switch r.FS {
	case "ext4-bigalloc":
		// 64 KiB clusters: every extent starts on a 64 KiB boundary of
		// the partition, as an NTFS 64 KiB allocation unit does.
		return run(ctx, "mkfs.ext4", "-q", "-F", "-O", "bigalloc", "-C", "65536", part)
	case "ext4":
		return run(ctx, "mkfs.ext4", "-q", "-F", part)
	case "xfs":
		args := []string{"-q", "-f", "-l", "size=64m"}
		if e.Geometry.StripeUnit > 0 {
			data := e.Geometry.Members / 2
			if e.Geometry.Level == raidlab.RAID5 {
				data = e.Geometry.Members - 1
			} else if e.Geometry.Level == raidlab.RAID0 {
				data = e.Geometry.Members
			}
			args = append(args, "-d", fmt.Sprintf("su=%dk,sw=%d", e.Geometry.StripeUnit/kib, data))
		}
		return run(ctx, "mkfs.xfs", append(args, part)...)
	}
	return fmt.Errorf("unknown file system %q (want ext4-bigalloc, ext4 or xfs)", r.FS)
}

func waitParts(ctx context.Context, dev string, parts []string) error {
	for i := range 100 {
		ok := true
		for _, p := range parts {
			if _, err := os.Stat(p); err != nil {
				ok = false
			}
		}
		if ok {
			return nil
		}
		if i == 5 {
			exec.CommandContext(ctx, "partx", "-u", dev).Run()
			exec.CommandContext(ctx, "partx", "-a", dev).Run()
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("partitions %v of %s did not appear", parts, dev)
}

func (r *Runner) measure(ctx context.Context, tool, dir string, w Workload) (float64, error) {
	ops := r.Ops
	if w.Kind == "log-write" {
		ops = r.LogOps
	}
	if tool == "fio" {
		return r.fio(ctx, dir, w, ops)
	}
	return r.probe(ctx, dir, w, ops)
}

// probe runs `agent probe` with every guard that would cut a saturation
// run short turned off, and returns its IOPS.
func (r *Runner) probe(ctx context.Context, dir string, w Workload, ops int) (float64, error) {
	args := []string{"probe", "--dir", dir, "--kind", w.Kind, "--block-size", fmt.Sprint(w.BlockSize),
		"--qd", fmt.Sprint(w.QD), "--ops", fmt.Sprint(ops), "--file-size", fmt.Sprint(r.FileSize),
		"--iops", "0", "--fill-rate", "0", "--min-free", "0", "--min-free-percent", "0",
		"--busy-threshold", "0", "--latency-ceiling", "0", "--max-duration", "10m", "--format", "json"}
	out, err := output(ctx, r.Agent, args...)
	if err != nil {
		return 0, err
	}
	var res struct {
		IOPS          float64 `json:"iops"`
		Ops           int     `json:"ops"`
		Errors        int     `json:"errors"`
		StoppedReason string  `json:"stopped_reason"`
		CacheBypass   bool    `json:"cache_bypass"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		return 0, fmt.Errorf("agent probe output: %w", err)
	}
	if res.Errors > 0 || res.Ops != ops || !res.CacheBypass {
		return 0, fmt.Errorf("agent probe: %d/%d ops, %d errors, stopped %q, cache bypass %v", res.Ops, ops, res.Errors, res.StoppedReason, res.CacheBypass)
	}
	return res.IOPS, nil
}

// fio runs the same I/O on the same probe file, past its 1 MiB header.
func (r *Runner) fio(ctx context.Context, dir string, w Workload, ops int) (float64, error) {
	rw := map[string]string{"random-read": "randread", "random-write": "randwrite", "log-write": "write"}[w.Kind]
	args := []string{"--name=seeds", "--filename=" + filepath.Join(dir, probe.DefaultFileName),
		"--offset=1M", fmt.Sprintf("--size=%d", r.FileSize-(1<<20)), "--rw=" + rw,
		fmt.Sprintf("--bs=%d", w.BlockSize), fmt.Sprintf("--iodepth=%d", w.QD), "--ioengine=libaio",
		"--direct=1", fmt.Sprintf("--number_ios=%d", ops), "--norandommap", "--randrepeat=0",
		"--output-format=json"}
	if w.Kind == "log-write" {
		args = append(args, "--ioengine=psync", "--sync=dsync")
	}
	out, err := output(ctx, "fio", args...)
	if err != nil {
		return 0, err
	}
	var res struct {
		Jobs []struct {
			Read  struct{ IOPS float64 } `json:"read"`
			Write struct{ IOPS float64 } `json:"write"`
		} `json:"jobs"`
	}
	// fio may print warnings before the JSON.
	if i := bytes.IndexByte(out, '{'); i > 0 {
		out = out[i:]
	}
	if err := json.Unmarshal(out, &res); err != nil || len(res.Jobs) != 1 {
		return 0, fmt.Errorf("fio output: %v (%d jobs)", err, len(res.Jobs))
	}
	if rw == "randread" {
		return res.Jobs[0].Read.IOPS, nil
	}
	return res.Jobs[0].Write.IOPS, nil
}

func run(ctx context.Context, name string, args ...string) error {
	_, err := output(ctx, name, args...)
	return err
}

func output(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// Summary is an experiment's medians.
type Summary struct {
	Predicted float64
	// Loss[workload][tool] is the median over rounds of 1 − IOPS(A)/IOPS(B).
	Loss map[string]map[string]float64
	// Split[side][workload] is the median counted split fraction.
	Split map[string]map[string]float64
	// OpsPerRequest[side][workload] is the median of member ops per request.
	OpsPerRequest map[string]map[string]float64
	Measured      float64 // the probe engine's loss, mean over the workloads
}

// Summarize pairs the rounds' A and B samples and takes medians.
func (res Result) Summarize() Summary {
	s := Summary{Predicted: res.Predicted, Loss: map[string]map[string]float64{},
		Split: map[string]map[string]float64{"A": {}, "B": {}}, OpsPerRequest: map[string]map[string]float64{"A": {}, "B": {}}}
	type key struct{ w, tool, side string }
	by := map[key][]Sample{}
	for _, x := range res.Samples {
		k := key{x.Workload, x.Tool, x.Side}
		by[k] = append(by[k], x)
	}
	var probeLoss []float64
	for _, w := range res.Experiment.Workloads() {
		s.Loss[w.Name] = map[string]float64{}
		for _, tool := range []string{"probe", "fio"} {
			a, b := by[key{w.Name, tool, "A"}], by[key{w.Name, tool, "B"}]
			var losses []float64
			for i := range min(len(a), len(b)) {
				if b[i].IOPS > 0 {
					losses = append(losses, 1-a[i].IOPS/b[i].IOPS)
				}
			}
			if len(losses) == 0 {
				continue
			}
			s.Loss[w.Name][tool] = median(losses)
			if tool == "probe" {
				probeLoss = append(probeLoss, s.Loss[w.Name][tool])
			}
		}
		for _, side := range []string{"A", "B"} {
			var sp, ops []float64
			for _, x := range by[key{w.Name, "probe", side}] {
				sp = append(sp, x.Split)
				ops = append(ops, x.Ops)
			}
			if len(sp) > 0 {
				s.Split[side][w.Name] = median(sp)
				s.OpsPerRequest[side][w.Name] = median(ops)
			}
		}
	}
	var sum float64
	for _, l := range probeLoss {
		sum += l
	}
	if len(probeLoss) > 0 {
		s.Measured = sum / float64(len(probeLoss))
	}
	return s
}

func median(xs []float64) float64 {
	ys := slices.Clone(xs)
	slices.Sort(ys)
	n := len(ys)
	if n%2 == 1 {
		return ys[n/2]
	}
	return (ys[n/2-1] + ys[n/2]) / 2
}
