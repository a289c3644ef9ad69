package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"

	"github.com/plumbline/plumbline/internal/agent/config"
	"github.com/plumbline/plumbline/internal/agent/geometry"
	"github.com/plumbline/plumbline/internal/align"
	"github.com/plumbline/plumbline/internal/render"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// Exit codes of inspect.
const (
	exitOK       = 0
	exitError    = 1
	exitUsage    = 2
	exitFailedOn = 3 // --fail-on matched a volume
)

const inspectUsage = `usage: agent inspect [flags]

Discover each mounted volume's storage layers and judge its alignment.
Exit status: 0 success (even with misaligned volumes), 1 error, 2 bad usage, 3 --fail-on matched.

`

// inspectFlags are the flags of agent inspect.
type inspectFlags struct {
	configFile, format, failOn string
	roots                      *hostRoots
}

// parseInspectFlags parses and checks the flags; code is the exit status
// when ok is false (help or bad usage).
func parseInspectFlags(args []string, stderr io.Writer) (f inspectFlags, code int, ok bool) {
	fl := newFlagSet("inspect", inspectUsage, stderr)
	fl.StringVar(&f.configFile, "config", "", "agent config file (declared devices, include/exclude); none: defaults")
	f.roots = addHostRootFlags(fl)
	fl.StringVar(&f.format, "format", "table", "output format: table or json")
	fl.StringVar(&f.failOn, "fail-on", "", "exit 3 when a volume has this verdict: misaligned or unknown (comma-free, one value)")
	if code, ok := parseFlags(fl, args); !ok {
		return f, code, false
	}
	switch {
	case fl.NArg() > 0:
		fmt.Fprintf(stderr, "agent inspect: unexpected argument %q\n", fl.Arg(0))
	case f.format != "table" && f.format != "json":
		fmt.Fprintf(stderr, "agent inspect: --format %q: want table or json\n", f.format)
	case f.failOn != "" && f.failOn != align.Misaligned && f.failOn != align.Unknown:
		fmt.Fprintf(stderr, "agent inspect: --fail-on %q: want misaligned or unknown\n", f.failOn)
	default:
		return f, exitOK, true
	}
	return f, exitUsage, false
}

func runInspect(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f, code, ok := parseInspectFlags(args, stderr)
	if !ok {
		return code
	}
	cfg := config.Default()
	if f.configFile != "" {
		var err error
		if cfg, err = config.Load(f.configFile); err != nil {
			fmt.Fprintf(stderr, "agent inspect: %v\n", err)
			return exitError
		}
	}
	opts := f.roots.options()
	// Facts that only the live host has (statfs of mount points, machine-id)
	// are not read when the roots point at a captured tree.
	opts.Captured = !opts.StatMounts
	if opts.Captured {
		opts.EtcRoot = ""
	}
	opts = cfg.GeometryOptions(opts)

	inv, warnings, err := inspect(ctx, opts, captureHostRoots(opts, f.roots.def))
	if err != nil {
		fmt.Fprintf(stderr, "agent inspect: %v\n", err)
		return exitError
	}
	for _, w := range warnings {
		fmt.Fprintf(stderr, "agent inspect: warning: %s\n", w)
	}
	if err := writeInventory(stdout, inv, f.format); err != nil {
		fmt.Fprintf(stderr, "agent inspect: %v\n", err)
		return exitError
	}
	if f.failOn != "" && hasVerdict(inv, f.failOn) {
		return exitFailedOn
	}
	return exitOK
}

// writeInventory prints the inventory as a table or as JSON.
func writeInventory(w io.Writer, inv *plumblinev1.Inventory, format string) error {
	if format != "json" {
		return render.Table(w, inv)
	}
	b, err := render.JSON(inv)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// hasVerdict says whether a volume of inv was judged verdict.
func hasVerdict(inv *plumblinev1.Inventory, verdict string) bool {
	for _, v := range inv.GetVolumes() {
		if v.GetAlignment().GetVerdict() == verdict {
			return true
		}
	}
	return false
}

// hostRoots are the flags that point discovery at a tree other than this
// host's (a captured one), shared by agent inspect and agent run.
type hostRoots struct {
	def                 geometry.Options
	sysfs, procfs, devs *string
}

func addHostRootFlags(fl *flag.FlagSet) *hostRoots {
	def := geometry.DefaultOptions()
	return &hostRoots{
		def:    def,
		sysfs:  fl.String("path.sysfs", def.SysfsRoot, "sysfs mount point"),
		procfs: fl.String("path.procfs", def.ProcfsRoot, "procfs mount point"),
		devs:   fl.String("path.dev", def.DevRoot, "device directory, for declared /dev/disk/by-id links and superblocks"),
	}
}

// options are the default geometry options on the roots; mount points are
// statfs'd only when sysfs and procfs are this host's own.
func (r *hostRoots) options() geometry.Options {
	opts := r.def
	opts.SysfsRoot, opts.ProcfsRoot, opts.DevRoot = *r.sysfs, *r.procfs, *r.devs
	opts.StatMounts = *r.sysfs == r.def.SysfsRoot && *r.procfs == r.def.ProcfsRoot
	return opts
}

// captureHostRoots are the roots the host facts of a captured tree come
// from: the capture's own procfs, never this machine's. A capture given by
// --path.sysfs alone has no procfs of its own, so no hostname or kernel.
func captureHostRoots(opts, def geometry.Options) geometry.Options {
	if opts.Captured && opts.ProcfsRoot == def.ProcfsRoot {
		opts.ProcfsRoot = ""
	}
	return opts
}

// inspect discovers the volumes and judges each one; hostOpts say where
// the host facts come from. A captured tree that names no host (no
// <procfs>/sys/kernel/hostname) gets a warning and an empty hostname,
// which the table shows as "unknown".
func inspect(ctx context.Context, opts, hostOpts geometry.Options) (*plumblinev1.Inventory, []string, error) {
	res, err := geometry.InspectVolumes(ctx, opts)
	if err != nil {
		return nil, nil, err
	}
	host := geometry.DiscoverHost(hostOpts)
	if hostOpts.Captured && host.GetHostname() == "" {
		where := "it has no procfs of its own (--path.procfs)"
		if hostOpts.ProcfsRoot != "" {
			where = "it has no " + filepath.Join(hostOpts.ProcfsRoot, "sys", "kernel", "hostname")
		}
		res.Warnings = append(res.Warnings, fmt.Sprintf("the captured tree at %s names no host (%s): hostname left unknown", opts.SysfsRoot, where))
	}
	host.AgentVersion = version
	for _, v := range res.Volumes {
		v.Alignment = align.Evaluate(v)
	}
	return &plumblinev1.Inventory{Host: host, Volumes: res.Volumes}, res.Warnings, nil
}
