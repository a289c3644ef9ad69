package evaluator

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/plumbline/plumbline/internal/server/store"
	"github.com/plumbline/plumbline/internal/vocab"
)

// dbRec is one minute of a database's I/O on mount: 1000 reads of lat
// each, and 200 WAL syncs it did not time.
func dbRec(seq uint64, mount string, start time.Time, lat time.Duration) store.Record {
	return store.Record{Sequence: seq, Kind: store.KindDatabase, ProducedAt: start.Add(time.Minute), Database: &store.DatabaseIO{
		Source: "main", Engine: "postgresql", Version: "15.8", StartedAt: start, Interval: time.Minute,
		Ops: []store.DatabaseOp{
			// Two counter sets on one volume add up: 600 + 400 reads.
			{Location: "data", Path: "/srv/pg", MountPoint: mount, Device: "md0", Op: "read", Count: 600, Measured: true, Time: 600 * lat},
			{Location: "tablespace", Path: "/srv/ts", MountPoint: mount, Device: "md0", Op: "read", Count: 400, Measured: true, Time: 400 * lat},
			{Location: "wal", Path: "/srv/pg/pg_wal", MountPoint: mount, Device: "md0", Op: "wal-sync", Count: 200, NotMeasured: "track_wal_io_timing is off"},
		}}}
}

// capped is a probe run on mount under a 50 IOPS cap: 50 ops of d in dur.
func capped(t testing.TB, seq uint64, mount string, at time.Time, d, dur time.Duration) store.Record {
	r := probeRec(t, seq, at, d)
	r.Probe.MountPoint, r.Probe.IOPSCap, r.Probe.Duration = mount, 50, dur
	return r
}

