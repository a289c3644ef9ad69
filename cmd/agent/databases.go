package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/plumbline/plumbline/internal/agent/config"
	"github.com/plumbline/plumbline/internal/agent/dbio"
	"github.com/plumbline/plumbline/internal/agent/geometry"
	"github.com/plumbline/plumbline/internal/bytesize"
	"github.com/plumbline/plumbline/internal/render"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

const databasesUsage = `usage: agent databases --config FILE [flags]

Read each database source of the config (its databases key) twice, --wait
apart, and print what the agent would send: each location's volume (or why
it has none), and each operation's count, bytes and mean latency (or why it
is not measured). Use it to check a source's grants, address and timing
settings before running the agent. Exit status: 0 every source was read,
1 a source failed or an error, 2 bad usage.

`

func runDatabases(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fl := newFlagSet("databases", databasesUsage, stderr)
	configFile := fl.String("config", "", "agent config file naming the databases (required)")
	wait := fl.Duration("wait", 10*time.Second, "time between the two samples")
	format := fl.String("format", "table", "output format: table or json")
	roots := addHostRootFlags(fl)
	if code, ok := parseFlags(fl, args); !ok {
		return code
	}
	switch {
	case *configFile == "" || fl.NArg() > 0:
		fmt.Fprintln(stderr, "agent databases: --config FILE is required, and nothing else")
		return exitUsage
	case *wait < 100*time.Millisecond || *wait > 10*time.Minute:
		fmt.Fprintf(stderr, "agent databases: --wait %s: want 100ms to 10m\n", *wait)
		return exitUsage
	case *format != "table" && *format != "json":
		fmt.Fprintf(stderr, "agent databases: --format %q: want table or json\n", *format)
		return exitUsage
	}
	cfg, err := config.Load(*configFile)
	if err != nil {
		fmt.Fprintf(stderr, "agent databases: %v\n", err)
		return exitError
	}
	if len(cfg.Databases) == 0 {
		fmt.Fprintf(stderr, "agent databases: %s names no databases\n", *configFile)
		return exitError
	}
	res, err := geometry.InspectVolumes(ctx, cfg.GeometryOptions(roots.options()))
	if err != nil {
		fmt.Fprintf(stderr, "agent databases: geometry discovery: %v\n", err)
		return exitError
	}
	mounts := dbio.Mounts{Volumes: res.Volumes, Filtered: res.Filtered}
	code := exitOK
	for _, src := range cfg.Databases {
		rec, err := sampleTwice(ctx, src, *wait, mounts)
		if err != nil {
			fmt.Fprintf(stderr, "agent databases: %v\n", err)
			code = exitError
			continue
		}
		if err := writeDatabaseIO(stdout, rec, *format); err != nil {
			fmt.Fprintf(stderr, "agent databases: %v\n", err)
			return exitError
		}
	}
	return code
}

// sampleTwice is one interval of src, wait long, placed on mounts.
func sampleTwice(ctx context.Context, src config.DatabaseSource, wait time.Duration, mounts dbio.Mounts) (*plumblinev1.DatabaseIO, error) {
	s, err := dbio.NewSource(src, nil)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	if _, _, err := s.Step(ctx); err != nil {
		return nil, err
	}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(wait):
	}
	d, ok, err := s.Step(ctx)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("database %s: no interval", src.Name)
	}
	return dbio.Record(src.Name, d, dbio.NewAttributor(mounts, nil).WithRoot(src.Root)), nil
}

// writeDatabaseIO prints one interval as a table or as JSON.
func writeDatabaseIO(w io.Writer, rec *plumblinev1.DatabaseIO, format string) error {
	if format == "json" {
		b, err := render.JSON(rec)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	iv := rec.GetInterval().AsDuration()
	fmt.Fprintf(w, "%s: %s %s, %s\n", rec.GetSource(), rec.GetEngine(), rec.GetVersion(), iv.Round(time.Millisecond))
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	for _, s := range rec.GetSets() {
		where := "on " + s.GetMountPoint() + " (" + s.GetDevice() + ")"
		if s.GetMountPoint() == "" {
			where = "no volume: " + s.GetAttribution()
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", s.GetLocation(), s.GetPath(), where)
		for _, o := range s.GetOps() {
			latency := "not measured: " + o.GetNotMeasured()
			if o.TimeNanoseconds != nil && o.GetCount() > 0 {
				latency = fmt.Sprintf("%.3f ms/op", float64(o.GetTimeNanoseconds())/float64(o.GetCount())/1e6)
			} else if o.TimeNanoseconds != nil {
				latency = "no operations"
			}
			fmt.Fprintf(tw, "    %s\t%d ops (%.1f/s)\t%s\t%s\n", o.GetOp(), o.GetCount(), float64(o.GetCount())/iv.Seconds(), bytesize.Size(o.GetBytes()), latency)
		}
	}
	for _, u := range rec.GetUnknown() {
		fmt.Fprintf(tw, "  not measured\t%s\t%s\n", u.GetField(), u.GetReason())
	}
	return tw.Flush()
}
