package attribution

import (
	"strings"
	"testing"
	"time"

	"github.com/plumbline/plumbline/internal/server/baseline"
	"github.com/plumbline/plumbline/internal/vocab"
)

// The rows below are the server's own (database_states, probe_results) from
// the bench's run of 28 November 2026 (bench/RESULTS-db.md, run 2): pg15 on
// a RAID 1 lab array, 20 s intervals, read and wal-sync latency and rate
// with their history.
var pgAt = time.Date(2026, 11, 28, 5, 27, 39, 0, time.UTC)

func pgOps(readLat, readRate, syncLat, syncRate float64, degraded ...string) []Op {
	ops := []Op{
		{Source: "pg15", Op: "read", Status: baseline.OK, Latency: readLat, HistoryMedian: 0.00483, Rate: readRate, HistoryRate: 33.2},
		{Source: "pg15", Op: "wal-sync", Status: baseline.OK, Latency: syncLat, HistoryMedian: 0.0158, Rate: syncRate, HistoryRate: 20.1},
		// Buffered writes: the page cache's, a rate that swings ×2 with every checkpoint.
		{Source: "pg15", Op: "write", Status: baseline.OK, Latency: 0.000004, HistoryMedian: 0.000004, Rate: 46.5, HistoryRate: 26},
	}
	for i := range ops {
		for _, d := range degraded {
			if ops[i].Op == d {
				ops[i].Status, ops[i].Since = baseline.Degraded, pgAt.Add(-40*time.Second)
				ops[i].Ratio = ops[i].Latency / ops[i].HistoryMedian
			}
		}
	}
	return ops
}

// busyProbes are the three kinds, their last completed run before the
// regression, every run since skipped by the busy guard.
func busyProbes() []Probe {
	var out []Probe
	for _, k := range []string{"log-write", "random-read", "random-write"} {
		out = append(out, Probe{Kind: k, LastRun: pgAt.Add(-70 * time.Second), Trusted: true, HistoryRatio: 1,
			State: baseline.State{Status: baseline.OK}, LastBusy: pgAt.Add(-5 * time.Second)})
	}
	return out
}

func withoutRateHistory(ops []Op) []Op {
	for i := range ops {
		ops[i].HistoryRate = 0
	}
	return ops
}

// deviceFixtures are the busy guard's windows of the device cases: another
// workload ×3, a ceiling, one window of a slower device, a burst among
// level windows (and an old one), windows from before the regression.
func deviceFixtures() (backup, bucket, slower, burst, stale Device) {
	skipAt := pgAt.Add(-5 * time.Second)
	skips := func(usual float64, s ...DeviceSample) Device {
		for i := range s {
			if s[i].At.IsZero() {
				s[i].At = skipAt.Add(time.Duration(i-len(s)) * 7 * time.Second)
			}
		}
		return Device{Windows: s, UsualIOPS: usual}
	}
	backup = skips(80, DeviceSample{IOPS: 250, Await: 0.03, Util: 0.95}, DeviceSample{IOPS: 240, Await: 0.03, Util: 0.95},
		DeviceSample{IOPS: 230, Await: 0.03, Util: 0.95})
	bucket = skips(80, DeviceSample{IOPS: 21, Await: 0.4, Util: 1}, DeviceSample{IOPS: 20, Await: 0.4, Util: 1},
		DeviceSample{IOPS: 20, Await: 0.4, Util: 1})
	slower = skips(80, DeviceSample{IOPS: 70, Await: 0.024, Util: 0.9})
	// One burst of the healthy workload (×2.1 its usual, as the bench's RAID 5 showed) among the kinds' skips,
	// and an old burst from before the regression: the median of the skips since says the usual work.
	burst = skips(80, DeviceSample{At: pgAt.Add(-time.Hour), IOPS: 400}, DeviceSample{IOPS: 72, Await: 0.02, Util: 0.8},
		DeviceSample{IOPS: 65, Await: 0.02, Util: 0.8}, DeviceSample{IOPS: 170, Await: 0.02, Util: 0.9})
	stale = skips(80, DeviceSample{At: pgAt.Add(-time.Hour), IOPS: 240})
	return backup, bucket, slower, burst, stale
}

