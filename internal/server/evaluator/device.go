package evaluator

import (
	"time"

	"github.com/plumbline/plumbline/internal/server/attribution"
	"github.com/plumbline/plumbline/internal/server/baseline"
	"github.com/plumbline/plumbline/internal/server/store"
	"github.com/plumbline/plumbline/internal/vocab"
)

// deviceWitness is what the busy guard saw of one volume's device at the
// latest run it skipped (ProbeResult.busy_io). The device's usual rate is
// kept with each kind's state (entry.device, persisted); the latest skip
// only in memory: a restarted server waits for the next one.
type deviceWitness struct {
	last   store.DeviceActivity
	lastAt time.Time
}

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
		if w := e.devices[vk]; w == nil || !r.StartedAt.Before(w.lastAt) {
			e.devices[vk] = &deviceWitness{last: a, lastAt: r.StartedAt}
		}
	}
	if e.busy == nil {
		e.busy = map[key]time.Time{}
	}
	if r.StartedAt.After(e.busy[k]) {
		e.busy[k] = r.StartedAt
	}
}

// deviceOf is the attribution's view of the volume's device at the busy
// guard's latest skip (zero when none was sampled).
func (e *Evaluator) deviceOf(vk volKey) attribution.Device {
	w := e.devices[vk]
	if w == nil {
		return attribution.Device{}
	}
	var usual rateHistory // the volume's kinds together
	for _, kind := range baseline.Kinds() {
		if en := e.entries[key{vk, string(kind)}]; en != nil {
			usual.rates = append(usual.rates, en.device.rates...)
		}
	}
	d := attribution.Device{At: w.lastAt, IOPS: float64(w.last.IOs) / w.last.Window.Seconds(), UsualIOPS: usual.median(),
		Util: w.last.IOTicks.Seconds() / w.last.Window.Seconds()}
	if w.last.IOs > 0 {
		d.Await = w.last.TimeInQueue.Seconds() / float64(w.last.IOs)
	}
	return d
}
