package attribution

import (
	"fmt"
	"time"

	"github.com/plumbline/plumbline/internal/vocab"
)

// Device is what the probe's busy guard saw of the volume's device in its
// window before the latest run it skipped (the kernel's diskstats: others'
// I/O, the probe's had not started), against the device's usual rate
// before the runs that ran.
type Device struct {
	// At is when the skipped run was due; zero: no skip sampled.
	At time.Time
	// IOPS is the operations the device completed per second in the
	// window, UsualIOPS the median of the same before runs that ran (0:
	// not known yet); Await the mean time of each (time_in_queue / ios,
	// seconds), Util the share of the window with I/O in flight.
	IOPS, UsualIOPS, Await, Util float64
}

// since is d when its skip was at or after from, else zero.
func (d Device) since(from time.Time) Device {
	if d.At.IsZero() || d.At.Before(from) {
		return Device{}
	}
	return d
}

func (d Device) known() bool { return !d.At.IsZero() && d.UsualIOPS > 0 }

// busyJudge says what a device too busy for the probe (every kind skipped
// since the regression began) was busy with. The database's demand over its
// intervals (d) is the steadier witness of its own work: level, it rules
// out a ceiling the device's one-second window might suggest. The device's
// window is the only witness of other workloads on the same device: a
// rate DeviceRise × its usual or more is more work than usual, whoever's.
// Otherwise: the usual work, each operation longer — the device. Without
// the database's demand the device's window alone decides (Ceiling,
// DeviceRise).
func busyJudge(d demand, dev Device, skips string, cfg Config) (vocab.Attribution, string) {
	saw := "skipped by the busy guard since the regression began (" + skips + ")"
	if !dev.known() {
		return vocab.AttributionDevice, saw + ": the device is saturated by the database's usual demand"
	}
	r := dev.IOPS / dev.UsualIOPS
	saw += fmt.Sprintf("; the device did %.3g ops/s vs %.3g usual (×%.2g), %s each, %.0f%% busy", dev.IOPS, dev.UsualIOPS, r, ms(dev.Await), 100*dev.Util)
	switch {
	case r >= cfg.DeviceRise:
		return vocab.AttributionLoad, saw + ": more work on the device than usual"
	case r <= cfg.Ceiling && !d.known:
		return vocab.AttributionThrottle, saw + ": the device delivered under its usual rate, a throughput ceiling"
	}
	return vocab.AttributionDevice, saw + ": the usual work, each operation longer"
}