func TestAttributeByDemand(t *testing.T) {
	t.Parallel()
	slowedByBucket := Probe{Kind: "random-read", LastRun: pgAt.Add(-10 * time.Second), Trusted: true, HistoryRatio: 14, MeanRatio: 11,
		RateRatio: 8, State: baseline.State{Status: baseline.OK}}
	rateShort := Probe{Kind: "random-read", LastRun: pgAt.Add(-10 * time.Second), Trusted: true, HistoryRatio: 1.1, MeanRatio: 1.2,
		RateRatio: 1.5, State: baseline.State{Status: baseline.OK}}
	backup, bucket, slower, burst, stale := deviceFixtures()
	for _, c := range []struct {
		name   string
		ops    []Op
		probes []Probe
		dev    Device
		want   vocab.Attribution
		says   []string
	}{
		// Class 1: every probe run skipped busy; the database's own rate tells load from throttle from device.
		{"busy, throttle (pg15 05:27:19)", pgOps(0.2027, 2.8, 0.3346, 1.9, "read", "wal-sync"), busyProbes(), Device{}, vocab.AttributionThrottle,
			[]string{"demand ×0.091 of its history", "read 2.8/s vs 33.2/s", "skipped busy at 05:27:34", "a throughput ceiling"}},
		{"busy, load (pg15 05:24:19)", pgOps(0.00714, 96.4, 0.0457, 21.9, "wal-sync"), busyProbes(), Device{}, vocab.AttributionLoad,
			[]string{"demand ×1.7 of its history", "more work asked of the volume than usual"}},
		{"busy, device (pg15 05:21:39)", pgOps(0.00521, 24.5, 0.0670, 12.4, "wal-sync"), busyProbes(), Device{}, vocab.AttributionDevice,
			[]string{"demand ×0.66 of its history", "saturated by the usual work"}},
		{"busy, no rate history yet", withoutRateHistory(pgOps(0.00521, 24.5, 0.0670, 12.4, "wal-sync")), busyProbes(), Device{},
			vocab.AttributionUndetermined, []string{"skipped by the busy guard", "has a history yet"}},
		// Class 1 with the device's own witness (the busy guard's diskstats at the skip): another workload's
		// load on the same device (×2 its usual or more), a ceiling (when the database's demand cannot say), a
		// slower device.
		{"busy, the device ×3 busier while the database asks as usual", pgOps(0.00521, 33, 0.0670, 20, "wal-sync"), busyProbes(), backup,
			vocab.AttributionLoad, []string{"device 240 ops/s vs 80 usual (×3)", "(the median of 3 busy-guard windows)", "more work asked of the volume"}},
		{"busy, one burst among the windows", pgOps(0.00521, 33, 0.0670, 20, "wal-sync"), busyProbes(), burst,
			vocab.AttributionDevice, []string{"device 72 ops/s vs 80 usual", "(the median of 3 busy-guard windows)", "the usual work, each operation longer"}},
		{"busy, the device at a ceiling", pgOps(0.00521, 33, 0.0670, 20, "wal-sync"), busyProbes(), bucket,
			vocab.AttributionThrottle, []string{"device 20 ops/s vs 80 usual (×0.25), 400 ms each, 100% busy", "a throughput ceiling"}},
		{"busy, the device's one window since the regression", pgOps(0.00521, 33, 0.0670, 20, "wal-sync"), busyProbes(), slower,
			vocab.AttributionDevice, []string{"the usual work, each operation longer"}},
		{"busy, the device's windows from before the regression", pgOps(0.00521, 33, 0.0670, 20, "wal-sync"), busyProbes(), stale,
			vocab.AttributionDevice, []string{"saturated by the usual work"}},
		// The database's background flushing follows its checkpoints, not its clients: PostgreSQL 17's
		// writebacks doubled under a token bucket that cut its reads and commits to a tenth (the bench, RAID 5).
		{"a checkpoint's writebacks under a bucket", append(pgOps(0.127, 2.45, 0.3, 1.6, "read", "wal-sync"),
			Op{Source: "pg15", Op: "writeback", Status: baseline.Degraded, Latency: 0.052, HistoryMedian: 0.0149, Rate: 61.6, HistoryRate: 27.2,
				Since: pgAt.Add(-40 * time.Second), Ratio: 3.5}), busyProbes(), Device{}, vocab.AttributionThrottle,
			[]string{"demand ×0.078 of its history (read 2.45/s vs 33.2/s, wal-sync 1.6/s vs 20.1/s;"}},
		// Class 2: a bucket the workload fills slows the probe that gets through (×14) — the ceiling still says throttle.
		{"probe slowed behind a saturated bucket (pg15 05:35:49)", pgOps(0.04416, 7.4, 0.1617, 4.8, "read", "wal-sync"),
			[]Probe{slowedByBucket}, Device{}, vocab.AttributionThrottle, []string{"random-read last run median ×14", "a throughput ceiling"}},
		{"probe slowed, demand steady", pgOps(0.00521, 30, 0.0534, 17, "wal-sync"), []Probe{slowedByBucket}, Device{}, vocab.AttributionDevice,
			[]string{"random-read last run median ×14"}},
		// Class 3: RAID 1 reads go to the healthy leg: the random-read kind keeps its median, only its rate falls short.
		{"rate short only, demand steady (pg17 05:20:59)", pgOps(0.00778, 22.7, 0.0552, 14.2, "wal-sync"), []Probe{rateShort}, Device{},
			vocab.AttributionUndetermined, []string{"waiting for another kind"}},
		{"rate short only, no rate history", withoutRateHistory(pgOps(0.00778, 22.7, 0.0552, 14.2, "wal-sync")), []Probe{rateShort}, Device{},
			vocab.AttributionThrottle, []string{"rate short of its cap ×1.5"}},
	} {
		got := Attribute(pgAt, c.ops, c.probes, c.dev, Config{})
		if got.Attribution != c.want {
			t.Errorf("%s: Attribute = %q (%s), want %q", c.name, got.Attribution, got.Reason, c.want)
		}
		for _, s := range c.says {
			if !strings.Contains(got.Reason, s) {
				t.Errorf("%s: reason %q does not say %q", c.name, got.Reason, s)
			}
		}
	}
}
