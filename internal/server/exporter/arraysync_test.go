package exporter

import (
	"strings"
	"testing"
	"time"

	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// syncingVolume is mdVolume with md0 running action, done of total sectors
// at speed (KiB/s as md states it, here in bytes per second).
func syncingVolume(mount, action string, done, total, speed uint64) *plumblinev1.Volume {
	v := mdVolume(mount)
	for _, l := range v.GetLayers() {
		if l.GetDevice() == "md0" && l.GetKind() == "raid" {
			l.RaidHealth = &plumblinev1.RaidHealth{ArrayState: "active", SyncAction: action,
				SyncCompletedSectors: done, SyncTotalSectors: total, SyncSpeedBytesPerSecond: speed}
			l.Sources["raid_health"] = "sysfs"
		}
	}
	return v
}

// The sync progress and speed series of an md array exist while it runs
// an action, each only when md stated it, and not while it is idle.
func TestArraySyncSeries(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	at := epoch.Add(-time.Hour)
	seed(t, st, []host{{id: "a1", hostname: "db03.example.com", lastSeen: at, volumes: []*plumblinev1.Volume{
		syncingVolume("/srv/rebuilding", "recover", 430, 1000, 50<<20),
		syncingVolume("/srv/delayed", "resync", 0, 0, 0),
		syncingVolume("/srv/checking", "check", 250, 1000, 0),
		syncingVolume("/srv/idle", "idle", 0, 0, 0),
	}}})
	c, err := New(st, fixedOptions())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for line := range strings.SplitSeq(scrape(t, c), "\n") {
		if strings.HasPrefix(line, "plumbline_volume_raid_sync_") {
			got = append(got, line)
		}
	}
	want := []string{
		`plumbline_volume_raid_sync_progress_ratio{action="check",agent_id="a1",device="md0",host="db03.example.com",mount_point="/srv/checking"} 0.25`,
		`plumbline_volume_raid_sync_progress_ratio{action="recover",agent_id="a1",device="md0",host="db03.example.com",mount_point="/srv/rebuilding"} 0.43`,
		`plumbline_volume_raid_sync_speed_bytes_per_second{action="recover",agent_id="a1",device="md0",host="db03.example.com",mount_point="/srv/rebuilding"} 5.24288e+07`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("sync series:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
