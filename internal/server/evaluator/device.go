package evaluator

import (
	"slices"
	"time"

	"github.com/plumbline/plumbline/internal/server/attribution"
	"github.com/plumbline/plumbline/internal/server/baseline"
	"github.com/plumbline/plumbline/internal/server/store"
	"github.com/plumbline/plumbline/internal/vocab"
)

// deviceWitness is what the busy guard saw of one volume's device at the
// latest runs it skipped (ProbeResult.busy_io), oldest first, at most
// maxSkips. The device's usual rate is kept with each kind's state
// (entry.device, persisted); the skips only in memory: a restarted server
// waits for the next ones.
type deviceWitness struct {
	skips []attribution.DeviceSample
}

const maxSkips = 12 // four runs of each kind

// noteBusy remembers, of each run, what the busy guard saw: the device's
// rate in its window goes to the kind's history of the device's usual
// while the volume's database is not degraded — the windows of the runs
// it skipped too, or the usual would be the quiet moments only (on a busy
// array the guard skips the bursts) — and the latest skip of each volume
// and kind is kept with its window.
func (e *Evaluator) noteBusy(r *store.ProbeRun) {
	vk := volKey{r.AgentID, r.MountPoint}
	k := key{vk, r.Kind}
	a := r.BusyIO
	if en := e.entries[k]; en != nil && a.Window > 0 && e.db.volumes[vk].State != string(baseline.Degraded) {
		en.device.observe(float64(a.IOs) / a.Window.Seconds())
		en.dirty = true
	}
	if !r.Skipped || r.StoppedReason != vocab.StopBusy {
		return
	}
	if a.Window > 0 {
		if e.devices == nil {
			e.devices = map[volKey]*deviceWitness{}
		}
		w := e.devices[vk]
		if w == nil {
			w = &deviceWitness{}
			e.devices[vk] = w
		}
		x := attribution.DeviceSample{At: r.StartedAt, IOPS: float64(a.IOs) / a.Window.Seconds(), Util: a.IOTicks.Seconds() / a.Window.Seconds()}
		if a.IOs > 0 {
			x.Await = a.TimeInQueue.Seconds() / float64(a.IOs)
		}
		w.skips = append(w.skips, x)
		if n := len(w.skips); n > maxSkips {
			w.skips = slices.Delete(w.skips, 0, n-maxSkips)
		}
	}
	if e.busy == nil {
		e.busy = map[key]time.Time{}
	}
	if r.StartedAt.After(e.busy[k]) {
		e.busy[k] = r.StartedAt
	}
}

// deviceOf is the attribution's view of the volume's device: the busy
// guard's latest skipped windows and the device's usual rate, the volume's
// kinds together.
func (e *Evaluator) deviceOf(vk volKey) attribution.Device {
	w := e.devices[vk]
	if w == nil {
		return attribution.Device{}
	}
	var usual rateHistory
	for _, kind := range baseline.Kinds() {
		if en := e.entries[key{vk, string(kind)}]; en != nil {
			usual.rates = append(usual.rates, en.device.rates...)
		}
	}
	return attribution.Device{Skips: slices.Clone(w.skips), UsualIOPS: usual.median()}
}
