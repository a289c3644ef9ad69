package attribution

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/plumbline/plumbline/internal/vocab"
)

// Device is what the probe's busy guard saw of the volume's device in its
// windows before the latest runs it skipped (the kernel's diskstats:
// others' I/O, the probe's had not started), and the device's usual rate.
type Device struct {
	// Skips are the windows of the latest skipped runs, oldest first.
	Skips []DeviceSample
	// UsualIOPS is the median rate of the guard's windows while the
	// volume's database was not degraded (0: not known yet).
	UsualIOPS float64
}

// DeviceSample is one busy-guard window: when its run was due, the
// operations the device completed per second in it, their mean time
// (time_in_queue / ios, seconds) and the share of it with I/O in flight.
type DeviceSample struct {
	At                time.Time
	IOPS, Await, Util float64
}

// deviceView is the device at the skips since the regression began: their
// median window by rate (one window of a bursty workload swings; the
// kinds' skips together are steadier), how many, and the usual rate.
type deviceView struct {
	DeviceSample
	n     int
	usual float64
}

func (d Device) since(from time.Time) deviceView {
	var s []DeviceSample
	for _, x := range d.Skips {
		if !x.At.Before(from) {
			s = append(s, x)
		}
	}
	if len(s) == 0 {
		return deviceView{}
	}
	slices.SortFunc(s, func(a, b DeviceSample) int { return cmp.Compare(a.IOPS, b.IOPS) })
	return deviceView{DeviceSample: s[(len(s)-1)/2], n: len(s), usual: d.UsualIOPS}
}

func (v deviceView) known() bool { return v.n > 0 && v.usual > 0 }

// busyJudge says what a device too busy for the probe (every kind skipped
// since the regression began) was busy with. The database's demand over its
// intervals (d) is the steadier witness of its own work: level, it rules
// out a ceiling the device's one-second window might suggest. The device's
// window is the only witness of other workloads on the same device: a
// rate DeviceRise × its usual or more is more work than usual, whoever's.
// Otherwise: the usual work, each operation longer — the device. Without
// the database's demand the device's window alone decides (Ceiling,
// DeviceRise).
func busyJudge(d demand, dev deviceView, skips string, cfg Config) (vocab.Attribution, string) {
	saw := "skipped by the busy guard since the regression began (" + skips + ")"
	if !dev.known() {
		return vocab.AttributionDevice, saw + ": the device is saturated by the database's usual demand"
	}
	r := dev.IOPS / dev.usual
	saw += fmt.Sprintf("; the device did %.3g ops/s vs %.3g usual (×%.2g), %s each, %.0f%% busy (the median of %d windows)",
		dev.IOPS, dev.usual, r, ms(dev.Await), 100*dev.Util, dev.n)
	switch {
	case r >= cfg.DeviceRise:
		return vocab.AttributionLoad, saw + ": more work on the device than usual"
	case r <= cfg.Ceiling && !d.known:
		return vocab.AttributionThrottle, saw + ": the device delivered under its usual rate, a throughput ceiling"
	}
	return vocab.AttributionDevice, saw + ": the usual work, each operation longer"
}
