//go:build linux

package fleetlab

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// need finds a command, or skips — except under CI=true, where its absence
// fails the test.
func need(t *testing.T, names ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, n := range names {
		p, err := exec.LookPath(n)
		if err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s not found (CI=true: nothing may skip)", n)
			}
			t.Skipf("%s not found", n)
		}
		out[n] = p
	}
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("needs root (loop devices, mount)")
		}
		t.Skip("needs root (loop devices, mount)")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("needs /dev/fuse: %v", err)
		}
		t.Skipf("needs /dev/fuse: %v", err)
	}
	return out
}

// build compiles the commands the stack runs.
func build(t *testing.T) Binaries {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("go", "build", "-o", dir+"/", "./cmd/server", "./cmd/agent", "./cmd/raidlab")
	cmd.Dir = filepath.Join("..", "..", "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return Binaries{Server: filepath.Join(dir, "server"), Agent: filepath.Join(dir, "agent"), Raidlab: filepath.Join(dir, "raidlab")}
}

// TestDegradeOnLab is bench/degrade.sh shortened for make test, with the
// whole product on real I/O: seven lab arrays (sas15k members) — five
// RAID 1 of one profile (a cohort), one RAID 1 whose member 0 is 3× slow
// from the start, one RAID 10 as the control of another profile — each
// partitioned at 1 MiB, ext4, mounted; `server --dev`; the real `agent
// run` probing each every 2 s (20 ops); the Debian prometheus with
// deploy/prometheus's rules, `for:` shortened to 10 s
// (PlumblineVolumeDegraded) and 20 s (PlumblineVolumeCohortOutlier).
//
// Once every cohort history is trusted, member 0 of the first array is
// slowed 3× (every mirrored write waits for it): PlumblineVolumeDegraded
// must fire for it; after restore it must resolve; the always-slow array
// must fire PlumblineVolumeCohortOutlier; no other volume may fire either.
func TestDegradeOnLab(t *testing.T) {
	tools := need(t, "prometheus", "parted", "partx", "mkfs.ext4", "mount", "umount", "losetup", "go")
	if testing.Short() {
		t.Skip("-short: about two minutes of real I/O")
	}
	bin := build(t)
	bin.Prometheus = tools["prometheus"]
	dir := t.TempDir()
	rules := filepath.Join(dir, "rules.yml")
	if err := TightenRules(filepath.Join("..", "..", "..", "deploy", "prometheus", "plumbline.rules.yml"), rules,
		map[string]time.Duration{VolumeDegraded: 10 * time.Second, VolumeCohortOutlier: 20 * time.Second}); err != nil {
		t.Fatal(err)
	}
	raid1 := Array{Level: "raid1", Disks: 2, Size: "8GiB", Preset: "sas15k"}
	slow := raid1
	slow.SlowFromStart = 3
	arrays := []Array{raid1, raid1, raid1, raid1, raid1, slow,
		{Level: "raid10", Disks: 4, StripeUnit: "64KiB", Size: "8GiB", Preset: "sas15k"}}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	s, err := Start(ctx, Plan{Bin: bin, Dir: filepath.Join(dir, "stack"), Arrays: arrays,
		Every: 2 * time.Second, Ops: 20, FileSize: "64MiB", ReportInterval: time.Second,
		BaselineInterval: time.Second, Scrape: time.Second, Rules: rules, Log: testLog{t}})
	if s != nil {
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("logs:\n%s", s.Logs())
			}
			if err := s.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	fig, err := Scenario{Cohort: []int{0, 1, 2, 3, 4}, Faulted: 0, Outliers: []int{5}, Factor: 3, Member: 0,
		WaitOutlier: true, Poll: time.Second, Warmup: 2 * time.Minute, Detect: time.Minute, Clear: time.Minute}.Run(ctx, s)
	t.Logf("figures: %v", fig)
	if err != nil {
		t.Fatal(err)
	}
	if fig.FiredAt.IsZero() || fig.ResolvedAt.IsZero() || !fig.ResolvedAt.After(fig.RestoredAt) {
		t.Errorf("fault at %s: fired %s, restored %s, resolved %s: want fired, then resolved after the restore", fig.FaultAt, fig.FiredAt, fig.RestoredAt, fig.ResolvedAt)
	}
	if fig.OutlierFired.IsZero() {
		t.Errorf("the always-slow array %s never fired %s", s.Mounts[5], VolumeCohortOutlier)
	}
	for _, a := range fig.Unexpected {
		t.Errorf("unexpected %s %s for %s %s (value %s)", a.State, a.Labels["alertname"], a.Labels["mount_point"], a.Labels["kind"], a.Value)
	}
}

type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(string(p[:len(p)-1]))
	return len(p), nil
}
