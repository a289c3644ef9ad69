package raidlab

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/plumbline/plumbline/internal/agent/probe"
	"github.com/plumbline/plumbline/internal/lab/loopdev"
)

// probeDirEnv makes the test binary run one probe (QD 8, raw I/O asked
// for, as `agent probe` does by default) in the named directory and print
// its result: the probe runs in its own process, as the agent does, not in
// the process serving the lab's FUSE mount.
const probeDirEnv = "PLUMBLINE_RAIDLAB_TEST_PROBE_DIR"

// probeQD1Env makes that probe a paced QD 1 run instead: 200 random
// reads under a 100 IOPS cap (the agent's shape, more ops per run).
const probeQD1Env = "PLUMBLINE_RAIDLAB_TEST_PROBE_QD1"

func TestMain(m *testing.M) {
	if dir := os.Getenv(probeDirEnv); dir != "" {
		o := probe.DefaultOptions()
		o.Dir, o.FileSize, o.FillRate, o.IOPS = dir, 16<<20, 0, 0
		o.MinFreeBytes, o.MinFreePercent, o.BusyThreshold, o.LatencyCeiling = 0, 0, 0, 0
		o.RawIO, o.QueueDepth, o.Ops, o.MaxDuration = true, 8, 160, 30*time.Second
		if os.Getenv(probeQD1Env) != "" {
			o.QueueDepth, o.Ops, o.IOPS = 1, 200, 100
		}
		res, err := probe.Run(context.Background(), o)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		json.NewEncoder(os.Stdout).Encode(res)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestProbeQueueDepthReachesArray runs Plumbline's probe engine at QD 8
// with raw I/O asked for on ext4 on a lab array and checks that 8
// requests really reach the array at once. A raw system call keeps its P
// while blocked, so before the probe engine turned raw I/O off above
// GOMAXPROCS workers, QD 8 on a 2-CPU machine put only 2 in flight.
func TestProbeQueueDepthReachesArray(t *testing.T) {
	l := startLab(t, Geometry{Level: RAID0, Members: 8, StripeUnit: 64 << 10, Size: 128 << 20}, "fast")
	loopdev.Mkfs(t, l.Device, "ext4")
	dir := loopdev.Mount(t, l.Device)
	runProbe := func() (ops, errs int, iops float64) {
		t.Helper()
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), probeDirEnv+"="+dir, "GOMAXPROCS=2")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("probe: %v: %s", err, out)
		}
		var res struct {
			Ops, Errors int
			IOPS        float64
		}
		if err := json.Unmarshal(out, &res); err != nil {
			t.Fatalf("probe output %q: %v", out, err)
		}
		return res.Ops, res.Errors, res.IOPS
	}
	runProbe() // creates and fills the probe file
	if err := l.Array().Apply(Fault{Kind: FaultLatency, Add: 10 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	l.Array().ResetPeak()
	ops, errs, iops := runProbe()
	st := l.Array().Stats()
	t.Logf("GOMAXPROCS=2, QD 8: %.0f IOPS, most in flight %d", iops, st.MaxInFlight)
	if ops != 160 || errs != 0 {
		t.Fatalf("probe: %d ops, %d errors", ops, errs)
	}
	if st.MaxInFlight < 6 {
		t.Fatalf("probe at QD 8 put at most %d requests in flight on the array", st.MaxInFlight)
	}
}
