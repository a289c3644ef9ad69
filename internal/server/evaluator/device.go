package evaluator

import (
	"slices"
	"time"

	"github.com/plumbline/plumbline/internal/server/attribution"
	"github.com/plumbline/plumbline/internal/server/baseline"
	"github.com/plumbline/plumbline/internal/server/store"
	"github.com/plumbline/plumbline/internal/vocab"
)

// deviceWitness is what the busy guard saw of one volume's device before
// its latest runs, skipped or not (ProbeResult.busy_io), oldest first, at
// most maxWindows. The device's usual rate is kept with each kind's state
// (entry.device, persisted); the windows only in memory: a restarted
// server waits for the next ones.
type deviceWitness struct {
	windows []attribution.DeviceSample
}

const maxWindows = 24 // eight runs of each kind

// noteBusy remembers, of each run, what the busy guard saw. The device's
// rate in its window goes to the kind's history of the device's usual
// while the volume's database is not degraded — the windows of the runs
// it skipped too, or the usual would be the lulls only (on a busy array
// the guard skips the bursts) — and to the volume's latest windows; a
// skip is remembered for the volume and kind.
func (e *Evaluator) noteBusy(r *store.ProbeRun) {
	vk := volKey{r.AgentID, r.MountPoint}
	k := key{vk, r.Kind}
	if a := r.BusyIO; a.Window > 0 {
		if en := e.entries[k]; en != nil && e.db.volumes[vk].State != string(baseline.Degraded) {
			en.device.observe(float64(a.IOs) / a.Window.Seconds())
			en.dirty = true
		}
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
		w.windows = append(w.windows, x)
		if n := len(w.windows); n > maxWindows {
			w.windows = slices.Delete(w.windows, 0, n-maxWindows)
		}
	}
	if !r.Skipped || r.StoppedReason != vocab.StopBusy {
		return
	}
	if e.busy == nil {
		e.busy = map[key]time.Time{}
	}
	if r.StartedAt.After(e.busy[k]) {
		e.busy[k] = r.StartedAt
	}
}

// deviceOf is the attribution's view of the volume's device: the busy
// guard's latest windows and the device's usual rate, the volume's kinds
// together.
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
	return attribution.Device{Windows: slices.Clone(w.windows), UsualIOPS: usual.median()}
}
