//go:build linux

// Command seeds reproduces the seeds' alignment experiments (DESIGN.md §1,
// measured effects) on lab arrays: an emulated array (internal/lab/raidlab)
// with real partitions made by parted at the seeds' offsets, a real file
// system, Plumbline's own probe engine (`agent probe`) and fio on the same
// file. It prints a table and ends with one line per experiment:
//
//	experiment=<id> predicted=<split fraction> measured=<IOPS loss as a fraction> ...
//
// Run it through bench/seeds.sh (root, /dev/fuse, parted, mkfs, fio).
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/plumbline/plumbline/internal/command"
	"github.com/plumbline/plumbline/internal/lab/raidlab"
)

func main() { os.Exit(runMain(os.Args[1:], os.Stdout, os.Stderr)) }

func runMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("seeds", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		ids    = fs.String("only", "", "comma-separated experiment ids (default: all)")
		preset = fs.String("preset", "sas15k", "member model (the seeds ran 15K SAS disks)")
		agent  = fs.String("agent", "", "agent binary (default: built from ./cmd/agent)")
		work   = fs.String("work", "/var/tmp/plumbline-seeds", "mount points and backing files")
		noFio  = fs.Bool("no-fio", false, "skip the fio reference runs")
	)
	r := &Runner{Log: stderr}
	fs.StringVar(&r.FS, "fs", "ext4-bigalloc", "file system: ext4-bigalloc (64 KiB clusters), ext4 (4 KiB blocks) or xfs (su = stripe unit)")
	fs.IntVar(&r.Rounds, "rounds", 5, "rounds per experiment (medians are taken over them)")
	fs.IntVar(&r.Ops, "ops", 3000, "8 KiB random ops per run")
	fs.IntVar(&r.LogOps, "log-ops", 1000, "log writes per run")
	fs.IntVar(&r.QD, "qd", 8, "queue depth of the 8 KiB random runs (the seeds: SQLIO, 4-16 threads)")
	only := fs.String("workloads", "", "comma-separated workloads to run (read, write, log8k, log64k; default all)")
	fileMiB := fs.Int64("file-mib", 256, "probe file size, MiB")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	p, err := raidlab.LookupPreset(*preset)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	r.Preset, r.Fio, r.FileSize = p, !*noFio, *fileMiB<<20
	if *only != "" {
		r.Only = strings.Split(*only, ",")
	}
	r.Work = filepath.Join(*work, "mnt")
	r.DataRoot = filepath.Join(*work, "data")
	r.StateRoot = raidlab.DefaultStateRoot
	ctx, stop := command.Context()
	defer stop()

	if *agent == "" {
		bin := filepath.Join(*work, "agent")
		os.MkdirAll(*work, 0o755)
		if out, err := exec.Command("go", "build", "-o", bin, "./cmd/agent").CombinedOutput(); err != nil {
			fmt.Fprintf(stderr, "build agent: %v\n%s", err, out)
			return 1
		}
		*agent = bin
	}
	r.Agent = *agent

	var exps []Experiment
	for _, e := range Experiments() {
		if *ids == "" || slices.Contains(strings.Split(*ids, ","), e.ID) {
			exps = append(exps, e)
		}
	}
	if len(exps) == 0 {
		fmt.Fprintf(stderr, "no experiment matches %q\n", *ids)
		return 2
	}
	var results []Result
	for _, e := range exps {
		res, err := r.Run(ctx, e)
		if err != nil {
			fmt.Fprintln(stderr, "seeds:", err)
			return 1
		}
		results = append(results, res)
	}
	fmt.Fprintf(stdout, "preset %s, file system %s, %d rounds, %d random ops at QD %d / %d log ops per run, probe file %d MiB\n\n",
		r.Preset.Name, r.FS, r.Rounds, r.Ops, r.QD, r.LogOps, *fileMiB)
	printTable(stdout, results)
	fmt.Fprintln(stdout)
	for _, res := range results {
		s := res.Summarize()
		fmt.Fprintf(stdout, "experiment=%s predicted=%.4f measured=%.4f%s\n", res.Experiment.ID, s.Predicted, s.Measured, details(res, s))
	}
	return 0
}

// details are the per-workload losses after the three required fields.
func details(res Result, s Summary) string {
	var b strings.Builder
	// A split costs one more member op: at saturation the array serves
	// 1/(1+f) as many requests, a loss of f/(1+f).
	fmt.Fprintf(&b, " loss_if_saturated=%.4f", s.Predicted/(1+s.Predicted))
	for _, w := range res.Experiment.Workloads() {
		if _, ok := s.Loss[w.Name]["probe"]; !ok {
			continue
		}
		fmt.Fprintf(&b, " %s_probe=%.4f", w.Name, s.Loss[w.Name]["probe"])
		if v, ok := s.Loss[w.Name]["fio"]; ok {
			fmt.Fprintf(&b, " %s_fio=%.4f", w.Name, v)
		}
	}
	return b.String()
}

func printTable(w io.Writer, results []Result) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "experiment\tworkload\tsplit A\tsplit B\tprobe IOPS A\tprobe IOPS B\tloss probe\tloss fio\tpredicted\tseeds\tload before → after")
	for _, res := range results {
		s := res.Summarize()
		for _, wl := range res.Experiment.Workloads() {
			if _, ok := s.Loss[wl.Name]["probe"]; !ok {
				continue
			}
			fmt.Fprintf(tw, "%s\t%s\t%.4f\t%.4f\t%.0f\t%.0f\t%+.1f%%\t%s\t%.2f%%\t%s\t%s → %s\n",
				res.Experiment.ID, wl.Name, s.Split["A"][wl.Name], s.Split["B"][wl.Name],
				medianIOPS(res, wl.Name, "A"), medianIOPS(res, wl.Name, "B"),
				100*s.Loss[wl.Name]["probe"], fioCell(s, wl.Name), 100*s.Predicted, res.Experiment.Seeds, res.Load[0], res.Load[1])
		}
	}
	tw.Flush()
}

func fioCell(s Summary, w string) string {
	if v, ok := s.Loss[w]["fio"]; ok {
		return fmt.Sprintf("%+.1f%%", 100*v)
	}
	return "-"
}

func medianIOPS(res Result, w, side string) float64 {
	var xs []float64
	for _, x := range res.Samples {
		if x.Workload == w && x.Side == side && x.Tool == "probe" {
			xs = append(xs, x.IOPS)
		}
	}
	if len(xs) == 0 {
		return 0
	}
	return median(xs)
}
