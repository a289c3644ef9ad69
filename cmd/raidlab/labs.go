//go:build linux

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/plumbline/plumbline/internal/bytesize"
	"github.com/plumbline/plumbline/internal/lab/raidlab"
)

func runDown(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	dev, rest, err := devArg("down", args, stderr)
	if err != nil {
		return err
	}
	fs, root := newFlags("down", stderr)
	if err := parseFlags(fs, rest); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	return raidlab.Down(ctx, *root, dev)
}

func devArg(cmd string, args []string, stderr io.Writer) (string, []string, error) {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		fmt.Fprintf(stderr, "usage: raidlab %s DEV ...\n", cmd)
		return "", nil, errUsage
	}
	return args[0], args[1:], nil
}

func client(root, dev string) (*raidlab.Client, raidlab.State, error) {
	s, err := raidlab.Find(root, dev)
	if err != nil {
		return nil, s, err
	}
	if !s.Alive() {
		return nil, s, fmt.Errorf("%s: lab %s's process %d is gone (run raidlab reap)", dev, s.ID, s.PID)
	}
	return raidlab.NewClient(s.Control), s, nil
}

func runStats(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	dev, rest, err := devArg("stats", args, stderr)
	if err != nil {
		return err
	}
	fs, root := newFlags("stats", stderr)
	format := fs.String("format", "table", "table or json")
	if err := parseFlags(fs, rest); err != nil {
		return err
	}
	c, _, err := client(*root, dev)
	if err != nil {
		return err
	}
	s, err := c.Stats(ctx)
	if err != nil {
		return err
	}
	switch *format {
	case "json":
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(s)
	case "table":
	default:
		return fmt.Errorf("--format %q: want table or json", *format)
	}
	fmt.Fprintf(stdout, "%s: %s, %d members, stripe unit %d, size %d, preset %s\n", dev, s.Level, s.Members, s.StripeUnit, s.Size, s.Preset)
	fmt.Fprintf(stdout, "requests: %d reads (%d split), %d writes (%d split), %d flushes, %d failed; member ops %d; most in flight %d; added latency %v\n",
		s.ReadRequests, s.SplitReads, s.WriteRequests, s.SplitWrites, s.Flushes, s.Failed, s.Ops(), s.MaxInFlight, s.AddLatency)
	if s.ThrottleIOPS > 0 || s.Throttled > 0 {
		fmt.Fprintf(stdout, "throttle: %g IOPS, burst %d; %d requests waited for a token, %v in all\n", s.ThrottleIOPS, s.ThrottleBurst, s.Throttled, s.ThrottleWaited)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MEMBER\tREAD_OPS\tWRITE_OPS\tREAD_BYTES\tWRITE_BYTES\tBUSY_S\tSTATE")
	for i, m := range s.MemberStats {
		state := "ok"
		switch {
		case m.Failed:
			state = "failed"
		case m.SlowFactor > 0 && m.AddLatency > 0:
			state = fmt.Sprintf("slow ×%g, +%v per op", m.SlowFactor, m.AddLatency)
		case m.SlowFactor > 0:
			state = fmt.Sprintf("slow ×%g", m.SlowFactor)
		case m.AddLatency > 0:
			state = fmt.Sprintf("+%v per op", m.AddLatency)
		}
		if m.StallFraction > 0 {
			state += fmt.Sprintf(", stalls %g%% for %v (%d so far)", 100*m.StallFraction, m.StallLatency, m.Stalls)
		}
		if m.RebuildEvery > 0 {
			verb := "read"
			if m.RebuildWrite {
				verb = "written"
			}
			state += fmt.Sprintf(", rebuild: %s every %v (%d ops)", verb, m.RebuildEvery, m.RebuildOps)
		}
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%.3f\t%s\n", i, m.ReadOps, m.WriteOps, m.ReadBytes, m.WriteBytes, m.BusySeconds, state)
	}
	return tw.Flush()
}

func runList(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs, root := newFlags("list", stderr)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	labs, err := raidlab.List(*root)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DEVICE\tID\tPID\tSTATE\tLEVEL\tDISKS\tSTRIPE_UNIT\tSIZE\tPRESET\tSTARTED")
	for _, s := range labs {
		state := "up"
		if !s.Alive() {
			state = "dead (raidlab reap)"
		} else if !s.Daemon {
			state = "up (in-process)"
		}
		g := s.Geometry
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", orDash(s.Device), s.ID, s.PID, state, g.Level, g.Members,
			bytesize.Size(g.StripeUnit), bytesize.Size(g.Size), s.Preset, s.Started)
	}
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func runReap(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs, root := newFlags("reap", stderr)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	ids, err := raidlab.Reap(*root)
	for _, id := range ids {
		fmt.Fprintln(stdout, "reaped", id)
	}
	return err
}
