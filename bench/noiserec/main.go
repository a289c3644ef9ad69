//go:build linux

// Command noiserec records probe noise for the replay (internal/lab/replay):
// it runs Plumbline's own probe engine (probe.Run, as the agent does) in
// short runs of -atom-ops operations, round-robin over the kinds, and
// appends each run's start time and latency histogram to a recording.
// Merged in order, those atoms are exactly the histograms longer runs over
// the same operations would have produced.
//
//	noiserec -dir /mnt/lab0/probe -source lab-fast-raid10 -atoms 1200 -o lab.txt
//
// It is a benchmark helper only; nothing in the agent or server uses it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/plumbline/plumbline/internal/agent/probe"
	"github.com/plumbline/plumbline/internal/bytesize"
	"github.com/plumbline/plumbline/internal/command"
	"github.com/plumbline/plumbline/internal/ctxtime"
	"github.com/plumbline/plumbline/internal/lab/replay"
)

func main() { os.Exit(run()) }

func run() int {
	var (
		dir      = flag.String("dir", "", "probe directory on the volume to record (required)")
		source   = flag.String("source", "", "label of what was recorded (required), e.g. lab-sas15k-raid10-64k")
		out      = flag.String("o", "", "recording file to write (required; plain text, gzip it to commit)")
		kinds    = flag.String("kinds", "random-read,random-write,log-write", "probe kinds, comma-separated")
		atoms    = flag.Int("atoms", 1000, "atoms to record per kind")
		atomOps  = flag.Int("atom-ops", 10, "operations per atom")
		iops     = flag.Float64("iops", 100, "IOPS cap of each atom (the agent's default)")
		pause    = flag.Duration("pause", 0, "pause after each round of kinds")
		note     = flag.String("note", "", "comment line(s) to add to the header")
		fileSize = bytesize.Size(probe.DefaultOptions().FileSize)
		minFree  = bytesize.Size(probe.DefaultOptions().MinFreeBytes)
	)
	flag.Var(&fileSize, "file-size", "probe file size")
	flag.Var(&minFree, "min-free", "free-space floor")
	flag.Parse()
	if *dir == "" || *source == "" || *out == "" || *atoms < 1 || *atomOps < 1 {
		flag.Usage()
		return 2
	}
	ctx, stop := command.Context()
	defer stop()

	f, err := os.OpenFile(*out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "noiserec:", err)
		return 1
	}
	defer f.Close()
	host, _ := os.Hostname()
	comments := []string{
		fmt.Sprintf("recorded %s on %s by bench/noiserec (probe.Run, 8 KiB, QD1, IOPS cap %g, file %s, O_DIRECT)", time.Now().UTC().Format(time.RFC3339), host, *iops, fileSize),
		"command: noiserec " + strings.Join(os.Args[1:], " "),
	}
	if *note != "" {
		comments = append(comments, *note)
	}
	w, err := replay.NewWriter(f, *source, *atomOps, comments...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "noiserec:", err)
		return 1
	}
	r := recorder{w: w, dir: *dir, kinds: strings.Split(*kinds, ","), atomOps: *atomOps, iops: *iops, fileSize: int64(fileSize), minFree: int64(minFree)}
	if err := r.record(ctx, *atoms, *pause); err != nil {
		fmt.Fprintln(os.Stderr, "noiserec:", err)
		return 1
	}
	return 0
}

// recorder writes atoms: short probe runs round-robin over the kinds.
type recorder struct {
	w                 *replay.Writer
	dir               string
	kinds             []string
	atomOps           int
	iops              float64
	fileSize, minFree int64
}

// record writes rounds of one atom per kind, pausing after each round;
// an interrupt ends it without error.
func (r *recorder) record(ctx context.Context, rounds int, pause time.Duration) error {
	start := time.Now()
	for i := range rounds {
		for _, k := range r.kinds {
			if err := r.atom(ctx, k, i); err != nil {
				if ctx.Err() != nil {
					fmt.Fprintf(os.Stderr, "noiserec: interrupted after %d rounds\n", i)
					return nil
				}
				return err
			}
		}
		if (i+1)%100 == 0 {
			fmt.Fprintf(os.Stderr, "noiserec: %d/%d rounds in %s\n", i+1, rounds, time.Since(start).Round(time.Second))
		}
		if pause > 0 && ctxtime.Sleep(ctx, pause) != nil {
			return nil
		}
	}
	return nil
}

// atom runs one atom of kind k and writes it (an atom without ops is
// reported and skipped).
func (r *recorder) atom(ctx context.Context, k string, round int) error {
	o := probe.DefaultOptions()
	o.Dir, o.Kind, o.Ops, o.IOPS = r.dir, probe.Kind(k), r.atomOps, r.iops
	o.FileSize, o.MinFreeBytes, o.MinFreePercent = r.fileSize, r.minFree, 1
	o.BusyThreshold = 0 // the recording is the noise, neighbours included
	res, err := probe.Run(ctx, o)
	if err != nil {
		return err
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if res.Ops == 0 || res.Histogram.Count() == 0 {
		fmt.Fprintf(os.Stderr, "noiserec: %s atom %d: no ops (%s)\n", k, round, res.StoppedReason)
		return nil
	}
	return r.w.Write(replay.Atom{At: res.StartedAt, Kind: k, Hist: res.Histogram})
}
