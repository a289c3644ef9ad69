package packaging

import (
	"bufio"
	"os"
	"strings"
	"testing"
)

// unitValues returns the values of key in a unit file, in order.
func unitValues(t *testing.T, path, key string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var vals []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), key+"="); ok {
			vals = append(vals, v)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return vals
}

// TestAgentUnitReadsEveryDiskKind: the agent reads superblocks (and the
// device mapper's and md's tables) of every kind of disk a database host
// has — SCSI/SATA/SAN, KVM virtio-blk, Xen, NVMe, device mapper, md, loop —
// and writes none (DevicePolicy=closed with block-<group> entries, the
// group names of /proc/devices, systemd.resource-control(5)).
func TestAgentUnitReadsEveryDiskKind(t *testing.T) {
	t.Parallel()
	const unit = "../systemd/plumbline-agent.service"
	if got := unitValues(t, unit, "DevicePolicy"); len(got) != 1 || got[0] != "closed" {
		t.Errorf("DevicePolicy=%v, want closed", got)
	}
	allowed := map[string]bool{}
	for _, v := range unitValues(t, unit, "DeviceAllow") {
		dev, access, _ := strings.Cut(v, " ")
		if access != "r" {
			t.Errorf("DeviceAllow=%s: want read-only (r)", v)
		}
		allowed[dev] = true
	}
	for _, want := range []string{"block-sd", "block-virtblk", "block-xvd", "block-blkext", "block-device-mapper", "block-md", "block-loop"} {
		if !allowed[want] {
			t.Errorf("no DeviceAllow=%s r: the agent cannot read those disks' superblocks", want)
		}
	}
}

// TestUnitsKeepConfigDirectoryMode: ConfigurationDirectory= chmods the
// directory at every start (0755 unless told); the units keep the
// package's 0750 on /etc/plumbline, where keys live.
func TestUnitsKeepConfigDirectoryMode(t *testing.T) {
	t.Parallel()
	for _, unit := range []string{"../systemd/plumbline-agent.service", "../systemd/plumbline-server.service"} {
		if d := unitValues(t, unit, "ConfigurationDirectory"); len(d) == 0 {
			continue
		}
		if got := unitValues(t, unit, "ConfigurationDirectoryMode"); len(got) != 1 || got[0] != "0750" {
			t.Errorf("%s: ConfigurationDirectoryMode=%v, want 0750 (the package's mode of /etc/plumbline)", unit, got)
		}
	}
}
