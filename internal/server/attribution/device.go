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

// judge says what a device too busy for the probe was busy with: more
// operations than usual (load: the database's or another workload's on the
// same device), far fewer (a ceiling: throttle), or about as many, each
// taking longer (device).
func (d Device) judge(skips string, cfg Config) (vocab.Attribution, string) {
	r := d.IOPS / d.UsualIOPS
	saw := fmt.Sprintf("skipped by the busy guard since the regression began (%s); the device did %.3g ops/s vs %.3g usual (×%.2g), %s each, %.0f%% busy",
		skips, d.IOPS, d.UsualIOPS, r, ms(d.Await), 100*d.Util)
	switch {
	case r >= cfg.Rise:
		return vocab.AttributionLoad, saw + ": more work on the device than usual"
	case r <= cfg.Ceiling:
		return vocab.AttributionThrottle, saw + ": the device delivered under its usual rate, a throughput ceiling"
	}
	return vocab.AttributionDevice, saw + ": the usual work, each operation longer"
}
