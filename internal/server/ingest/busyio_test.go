package ingest

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/plumbline/plumbline/internal/server/store"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// busyDevice is a second of a busy device: 900 ms with I/O in flight, 40
// operations of 8 sectors, 2.4 s of their time summed (6 in flight on
// average).
func busyDevice() *plumblinev1.DeviceActivity {
	return &plumblinev1.DeviceActivity{Window: durationpb.New(time.Second), Ios: 40, Sectors: 320,
		IoTicks: durationpb.New(900 * time.Millisecond), TimeInQueue: durationpb.New(2400 * time.Millisecond)}
}

func TestCheckBusyIO(t *testing.T) {
	t.Parallel()
	with := func(f func(a *plumblinev1.DeviceActivity)) *plumblinev1.DeviceActivity {
		a := busyDevice()
		f(a)
		return a
	}
	for _, tc := range []struct {
		name string
		a    *plumblinev1.DeviceActivity
		want string // "" accepted
	}{
		{"none", nil, ""},
		{"busy", busyDevice(), ""},
		{"idle", with(func(a *plumblinev1.DeviceActivity) { a.Ios, a.Sectors, a.IoTicks, a.TimeInQueue = 0, 0, nil, nil }), ""},
		{"no window", with(func(a *plumblinev1.DeviceActivity) { a.Window = nil }), "busy_io.window 0s"},
		{"window too long", with(func(a *plumblinev1.DeviceActivity) { a.Window = durationpb.New(2 * time.Minute) }), "busy_io.window 2m0s"},
		{"ticks beyond the window", with(func(a *plumblinev1.DeviceActivity) { a.IoTicks = durationpb.New(2 * time.Second) }), "busy_io.io_ticks"},
		{"negative queue", with(func(a *plumblinev1.DeviceActivity) { a.TimeInQueue = durationpb.New(-time.Second) }), "busy_io.time_in_queue"},
		{"invalid duration", with(func(a *plumblinev1.DeviceActivity) { a.IoTicks = &durationpb.Duration{Seconds: 1, Nanos: -5} }), "busy_io.io_ticks"},
		{"implausible rate", with(func(a *plumblinev1.DeviceActivity) { a.Ios = 1 << 40 }), "busy_io.ios"},
		{"sectors", with(func(a *plumblinev1.DeviceActivity) { a.Sectors = 1 << 60 }), "busy_io.sectors"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := probeResult()
			p.BusyIo = tc.a
			if got := converted(t, p, tc.want); got != nil && (got.BusyIO.Window > 0) != (tc.a != nil) {
				t.Errorf("stored %+v for %v", got.BusyIO, tc.a)
			}
		})
	}
}

// A run's busy_io sent over gRPC with mutual TLS is stored and read back by
// the evaluator's query; a run without one reads back without one.
func TestBusyIOStored(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, dsn string) {
		e := startServer(t, dsn, newPKI(t), Options{})
		c := e.agent(t, "db1")
		hello(t, c, "db1")
		skipped, plain := probeRecord(1), probeRecord(2)
		skipped.GetProbe().BusyIo = busyDevice()
		if _, err := c.Report(ctxT(t), &plumblinev1.ReportRequest{AgentId: "db1", Records: []*plumblinev1.Record{skipped, plain}}); err != nil {
			t.Fatalf("Report: %v", err)
		}
		runs, err := e.store.PendingProbeRuns(ctxT(t), 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) != 2 {
			t.Fatalf("%d pending runs, want 2", len(runs))
		}
		want := store.DeviceActivity{Window: time.Second, IOs: 40, Sectors: 320, IOTicks: 900 * time.Millisecond, TimeInQueue: 2400 * time.Millisecond}
		if runs[0].BusyIO != want || runs[1].BusyIO != (store.DeviceActivity{}) {
			t.Errorf("read back %+v and %+v, want %+v and none", runs[0].BusyIO, runs[1].BusyIO, want)
		}
	})
}
