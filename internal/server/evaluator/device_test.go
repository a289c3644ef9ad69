package evaluator

import (
	"testing"
	"time"

	"github.com/plumbline/plumbline/internal/server/store"
	"github.com/plumbline/plumbline/internal/vocab"
)

// On a busy array the busy guard skips the runs that fall in the
// workload's bursts: the device's usual rate is learnt from every window,
// the skipped ones too, or a healthy burst would read as twice the usual
// (load) — as on the bench's RAID 5 arrays, ~70 ops/s before the runs that
// ran and ~160 before those skipped.
func TestDeviceUsualIncludesSkippedWindows(t *testing.T) {
	t.Parallel()
	e, err := New(nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	vk := volKey{"a1", "/data"}
	e.entries[key{vk, "random-read"}] = &entry{}
	t0 := time.Date(2026, 11, 28, 7, 0, 0, 0, time.UTC)
	window := func(at time.Time, ios uint64, skipped bool) *store.ProbeRun {
		r := &store.ProbeRun{AgentID: "a1", ProbeResult: store.ProbeResult{MountPoint: "/data", Kind: "random-read", StartedAt: at,
			BusyIO: store.DeviceActivity{Window: time.Second, IOs: ios}}}
		if skipped {
			r.Skipped, r.StoppedReason = true, vocab.StopBusy
		}
		return r
	}
	for i := range 30 {
		at := t0.Add(time.Duration(i) * 20 * time.Second)
		if i%2 == 0 {
			e.noteBusy(window(at, 70, false))
		} else {
			e.noteBusy(window(at, 160, true))
		}
	}
	e.noteBusy(window(t0.Add(time.Hour), 160, true)) // a healthy burst, skipped
	d := e.deviceOf(vk)
	if n := len(d.Windows); n != maxWindows || d.Windows[n-1].IOPS != 160 || d.UsualIOPS < 100 || d.Windows[n-1].IOPS/d.UsualIOPS >= 1.5 {
		t.Errorf("device's windows: %+v; want the last %d, 160 ops/s at the latest, against a usual of the bursts and the lulls (below ×1.5)", d, maxWindows)
	}
}
