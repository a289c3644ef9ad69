//go:build linux

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/plumbline/plumbline/internal/lab/raidlab"
)

func runFault(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	dev, rest, err := devArg("fault", args, stderr)
	if err != nil {
		return err
	}
	if len(rest) == 0 {
		fmt.Fprintln(stderr, "usage: raidlab fault DEV slow|latency|fail|throttle|stall|rebuild|restore [flags]")
		return errUsage
	}
	kind := raidlab.FaultKind(rest[0])
	fs, root := newFlags("fault "+rest[0], stderr)
	member := fs.Int("member", -1, "member (from 0)")
	factor := fs.Float64("factor", 0, "slow: service-time multiplier")
	add := fs.Duration("add", 0, "latency: added to every request (or, with --member, to that member's every op)")
	iops := fs.Float64("iops", 0, "throttle: requests per second the token bucket admits (0 lifts it)")
	burst := fs.Int("burst", 0, "throttle: requests an idle bucket admits at once")
	fraction := fs.Float64("fraction", 0, "stall: share of the member's ops that stall (0 to 1)")
	stallFor := fs.Duration("latency", 0, "stall: how much longer a stalled op takes")
	load := fs.Float64("load", 0, "rebuild: share of each member's time the background takes (default 0.5)")
	if err := parseFlags(fs, rest[1:]); err != nil {
		return err
	}
	f := raidlab.Fault{Kind: kind, Factor: *factor, Add: *add, IOPS: *iops, Burst: *burst, Fraction: *fraction, Load: *load}
	if kind == raidlab.FaultStall {
		f.Add = *stallFor
	}
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
	case raidlab.FaultThrottle:
		if !flagSet(fs, "iops") || *iops > 0 && *burst < 1 {
			return errors.New("fault throttle needs --iops and --burst (--iops 0 lifts it)")
		}
	case raidlab.FaultStall:
		if *member < 0 || *fraction <= 0 || *stallFor <= 0 {
			return errors.New("fault stall needs --member, --fraction and --latency")
		}
	case raidlab.FaultRebuild:
		if *member < 0 {
			return errors.New("fault rebuild needs --member")
		}
	case raidlab.FaultRestore:
	default:
		return fmt.Errorf("unknown fault %q (want slow, latency, fail, throttle, stall, rebuild or restore)", kind)
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
	case raidlab.FaultThrottle:
		if f.IOPS == 0 {
			return "throttle lifted"
		}
		return fmt.Sprintf("throttle %g IOPS, burst %d", f.IOPS, f.Burst)
	case raidlab.FaultStall:
		return fmt.Sprintf("member %d stalls %g%% of its ops for %v", *f.Member, 100*f.Fraction, f.Add)
	case raidlab.FaultRebuild:
		load := f.Load
		if load == 0 {
			load = 0.5
		}
		return fmt.Sprintf("member %d rebuilding (background load %g on every member)", *f.Member, load)
	}
	return "restore (all faults cleared)"
}
