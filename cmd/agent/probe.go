package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/plumbline/plumbline/internal/agent/config"
	"github.com/plumbline/plumbline/internal/agent/probe"
	"github.com/plumbline/plumbline/internal/bytesize"
)

const probeUsage = `usage: agent probe --dir DIR [--kind random-read|random-write|log-write|stripe-scan] [flags]
       agent probe --cleanup --dir DIR

Runs one bounded, low-impact I/O probe against Plumbline's own probe file
(DIR/` + probe.DefaultFileName + `), creating and filling it on first use. A skipped or
stopped run is a result (stopped_reason), not an error. --kind stripe-scan
times 8 KiB reads placed across and inside candidate stripe-unit boundaries
and infers the stripe unit (at most 2000 ops, queue depth 1).

flags:
`

// probeFlags are `agent probe`'s flags, parsed into o and the few values
// that need converting.
type probeFlags struct {
	o         probe.Options
	kind      string
	syncMode  string
	blockSize bytesize.Size
	fileSize  bytesize.Size
	fillRate  bytesize.Size
	minFree   config.MinFree
	format    string
	cleanup   bool
	seed      uint64
	set       map[string]bool // flags given on the command line
}

// newProbeFlags defines the flags on fs.
func newProbeFlags(fs *flag.FlagSet) *probeFlags {
	o := probe.DefaultOptions()
	f := &probeFlags{o: o, kind: string(o.Kind), syncMode: string(o.Sync), blockSize: bytesize.Size(o.BlockSize),
		fileSize: bytesize.Size(o.FileSize), fillRate: bytesize.Size(o.FillRate), minFree: config.MinFree(o.MinFreeBytes), format: "table"}
	var kindNames []string
	for _, k := range probe.ProbedKinds() {
		kindNames = append(kindNames, string(k))
	}
	p := &f.o
	fs.StringVar(&p.Dir, "dir", "", "directory on the volume to probe; holds the probe file (required)")
	fs.StringVar(&f.kind, "kind", f.kind, "probe kind: "+strings.Join(kindNames, ", "))
	fs.Var(&f.blockSize, "block-size", "I/O size, a power of two from 512B to 1MiB (log-write: up to 64KiB; stripe-scan: 8KiB)")
	fs.Var(&f.fileSize, "file-size", "probe file size, a multiple of 1MiB (written once in full)")
	fs.IntVar(&p.QueueDepth, "qd", p.QueueDepth, "queue depth (parallel workers) for the random kinds")
	fs.StringVar(&f.syncMode, "sync", f.syncMode, "log-write durability: dsync (O_DSYNC) or fdatasync")
	fs.IntVar(&p.Ops, "ops", p.Ops, "op budget of the run (stripe-scan: default and at most 2000)")
	fs.DurationVar(&p.MaxDuration, "max-duration", p.MaxDuration, "wall-clock cap of the run")
	fs.Float64Var(&p.IOPS, "iops", p.IOPS, "IOPS cap (token bucket); 0 = unlimited, for calibration only")
	fs.DurationVar(&p.Jitter, "jitter", 0, "random start delay in [0, jitter)")
	fs.Var(&f.fillRate, "fill-rate", "bytes per second for the one-time fill of a new probe file; 0 = unlimited")
	fs.Float64Var(&p.MinFreePercent, "min-free-percent", p.MinFreePercent, "refuse to create or grow the probe file if it would leave less than this % of the file system free")
	fs.Var(&f.minFree, "min-free", "refuse to create or grow the probe file if it would leave less than this many bytes free; auto: twice --file-size (the larger of the two floors wins)")
	fs.Float64Var(&p.BusyThreshold, "busy-threshold", p.BusyThreshold, "skip or stop when the device is busier than this % (others' io_ticks); 0 = off")
	fs.DurationVar(&p.BusyWindow, "busy-window", p.BusyWindow, "how long to sample the device before the run")
	fs.DurationVar(&p.BusyInterval, "busy-interval", p.BusyInterval, "how often to re-check the device during the run")
	fs.DurationVar(&p.LatencyCeiling, "latency-ceiling", p.LatencyCeiling, "stop when the median of the last --latency-window ops exceeds this; 0 = off")
	fs.IntVar(&p.LatencyWindow, "latency-window", p.LatencyWindow, "ops in the latency guard's window")
	fs.BoolVar(&p.RawIO, "raw-io", true, "issue probe I/O as raw syscalls (less CPU per op; fine for this one-shot command)")
	fs.BoolVar(&p.AllowCached, "allow-cached", false, "run through the page cache where O_DIRECT is refused (tmpfs); results say cache_bypass=false")
	fs.StringVar(&p.ProcRoot, "path.procfs", p.ProcRoot, "procfs mount point")
	fs.StringVar(&p.SysRoot, "path.sysfs", p.SysRoot, "sysfs mount point")
	fs.Uint64Var(&f.seed, "seed", 0, "seed of the random offsets; 0 = from the clock")
	fs.BoolVar(&f.cleanup, "cleanup", false, "remove the probe file from --dir (only a file Plumbline created) and exit")
	fs.StringVar(&f.format, "format", f.format, "output: table or json")
	return f
}

// options is the parsed flags as probe.Options.
func (f *probeFlags) options() probe.Options {
	o := f.o
	o.Kind = probe.Kind(f.kind)
	o.Sync = probe.SyncMode(f.syncMode)
	o.BlockSize = int(f.blockSize)
	o.FileSize = int64(f.fileSize)
	o.FillRate = int64(f.fillRate)
	o.MinFreeBytes = int64(f.minFree)
	o.Seed = f.seed
	if spec := o.Kind.Spec(); spec.ScheduledOps > 0 && !f.set["ops"] {
		o.Ops = int(spec.ScheduledOps)
	}
	return o
}

