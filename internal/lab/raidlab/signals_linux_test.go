package raidlab

import (
	"encoding/json"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/plumbline/plumbline/internal/histogram"
	"github.com/plumbline/plumbline/internal/lab/loopdev"
	"github.com/plumbline/plumbline/internal/server/evaluator"
	"github.com/plumbline/plumbline/internal/server/store"
)

// TestFaultShapesOnLab: real probe runs (200 random 8 KiB reads at QD 1
// under a 100 IOPS cap, through ext4 and the loop device) on a lab disk,
// each fault against a healthy run: a member stalling 5% of its ops for
// 100 ms puts the p99 at the stall while the median stays; a token bucket (25 IOPS,
// burst 110) cuts the achieved rate while the median stays; a rebuild's
// background load moves the mean and the p99. The signals are computed as
// the server's evaluator computes them (evaluator.RunOf).
func TestFaultShapesOnLab(t *testing.T) {
	l := startLab(t, Geometry{Level: Single, Members: 1, Size: 128 << 20}, "fast")
	loopdev.Mkfs(t, l.Device, "ext4")
	dir := loopdev.Mount(t, l.Device)
	type shape struct{ median, p99, mean, iops, cap float64 }
	run := func() shape {
		t.Helper()
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), probeDirEnv+"="+dir, probeQD1Env+"=1")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("probe: %v: %s", err, out)
		}
		var res struct {
			Ops             int                `json:"ops"`
			Duration        float64            `json:"duration_seconds"`
			IOPSCap         float64            `json:"iops_cap"`
			StoppedReason   string             `json:"stopped_reason"`
			LatencyHistogam histogram.Snapshot `json:"latency_histogram"`
		}
		if err := json.Unmarshal(out, &res); err != nil {
			t.Fatalf("probe output %q: %v", out, err)
		}
		h, err := histogram.FromSnapshot(res.LatencyHistogam)
		if err != nil || res.Ops != 200 {
			t.Fatalf("probe: %d ops, histogram %v", res.Ops, err)
		}
		r := evaluator.RunOf(&store.ProbeRun{ProbeResult: store.ProbeResult{Ops: uint64(res.Ops), IOPSCap: res.IOPSCap,
			Duration: time.Duration(res.Duration * float64(time.Second)), StoppedReason: res.StoppedReason}}, h)
		return shape{r.Median, r.P99, r.Mean, r.IOPS, r.Cap}
	}
	run() // creates and fills the probe file
	base := run()
	t.Logf("healthy: median %.3f ms, p99 %.3f ms, mean %.3f ms, %.1f/%.0f IOPS", base.median*1e3, base.p99*1e3, base.mean*1e3, base.iops, base.cap)
	if base.cap != 100 || base.iops < 90 {
		t.Fatalf("healthy run: %.1f/%.0f IOPS, want near its cap of 100", base.iops, base.cap)
	}
	m := 0
	for _, tc := range []struct {
		name  string
		fault Fault
		check func(s shape) string
	}{
		{"stall", Fault{Kind: FaultStall, Member: &m, Fraction: 0.05, Add: 100 * time.Millisecond}, func(s shape) string {
			// The p99 at the stall itself (a healthy run's p99 here is a few
			// ms of this shared machine's noise; the stall is 100 ms).
			if s.p99 < 90e-3 || s.p99 < 3*base.p99 || s.median > 1.3*base.median {
				return "want the p99 at the 100 ms stall (and ×3 or more) and the median within ×1.3"
			}
			return ""
		}},
		{"throttle", Fault{Kind: FaultThrottle, IOPS: 25, Burst: 110}, func(s shape) string {
			if s.iops > 0.7*s.cap || s.median > 1.3*base.median {
				return "want at most 70 of 100 IOPS and the median within ×1.3"
			}
			return ""
		}},
		{"rebuild", Fault{Kind: FaultRebuild, Member: &m, Load: 0.5}, func(s shape) string {
			if s.mean < 1.3*base.mean || s.p99 < 2*base.p99 {
				return "want the mean ×1.3 and the p99 ×2 or more"
			}
			return ""
		}},
	} {
		if err := l.Array().Apply(tc.fault); err != nil {
			t.Fatal(err)
		}
		s := run()
		if err := l.Array().Apply(Fault{Kind: FaultRestore}); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: median ×%.2f, p99 ×%.1f, mean ×%.1f, %.1f/%.0f IOPS", tc.name,
			s.median/base.median, s.p99/base.p99, s.mean/base.mean, s.iops, s.cap)
		if msg := tc.check(s); msg != "" {
			t.Errorf("%s: median %.3f ms (healthy %.3f), p99 %.3f ms (%.3f), mean %.3f ms (%.3f), %.1f/%.0f IOPS: %s",
				tc.name, s.median*1e3, base.median*1e3, s.p99*1e3, base.p99*1e3, s.mean*1e3, base.mean*1e3, s.iops, s.cap, msg)
		}
	}
}
