//go:build linux

package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/plumbline/plumbline/internal/lab/loopdev"
	"github.com/plumbline/plumbline/internal/lab/raidlab"
)

// TestSeedsRAID10Short is bench/seeds.sh's first experiment, cut down for
// `make test`: RAID 10, 4 × 15K SAS, 64 KiB stripe unit, partitions at 63
// and 128 sectors, ext4 with 64 KiB clusters, 8 KiB random reads at QD 8
// from the real `agent probe`, three rounds of 800 ops. The array's own
// counters must show the model's 12.5% of reads split at 63 sectors and
// none at 128, each split costing a second member operation (1.125 vs
// 1.0 per read). The IOPS loss is logged, not asserted: it is a timing on
// a shared machine (a run beside another lab test measured -1.5%), and
// bench/seeds.sh measures it over repeated rounds. With splits served as
// one operation the op count check fails (checked by hand: +0.002 ops per
// read).
func TestSeedsRAID10Short(t *testing.T) {
	loopdev.Require(t, "mkfs.ext4")
	if _, err := os.Stat("/dev/fuse"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("needs /dev/fuse: %v (CI=true: not skipping)", err)
		}
		t.Skipf("needs /dev/fuse: %v", err)
	}
	work := t.TempDir()
	agent := filepath.Join(work, "agent")
	build := exec.Command("go", "build", "-o", agent, "./cmd/agent")
	build.Dir = "../.."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build agent: %v\n%s", err, out)
	}
	p, err := raidlab.LookupPreset("sas15k")
	if err != nil {
		t.Fatal(err)
	}
	r := &Runner{
		Agent: agent, Preset: p, FS: "ext4-bigalloc", Rounds: 3, Ops: 800, FileSize: 32 << 20,
		StateRoot: filepath.Join(work, "state"), DataRoot: filepath.Join(work, "data"), Work: filepath.Join(work, "mnt"),
		Only: []string{"read"}, Log: testWriter{t},
	}
	e := Experiments()[0]
	if e.ID != "raid10-64k-31.5k" {
		t.Fatalf("first experiment is %s", e.ID)
	}
	e.Geometry.Size = 2<<30 + 64<<20
	res, err := r.Run(context.Background(), e)
	if err != nil {
		t.Fatal(err)
	}
	s := res.Summarize()
	t.Logf("predicted %.4f, split A %.4f B %.4f, member ops per read A %.3f B %.3f, loss %.4f", s.Predicted,
		s.Split["A"]["read"], s.Split["B"]["read"], s.OpsPerRequest["A"]["read"], s.OpsPerRequest["B"]["read"], s.Loss["read"]["probe"])
	if s.Predicted != 0.125 {
		t.Errorf("model predicts %v for RAID 10 64 KiB at 31.5 KiB vs 64 KiB, want 0.125", s.Predicted)
	}
	if a := s.Split["A"]["read"]; a < 0.08 || a > 0.17 {
		t.Errorf("the array counted %.3f of reads split at 63 sectors, want ~0.125", a)
	}
	if b := s.Split["B"]["read"]; b != 0 {
		t.Errorf("the array counted %.3f of reads split at 128 sectors, want 0", b)
	}
	if d := s.OpsPerRequest["A"]["read"] - s.OpsPerRequest["B"]["read"]; d < 0.08 || d > 0.17 {
		t.Errorf("member ops per read: %.3f at 63 sectors, %.3f at 128: a split should cost one more op (+0.125)",
			s.OpsPerRequest["A"]["read"], s.OpsPerRequest["B"]["read"])
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p[:len(p)-1]))
	return len(p), nil
}