// runProbe is `agent probe`: flags → probe.Options → probe.Run → output.
// Exit status: 0 for a result (also a skipped or stopped one), 1 for a
// refusal or failure, 2 for bad usage.
func runProbe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("probe", probeUsage, stderr)
	f := newProbeFlags(fs)
	if code, ok := parseProbeFlags(fs, f, args, stderr); !ok {
		return code
	}
	if f.cleanup {
		return probeCleanup(f.o.Dir, stdout, stderr)
	}
	o := f.options()
	if o.Kind.Spec().Geometry {
		o.Placement = probe.PlacementFor(volumeHolding(ctx, o.Dir, o.ProcRoot, o.SysRoot))
	}

	// Progress on a terminal (the first run fills the file: tens of
	// seconds), nothing extra when stderr is piped.
	o.Progress = &probe.Progress{}
	pp := startProgress(stderr, stderrIsTerminal(stderr), o.Progress, o.FileSize)
	res, err := probe.Run(ctx, o)
	pp.finish(res)
	if err != nil {
		fmt.Fprintf(stderr, "agent probe: %v\n", err)
		if errors.Is(err, probe.ErrInvalid) {
			return 2
		}
		return 1
	}
	if f.format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			fmt.Fprintf(stderr, "agent probe: %v\n", err)
			return 1
		}
		return 0
	}
	printProbeTable(stdout, res)
	return 0
}

// parseProbeFlags parses args and checks what the flag package cannot; ok
// false means exit with code.
func parseProbeFlags(fs *flag.FlagSet, f *probeFlags, args []string, stderr io.Writer) (code int, ok bool) {
	if code, ok := parseFlags(fs, args); !ok {
		return code, false
	}
	f.set = map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { f.set[fl.Name] = true })
	switch {
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "agent probe: unexpected arguments %q\n", fs.Args())
		return 2, false
	case f.format != "table" && f.format != "json":
		fmt.Fprintf(stderr, "agent probe: --format %q: want table or json\n", f.format)
		return 2, false
	case f.o.Dir == "":
		fmt.Fprintln(stderr, "agent probe: --dir is required")
		fs.Usage()
		return 2, false
	}
	return 0, true
}

// probeCleanup is `agent probe --cleanup`.
func probeCleanup(dir string, stdout, stderr io.Writer) int {
	removed, err := probe.Cleanup(dir, probe.DefaultFileName)
	if err != nil {
		fmt.Fprintf(stderr, "agent probe --cleanup: %v\n", err)
		return 1
	}
	if removed {
		fmt.Fprintf(stdout, "removed the probe file from %s\n", dir)
	} else {
		fmt.Fprintf(stdout, "no probe file in %s\n", dir)
	}
	return 0
}

func printProbeTable(w io.Writer, r probe.Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	mode := fmt.Sprintf("%s, %s, qd %d", r.Kind, bytesize.Size(r.BlockSize), r.QueueDepth)
	if r.Sync != "" {
		mode += ", sync " + string(r.Sync)
	}
	if !r.CacheBypass {
		mode += ", CACHED (no O_DIRECT)"
	}
	fmt.Fprintf(tw, "probe\t%s\n", mode)
	fmt.Fprintf(tw, "file\t%s (%s)\n", r.File, bytesize.Size(r.FileSize))
	status := "completed"
	if r.StoppedReason != "" {
		status = "stopped: " + r.StoppedReason
		if r.Skipped {
			status = "skipped: " + r.StoppedReason
		}
	}
	fmt.Fprintf(tw, "result\t%s\n", status)
	fmt.Fprintf(tw, "ops\t%d of %d (errors %d)\n", r.Ops, r.OpsBudget, r.Errors)
	if r.FirstError != "" {
		fmt.Fprintf(tw, "first error\t%s\n", r.FirstError)
	}
	fmt.Fprintf(tw, "duration\t%s\n", secs(r.Duration))
	fmt.Fprintf(tw, "iops\t%.1f (cap %s)\n", r.IOPS, capString(r.IOPSCap))
	fmt.Fprintf(tw, "throughput\t%s/s\n", humanBytes(r.Throughput))
	if r.Ops > 0 {
		l := r.Latency
		fmt.Fprintf(tw, "latency\tmin %s  mean %s  p50 %s  p90 %s  p99 %s  p99.9 %s  max %s\n",
			secs(l.Min), secs(l.Mean), secs(l.P50), secs(l.P90), secs(l.P99), secs(l.P999), secs(l.Max))
	}
	busy := r.BusyGuard
	if r.Device != "" {
		busy += fmt.Sprintf(" (%s, others %.1f%% busy)", r.Device, r.BusyPercent)
	}
	fmt.Fprintf(tw, "busy guard\t%s\n", busy)
	if r.FillSeconds > 0 {
		fmt.Fprintf(tw, "fill\twrote the probe file in %s\n", secs(r.FillSeconds))
	}
	if r.StripeScan != nil {
		printStripeScan(tw, r.StripeScan)
	}
	tw.Flush()
}

func secs(s float64) string {
	d := time.Duration(s * float64(time.Second))
	switch {
	case d >= time.Second:
		return d.Round(time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(time.Microsecond).String()
	default:
		return d.String()
	}
}

func capString(iops float64) string {
	if iops == 0 {
		return "unlimited"
	}
	return fmt.Sprintf("%g", iops)
}

func humanBytes(b float64) string {
	units := []string{"B", "KiB", "MiB", "GiB"}
	i := 0
	for b >= 1024 && i < len(units)-1 {
		b /= 1024
		i++
	}
	return fmt.Sprintf("%.1f %s", b, units[i])
}
