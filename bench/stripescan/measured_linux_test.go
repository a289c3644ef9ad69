//go:build linux

package stripescanbench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/plumbline/plumbline/internal/lab/fleetlab"
	"github.com/plumbline/plumbline/internal/lab/loopdev"
)

// TestMeasuredStripeLab is the geometry probe end to end on real I/O: a
// RAID 10 4 × 64 KiB sas15k lab array that the agent is not told about (a
// hardware RAID that reports no stripe), partitioned at 63 sectors; the
// real server and the real agent with a stripe-scan schedule. The server
// must come to judge the volume against the measured 64 KiB: misaligned,
// stripe_unit_source "measured", a stripe-unit-measured finding, and a
// measured split cost beside the predicted split.
func TestMeasuredStripeLab(t *testing.T) {
	loopdev.Require(t, "mkfs.ext4", "parted", "partx")
	if _, err := os.Stat("/dev/fuse"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("needs /dev/fuse: %v (CI=true: not skipping)", err)
		}
		t.Skipf("needs /dev/fuse: %v", err)
	}
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin+"/", "./cmd/server", "./cmd/agent", "./cmd/raidlab")
	build.Dir = "../.."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	s, err := fleetlab.Start(ctx, fleetlab.Plan{
		Bin: fleetlab.Binaries{Server: bin + "/server", Agent: bin + "/agent", Raidlab: bin + "/raidlab"},
		Dir: t.TempDir(),
		Arrays: []fleetlab.Array{{Level: "raid10", Disks: 4, StripeUnit: "64KiB", Size: "1GiB", Preset: "sas15k",
			Hidden: true, PartitionStart: "63s"}},
		Every: time.Hour, Ops: 50, FileSize: "32MiB", ScanEvery: 40 * time.Second,
		ReportInterval: 2 * time.Second, BaselineInterval: 10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	var last map[string]any
	for {
		v, err := volume(ctx, s.WebAddr, s.Mounts[0])
		if err == nil {
			last = v
			a, _ := v["alignment"].(map[string]any)
			if a["stripe_unit_source"] == "measured" {
				break
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no measured stripe within the time limit; last volume %v\nlogs:\n%s", last, s.Logs())
		case <-time.After(3 * time.Second):
		}
	}
	a := last["alignment"].(map[string]any)
	t.Logf("alignment: %v", a)
	if a["verdict"] != "misaligned" || fmt.Sprint(a["stripe_unit_bytes"]) != "65536" {
		t.Errorf("verdict %v against %v: want misaligned against 65536", a["verdict"], a["stripe_unit_bytes"])
	}
	if c, _ := a["stripe_unit_confidence"].(float64); c < 0.99 {
		t.Errorf("stripe_unit_confidence %v: want at least 0.99", a["stripe_unit_confidence"])
	}
	var measured bool
	fs, _ := a["findings"].([]any)
	for _, f := range fs {
		if f.(map[string]any)["rule"] == "stripe-unit-measured" {
			measured = true
		}
	}
	if !measured {
		t.Errorf("findings %v: want stripe-unit-measured", fs)
	}
	if c, _ := a["measured_split_cost_seconds"].(float64); c <= 0 {
		t.Errorf("measured_split_cost_seconds %v: want a positive cost", a["measured_split_cost_seconds"])
	}
}

// volume is the inventory API's row of the volume mounted at mount.
func volume(ctx context.Context, addr, mount string) (map[string]any, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/api/v1/volumes?mount_point="+url.QueryEscape(filepath.Clean(mount)), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var page struct {
		Volumes []map[string]any `json:"volumes"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
		return nil, err
	}
	if len(page.Volumes) != 1 {
		return nil, fmt.Errorf("%d volumes at %s", len(page.Volumes), mount)
	}
	return page.Volumes[0], nil
}