// A database's latency regression is attributed from the probe's view of
// the same volume, through the store: the probe slowed with it (device),
// the probe on its baseline (load or database), the database's own rate
// at a ceiling — a fifth of its history — while a token bucket the
// workload fills slows the probe ×10 (throttle, not device). An operation the database
// does not time is "not measured" with its reason, never a latency of 0;
// a restarted evaluator goes on from the stored detectors.
func TestDatabaseAttribution(t *testing.T) {
	t.Parallel()
	for _, e := range engines {
		t.Run(e.Name, func(t *testing.T) {
			ctx := context.Background()
			st, err := store.Open(ctx, e.DSN(t))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if err := st.UpsertAgent(ctx, store.Agent{ID: "a1", Hostname: "h1"}); err != nil {
				t.Fatal(err)
			}
			t0 := time.Date(2026, 11, 28, 4, 0, 0, 0, time.UTC)
			mounts := []string{"/device", "/load", "/throttle", "/busy", "/backup"}
			var seq uint64
			var recs []store.Record
			add := func(r store.Record) { seq++; r.Sequence = seq; recs = append(recs, r) }
			minute := func(m int, fault bool) {
				at := t0.Add(time.Duration(m) * time.Minute)
				for _, mount := range mounts {
					lat := 500*time.Microsecond + time.Duration(m%5)*10*time.Microsecond // ±4% noise
					probe, dur := time.Millisecond, time.Second
					if fault {
						lat *= 3
						switch mount {
						case "/device":
							probe = 3 * time.Millisecond
						case "/throttle":
							probe, dur = 10*time.Millisecond, 2500*time.Millisecond // 20 of 50 IOPS, each op behind the bucket
						}
					}
					r := dbRec(0, mount, at, lat)
					if fault && mount == "/throttle" {
						for i := range r.Database.Ops {
							r.Database.Ops[i].Count /= 5
							r.Database.Ops[i].Time /= 5
						}
					}
					add(r)
					if m%3 == 0 || fault {
						p := capped(t, 0, mount, at, probe, dur)
						// What the busy guard saw of the device: 50 ops/s of 5 ms usually.
						ios := uint64(50)
						if fault && (mount == "/busy" || mount == "/backup") { // the device too busy for the probe
							p.Probe.Skipped, p.Probe.StoppedReason, p.Probe.Ops, p.Probe.Bytes = true, vocab.StopBusy, 0, 0
							if mount == "/backup" {
								ios = 200 // another workload on the same device
							}
						}
						if fault && mount == "/throttle" {
							ios = 10 // the device at the bucket's rate
						}
						p.Probe.BusyIO = store.DeviceActivity{Window: time.Second, IOs: ios, Sectors: 8 * ios, IOTicks: 800 * time.Millisecond,
							TimeInQueue: time.Duration(ios) * 5 * time.Millisecond}
						add(p)
					}
				}
			}
			for m := range 60 {
				minute(m, false)
			}
			if _, err := st.AppendBatch(ctx, "a1", recs); err != nil {
				t.Fatal(err)
			}
			ev, err := New(st, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ev.Pass(ctx); err != nil {
				t.Fatal(err)
			}
			vols := databaseVolumes(t, st)
			for _, m := range mounts {
				if v := vols[m]; v.State != "ok" || v.Attribution != "" || !strings.Contains(v.Reason, "not measured: main wal-sync: track_wal_io_timing is off") {
					t.Errorf("%s before the fault: %+v; want ok, no attribution, wal-sync not measured", m, v)
				}
			}
			recs = nil
			for m := 60; m < 66; m++ {
				minute(m, true)
			}
			if _, err := st.AppendBatch(ctx, "a1", recs); err != nil {
				t.Fatal(err)
			}
			ev2, err := New(st, Options{}) // a restarted server
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ev2.Pass(ctx); err != nil {
				t.Fatal(err)
			}
			vols = databaseVolumes(t, st)
			for _, c := range []struct {
				mount string
				want  vocab.Attribution
				says  string
			}{
				{"/device", vocab.AttributionDevice, "random-read"},
				{"/load", vocab.AttributionLoad, "on its baseline"},
				{"/throttle", vocab.AttributionThrottle, "demand ×0.2 of its history (read 3.33/s vs 16.7/s"},
				{"/busy", vocab.AttributionDevice, "device 50 ops/s vs 50 usual (×1), 5 ms each, 80% busy (the median of 5 busy-guard windows)"},
				{"/backup", vocab.AttributionLoad, "device 200 ops/s vs 50 usual (×4)"},
			} {
				v := vols[c.mount]
				if v.State != "degraded" || v.Attribution != string(c.want) || !strings.Contains(v.Reason, "main read 1.5") || !strings.Contains(v.Reason, c.says) {
					t.Errorf("%s: %+v; want degraded, %s, the read latency (1.5 ms) and %q", c.mount, v, c.want, c.says)
				}
			}
			states, err := st.ListDatabaseStates(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range states {
				if s.MountPoint == "/throttle" { // a fifth of the rate since the fault
					s.OpsRate *= 5
				}
				if s.Op == "wal-sync" && (s.Status != vocab.DatabaseNotMeasured || s.Latency != 0 || s.OpsRate < 3.3 || s.OpsRate > 3.4) {
					t.Errorf("wal-sync state %+v: want not measured, no latency, 200 a minute", s)
				}
				if s.Op == "read" && (s.Intervals != 66 || s.OpsRate < 16.6 || s.OpsRate > 16.7) {
					t.Errorf("read state %+v: want 66 intervals of 1000 reads a minute", s)
				}
			}
		})
	}
}

func databaseVolumes(t *testing.T, st *store.Store) map[string]store.DatabaseVolume {
	t.Helper()
	vs, err := st.ListDatabaseVolumes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]store.DatabaseVolume{}
	for _, v := range vs {
		out[v.MountPoint] = v
	}
	return out
}

// An operation counted too rarely to judge (fewer than MinOps an
// interval) is learning, with its latency shown: timed, so not "not
// measured".
func TestDatabaseFewOps(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := store.Open(ctx, engines[0].DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.UpsertAgent(ctx, store.Agent{ID: "a1", Hostname: "h1"}); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 28, 4, 0, 0, 0, time.UTC)
	rec := store.Record{Sequence: 1, Kind: store.KindDatabase, ProducedAt: t0, Database: &store.DatabaseIO{
		Source: "main", Engine: "postgresql", StartedAt: t0, Interval: time.Minute, Ops: []store.DatabaseOp{
			{Location: "data", Path: "/srv/pg", MountPoint: "/srv", Device: "md0", Op: "fsync", Count: 3, Measured: true, Time: 6 * time.Millisecond},
		}}}
	if _, err := st.AppendBatch(ctx, "a1", []store.Record{rec}); err != nil {
		t.Fatal(err)
	}
	ev, err := New(st, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ev.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	states, err := st.ListDatabaseStates(ctx)
	if err != nil || len(states) != 1 || states[0].Status != "learning" || states[0].Latency != 0.002 {
		t.Fatalf("states = %+v, %v; want fsync learning at 2 ms", states, err)
	}
	if v := databaseVolumes(t, st)["/srv"]; v.State != "learning" {
		t.Errorf("volume = %+v, want learning", v)
	}
}
