package attribution

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// Device is what the probe's busy guard saw of the volume's device in its
// one-second window before each of the latest runs, skipped or not (the
// kernel's diskstats: others' I/O, the probe's had not started), and the
// device's usual rate.
type Device struct {
	// Windows are the latest windows, oldest first.
	Windows []DeviceSample
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

// minWindows is how many windows since the regression began the device's
// witness needs: one second of a bursty workload swings (a healthy burst
// reached twice the usual on the bench's RAID 5), the median of a few does
// not.
const minWindows = 3

// deviceView is the device since the regression began: the median window
// by rate, how many windows, and the usual rate.
type deviceView struct {
	DeviceSample
	n     int
	usual float64
}

func (d Device) since(from time.Time) deviceView {
	var s []DeviceSample
	for _, x := range d.Windows {
		if !x.At.Before(from) {
			s = append(s, x)
		}
	}
	if len(s) < minWindows || d.UsualIOPS <= 0 {
		return deviceView{}
	}
	slices.SortFunc(s, func(a, b DeviceSample) int { return cmp.Compare(a.IOPS, b.IOPS) })
	return deviceView{DeviceSample: s[(len(s)-1)/2], n: len(s), usual: d.UsualIOPS}
}

func (v deviceView) known() bool    { return v.n > 0 }
func (v deviceView) ratio() float64 { return v.IOPS / v.usual }

// String says the device's witness with its numbers.
func (v deviceView) String() string {
	return fmt.Sprintf("%.3g ops/s vs %.3g usual (×%.2g), %s each, %.0f%% busy (the median of %d busy-guard windows)",
		v.IOPS, v.usual, v.ratio(), ms(v.Await), 100*v.Util, v.n)
}

// pressure is what the witnesses of work asked and delivered say: the
// volume delivered under its usual rate while the latency rose (a
// ceiling), or was asked more than usual (a rise), or neither.
type pressure int

const (
	level pressure = iota
	ceiling
	rise
)

// pressureOf weighs the device's witness (all its work, the database's
// and any other workload's, over its windows since the regression began)
// before the database's demand (its own sessions' work over its
// intervals): a device that delivers its usual rate is no ceiling whatever
// the database's rate, and another workload's rise shows only there. The
// database asking more counts either way.
func pressureOf(d demand, dev deviceView, cfg Config) pressure {
	switch {
	case dev.known() && dev.ratio() <= cfg.Ceiling:
		return ceiling
	case dev.known() && dev.ratio() >= cfg.DeviceRise:
		return rise
	case !dev.known() && d.known && d.ratio <= cfg.Ceiling:
		return ceiling
	case d.known && d.ratio >= cfg.Rise:
		return rise
	}
	return level
}
