//go:build linux

// Package stripescanbench holds the short lab test of the geometry probe;
// bench/stripescan.sh is the full detection table.
package stripescanbench

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plumbline/plumbline/internal/lab/loopdev"
	"github.com/plumbline/plumbline/internal/lab/raidlab"
)

// scanResult is what the test reads of `agent probe --kind stripe-scan
// --format json`.
type scanResult struct {
	Ops        int `json:"ops"`
	StripeScan struct {
		Unit       int64   `json:"inferred_stripe_unit_bytes"`
		Confidence float64 `json:"confidence"`
		Cost       float64 `json:"straddle_cost_seconds"`
		Reason     string  `json:"reason"`
		Measured   []int   `json:"measured_per_class"`
		FreshFile  bool    `json:"fresh_file"`
		Placement  struct {
			Offset int64  `json:"offset_bytes"`
			Known  bool   `json:"known"`
			Basis  string `json:"basis"`
		} `json:"placement"`
	} `json:"stripe_scan"`
}

func buildAgent(t *testing.T) string {
	t.Helper()
	agent := filepath.Join(t.TempDir(), "agent")
	build := exec.Command("go", "build", "-o", agent, "./cmd/agent")
	build.Dir = "../.."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build agent: %v\n%s", err, out)
	}
	return agent
}

// scan runs the real `agent probe --kind stripe-scan` in its own process
// (not the one serving the lab's FUSE mount), uncapped.
func scan(t *testing.T, agent, dir string) scanResult {
	t.Helper()
	out, err := exec.Command(agent, "probe", "--kind", "stripe-scan", "--dir", dir, "--file-size", "32MiB",
		"--fill-rate", "0", "--iops", "0", "--min-free", "0", "--min-free-percent", "0", "--format", "json").Output()
	if err != nil {
		t.Fatalf("agent probe: %v: %s", err, out)
	}
	var r scanResult
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("output %q: %v", out, err)
	}
	return r
}

// TestStripeScanLab: on a RAID 10 4 × 64 KiB sas15k lab array partitioned
// at 63 sectors (31.5 KiB: the scan must add the partition offset
// discovery reads, or every straddle lands 31.5 KiB off), the scan infers
// 64 KiB, and the array's own counters split exactly the straddles of the
// candidates from 64 KiB up; on a plain loop device it infers none.
func TestStripeScanLab(t *testing.T) {
	loopdev.Require(t, "mkfs.ext4", "parted", "partx")
	if _, err := os.Stat("/dev/fuse"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("needs /dev/fuse: %v (CI=true: not skipping)", err)
		}
		t.Skipf("needs /dev/fuse: %v", err)
	}
	agent := buildAgent(t)
	p, err := raidlab.LookupPreset("sas15k")
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	l, err := raidlab.Start(context.Background(), raidlab.Config{
		Geometry: raidlab.Geometry{Level: raidlab.RAID10, Members: 4, StripeUnit: 64 << 10, Size: 256 << 20},
		Preset:   p, Seed: 1, ID: "stripescan-test",
		StateRoot: filepath.Join(root, "state"), DataRoot: filepath.Join(root, "data"),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("close lab: %v", err)
		}
	})
	part := loopdev.Partition(t, loopdev.Device{Path: l.Device, Name: strings.TrimPrefix(l.Device, "/dev/")}, "msdos", 63, 0)
	loopdev.Mkfs(t, part, "ext4")
	dir := loopdev.Mount(t, part)

	// The first run writes the probe file and infers nothing from it.
	if r := scan(t, agent, dir); !r.StripeScan.FreshFile || r.StripeScan.Unit != 0 {
		t.Fatalf("first run: fresh %v, inferred %d: want fresh, none", r.StripeScan.FreshFile, r.StripeScan.Unit)
	}
	var r scanResult
	for run := 1; run <= 2; run++ { // a second run only if the first is inconclusive (noisy neighbours)
		before := l.Array().Stats()
		r = scan(t, agent, dir)
		after := l.Array().Stats()
		s := r.StripeScan
		if !s.Placement.Known || s.Placement.Offset != 63*512 || s.Placement.Basis != "disk" {
			t.Fatalf("placement %+v: want the 63-sector partition offset on the disk", s.Placement)
		}
		// Classes: inside, 16K, 32K, 64K … 1M; the lab splits 64K and up.
		var wantSplit uint64
		for _, n := range s.Measured[3:] {
			wantSplit += uint64(n)
		}
		if got := after.SplitReads - before.SplitReads; got != wantSplit {
			t.Errorf("the array split %d reads, the scan placed %d straddles of 64 KiB and up", got, wantSplit)
		}
		t.Logf("run %d: inferred %d, confidence %.6f, straddle cost %.0f µs, %d ops", run, s.Unit, s.Confidence, s.Cost*1e6, r.Ops)
		if s.Unit == 64<<10 {
			break
		}
		if s.Unit != 0 {
			t.Fatalf("inferred %d on a 64 KiB array", s.Unit)
		}
	}
	if r.StripeScan.Unit != 64<<10 || r.StripeScan.Confidence < 0.99 || r.StripeScan.Cost <= 0 {
		t.Fatalf("inferred %d with confidence %g, cost %g: want 65536, ≥ 0.99, positive", r.StripeScan.Unit, r.StripeScan.Confidence, r.StripeScan.Cost)
	}

	d := loopdev.New(t, loopdev.Options{SizeBytes: 128 << 20})
	loopdev.Mkfs(t, d.Path, "ext4")
	plainDir := loopdev.Mount(t, d.Path)
	scan(t, agent, plainDir) // writes the probe file
	plain := scan(t, agent, plainDir)
	t.Logf("plain loop device: inferred %d (%s)", plain.StripeScan.Unit, plain.StripeScan.Reason)
	if plain.StripeScan.Unit != 0 {
		t.Errorf("a plain loop device inferred %d, want none", plain.StripeScan.Unit)
	}
}
