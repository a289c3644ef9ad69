//go:build linux

// Command degrade is the live half of bench/degrade.sh: it starts the
// whole product on lab arrays (internal/lab/fleetlab) with the agent's default
// probe schedule (or -every/-ops) and the project's alert rules as they
// ship, slows one member of one RAID 1 array 3×, and prints how long
// PlumblineVolumeDegraded took to fire and, after the restore, to resolve:
//
//	detect_seconds=<fault to firing> clear_seconds=<restore to resolved> unexpected_alerts=<n>
//
// It is a benchmark helper only (root, /dev/fuse, prometheus, parted).
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/plumbline/plumbline/internal/command"
	"github.com/plumbline/plumbline/internal/lab/fleetlab"
)

func main() { os.Exit(run()) }

func run() int {
	var (
		bin      = flag.String("bin", "bin", "directory with the server, agent and raidlab binaries")
		prom     = flag.String("prometheus", "prometheus", "the prometheus binary")
		dir      = flag.String("dir", "/var/tmp/plumbline-degrade", "work directory (removed first)")
		rules    = flag.String("rules", "deploy/prometheus/plumbline.rules.yml", "alert rules")
		every    = flag.Duration("every", 0, "probe interval (0: the agent's default)")
		ops      = flag.Int("ops", 0, "ops per run (0: the agent's default)")
		fileSize = flag.String("file-size", "", "probe file size (empty: the agent's default)")
		scrape   = flag.Duration("scrape", time.Minute, "Prometheus scrape and rule interval (deploy/prometheus/prometheus.yml: 1m)")
		preset   = flag.String("preset", "sas15k", "raidlab preset of every member")
		cohort   = flag.Int("cohort", 5, "RAID 1 arrays of one profile (the first is slowed)")
		factor   = flag.Float64("factor", 3, "slowdown of member 0 of the first array")
		warmup   = flag.Duration("warmup", 90*time.Minute, "time allowed for the cohort's histories to be trusted")
		detect   = flag.Duration("detect-timeout", 45*time.Minute, "time allowed for the alert to fire")
		clear    = flag.Duration("clear-timeout", 45*time.Minute, "time allowed for it to resolve")
	)
	flag.Parse()
	ctx, stop := command.Context()
	defer stop()
	os.RemoveAll(*dir)
	raid1 := fleetlab.Array{Level: "raid1", Disks: 2, Size: "8GiB", Preset: *preset}
	var arrays []fleetlab.Array
	var cohortIdx []int
	for i := range *cohort {
		arrays = append(arrays, raid1)
		cohortIdx = append(cohortIdx, i)
	}
	slow := raid1
	slow.SlowFromStart = *factor
	arrays = append(arrays, slow, fleetlab.Array{Level: "raid10", Disks: 4, StripeUnit: "64KiB", Size: "8GiB", Preset: *preset})
	s, err := fleetlab.Start(ctx, fleetlab.Plan{
		Bin: fleetlab.Binaries{Server: *bin + "/server", Agent: *bin + "/agent", Raidlab: *bin + "/raidlab", Prometheus: *prom},
		Dir: *dir, Arrays: arrays, Every: *every, Ops: *ops, FileSize: *fileSize, BusyThreshold: 70,
		ReportInterval: 10 * time.Second, BaselineInterval: 30 * time.Second, Scrape: *scrape, Rules: *rules, Log: os.Stderr})
	if s != nil {
		defer s.Close()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "degrade:", err)
		return 1
	}
	start := time.Now()
	fig, err := fleetlab.Scenario{Cohort: cohortIdx, Faulted: 0, Outliers: []int{*cohort}, Factor: *factor, Member: 0,
		Poll: 5 * time.Second, Warmup: *warmup, Detect: *detect, Clear: *clear}.Run(ctx, s)
	fmt.Fprintf(os.Stderr, "degrade: %v (warm-up %s; fault %s, fired %s, restored %s, resolved %s)\n", fig,
		fig.FaultAt.Sub(start).Round(time.Second), fig.FaultAt.UTC().Format(time.TimeOnly), fig.FiredAt.UTC().Format(time.TimeOnly),
		fig.RestoredAt.UTC().Format(time.TimeOnly), fig.ResolvedAt.UTC().Format(time.TimeOnly))
	if outl, qerr := s.Query(ctx, `max by (kind) (plumbline_baseline_ratio{reference="cohort",mount_point="`+s.Mounts[*cohort]+`"})`, "kind"); qerr == nil {
		fmt.Fprintf(os.Stderr, "degrade: always-slow array %s: cohort ratio by kind %v\n", s.Mounts[*cohort], outl)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "degrade:", err)
		fmt.Fprint(os.Stderr, s.Logs())
		return 1
	}
	fmt.Printf("detect_seconds=%.0f clear_seconds=%.0f unexpected_alerts=%d\n", fig.Detect.Seconds(), fig.Clear.Seconds(), len(fig.Unexpected))
	return 0
}
