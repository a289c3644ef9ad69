package ingest

import (
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/plumbline/plumbline/internal/server/store"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// Bounds of a busy guard's window on the wire: the agent's is a second by
// default; a minute is far above any sane one. A device completes at most
// maxDeviceIOPS operations a second (far above any NVMe's).
const (
	maxBusyWindow = time.Minute
	maxDeviceIOPS = 100_000_000
)

// checkBusyIO checks what the device did in the busy guard's window
// (ProbeResult.busy_io) and returns it for the store (Window 0: absent):
// a window within (0, maxBusyWindow], io_ticks within it, time_in_queue
// not negative, a plausible count of operations, 512-byte sectors that fit
// in 64 bits.
func checkBusyIO(p *plumblinev1.ProbeResult) (store.DeviceActivity, error) {
	a := p.GetBusyIo()
	if a == nil {
		return store.DeviceActivity{}, nil
	}
	for name, d := range map[string]*durationpb.Duration{"window": a.GetWindow(), "io_ticks": a.GetIoTicks(), "time_in_queue": a.GetTimeInQueue()} {
		if d == nil {
			continue // 0
		}
		if err := d.CheckValid(); err != nil {
			return store.DeviceActivity{}, fmt.Errorf("busy_io.%s: %w", name, err)
		}
	}
	w, ticks, queue := a.GetWindow().AsDuration(), a.GetIoTicks().AsDuration(), a.GetTimeInQueue().AsDuration()
	switch {
	case w <= 0 || w > maxBusyWindow:
		return store.DeviceActivity{}, fmt.Errorf("busy_io.window %s: want more than 0, at most %s", w, maxBusyWindow)
	case ticks < 0 || ticks > w:
		return store.DeviceActivity{}, fmt.Errorf("busy_io.io_ticks %s: want 0 to the window (%s)", ticks, w)
	case queue < 0:
		return store.DeviceActivity{}, fmt.Errorf("busy_io.time_in_queue %s: want 0 or more", queue)
	case float64(a.GetIos()) > maxDeviceIOPS*w.Seconds():
		return store.DeviceActivity{}, fmt.Errorf("busy_io.ios %d in %s: want at most %d a second", a.GetIos(), w, maxDeviceIOPS)
	case a.GetSectors() > 1<<54:
		return store.DeviceActivity{}, fmt.Errorf("busy_io.sectors %d: want at most 2^54", a.GetSectors())
	}
	return store.DeviceActivity{Window: w, IOs: a.GetIos(), Sectors: a.GetSectors(), IOTicks: ticks, TimeInQueue: queue}, nil
}
