package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"

	"github.com/plumbline/plumbline/internal/align"
	"github.com/plumbline/plumbline/internal/config"
	"github.com/plumbline/plumbline/internal/geometry"
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

func runInspect(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("agent inspect", flag.ContinueOnError)
	fl.SetOutput(stderr)
	def := geometry.DefaultOptions()
	var (
		configFile = fl.String("config", "", "agent config file (declared devices, include/exclude); none: defaults")
		sysfs      = fl.String("path.sysfs", def.SysfsRoot, "sysfs mount point")
		procfs     = fl.String("path.procfs", def.ProcfsRoot, "procfs mount point")
		devRoot    = fl.String("path.dev", def.DevRoot, "device directory, for declared /dev/disk/by-id links and superblocks")
		format     = fl.String("format", "table", "output format: table or json")
		failOn     = fl.String("fail-on", "", "exit 3 when a volume has this verdict: misaligned or unknown (comma-free, one value)")
	)
	fl.Usage = func() {
		fmt.Fprintf(stderr, "usage: agent inspect [flags]\n\nDiscover each mounted volume's storage layers and judge its alignment.\nExit status: 0 success (even with misaligned volumes), 1 error, 2 bad usage, 3 --fail-on matched.\n\n")
		fl.PrintDefaults()
	}
	if err := fl.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fl.NArg() > 0 {
		fmt.Fprintf(stderr, "agent inspect: unexpected argument %q\n", fl.Arg(0))
		return exitUsage
	}
	if *format != "table" && *format != "json" {
		fmt.Fprintf(stderr, "agent inspect: --format %q: want table or json\n", *format)
		return exitUsage
	}
	if *failOn != "" && *failOn != align.Misaligned && *failOn != align.Unknown {
		fmt.Fprintf(stderr, "agent inspect: --fail-on %q: want misaligned or unknown\n", *failOn)
		return exitUsage
	}

	cfg := config.Default()
	if *configFile != "" {
		var err error
		if cfg, err = config.Load(*configFile); err != nil {
			fmt.Fprintf(stderr, "agent inspect: %v\n", err)
			return exitError
		}
	}
	opts := def
	opts.SysfsRoot, opts.ProcfsRoot, opts.DevRoot = *sysfs, *procfs, *devRoot
	// Facts that only the live host has (statfs of mount points, machine-id)
	// are not read when the roots point at a captured tree.
	live := *sysfs == def.SysfsRoot && *procfs == def.ProcfsRoot
	opts.StatMounts = live
	opts.Captured = !live
	if !live {
		opts.EtcRoot = ""
	}
	opts = cfg.GeometryOptions(opts)

	inv, warnings, err := inspect(ctx, opts, captureHostRoots(opts, def))
	if err != nil {
		fmt.Fprintf(stderr, "agent inspect: %v\n", err)
		return exitError
	}
	for _, w := range warnings {
		fmt.Fprintf(stderr, "agent inspect: warning: %s\n", w)
	}

	if *format == "json" {
		b, err := render.JSON(inv)
		if err != nil {
			fmt.Fprintf(stderr, "agent inspect: %v\n", err)
			return exitError
		}
		if _, err := stdout.Write(b); err != nil {
			return exitError
		}
	} else if err := render.Table(stdout, inv); err != nil {
		fmt.Fprintf(stderr, "agent inspect: %v\n", err)
		return exitError
	}

	if *failOn != "" {
		for _, v := range inv.GetVolumes() {
			if v.GetAlignment().GetVerdict() == *failOn {
				return exitFailedOn
			}
		}
	}
	return exitOK
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
