package raidlab

import (
	"testing"
	"time"
)

// TestThrottle: an idle token bucket admits its burst at once, then one
// request per 1/iops; restore lifts it.
func TestThrottle(t *testing.T) {
	a := newTestArray(t, Geometry{Level: RAID0, Members: 4, StripeUnit: 64 << 10, Size: 64 << 20})
	a.preset = Preset{Name: "fixed", Fixed: 100 * time.Microsecond}
	if err := a.Apply(Fault{Kind: FaultThrottle, IOPS: 10, Burst: 5}); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	for k := range 15 {
		done, _, err := a.serve(false, int64(k)*(64<<10), 4096) // a different member each time: no queueing
		if err != nil {
			t.Fatal(err)
		}
		a.done()
		want := time.Duration(max(0, k+1-5)) * 100 * time.Millisecond
		if got := done.Sub(t0); got < want || got > want+20*time.Millisecond {
			t.Errorf("request %d done %v after the first arrived, want %v (+ service): burst 5, then 10/s", k, got, want)
		}
	}
	st := a.Stats()
	if st.Throttled != 10 || st.ThrottleIOPS != 10 || st.ThrottleBurst != 5 || st.ThrottleWaited < 5*time.Second {
		t.Errorf("Stats() throttle: %d throttled, %v waited, %v/%d; want 10, >= 5.5s, 10/5", st.Throttled, st.ThrottleWaited, st.ThrottleIOPS, st.ThrottleBurst)
	}
	if err := a.Apply(Fault{Kind: FaultRestore}); err != nil {
		t.Fatal(err)
	}
	a.members[0].busyUntil = time.Time{} // the last throttled requests still hold the queue
	t1 := time.Now()
	if done, _, _ := a.serve(false, 0, 4096); done.Sub(t1) > 20*time.Millisecond {
		t.Errorf("after restore a request took %v, want no throttle", done.Sub(t1))
	}
}

// TestStall: about Fraction of the stalled member's operations take the
// stall longer; the other member's none.
func TestStall(t *testing.T) {
	a := newTestArray(t, Geometry{Level: RAID0, Members: 2, StripeUnit: 64 << 10, Size: 64 << 20})
	a.preset = Preset{Name: "fixed", Fixed: time.Millisecond}
	m := 0
	if err := a.Apply(Fault{Kind: FaultStall, Member: &m, Fraction: 0.03, Add: 100 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	const n = 4000
	for k := range n {
		if _, _, err := a.serve(false, int64(k%2)*(64<<10), 4096); err != nil {
			t.Fatal(err)
		}
		a.done()
	}
	st := a.Stats().MemberStats
	// Binomial(2000, 0.03): mean 60, sd 7.6.
	if st[0].Stalls < 35 || st[0].Stalls > 85 || st[1].Stalls != 0 {
		t.Errorf("stalls: member 0 %d (want ~60 of 2000), member 1 %d (want 0)", st[0].Stalls, st[1].Stalls)
	}
	if want := 2000*1e-3 + float64(st[0].Stalls)*0.1; st[0].BusySeconds < want-1e-6 || st[0].BusySeconds > want+1e-3 {
		t.Errorf("member 0 busy %.3fs, want %.3fs (2000 × 1ms + %d stalls × 100ms)", st[0].BusySeconds, want, st[0].Stalls)
	}
	for _, f := range []Fault{
		{Kind: FaultStall, Member: &m, Fraction: 1.5, Add: time.Millisecond},
		{Kind: FaultStall, Member: &m, Fraction: 0.1},
		{Kind: FaultStall, Fraction: 0.1, Add: time.Millisecond},
	} {
		if err := a.Apply(f); err == nil {
			t.Errorf("Apply(%+v): no error", f)
		}
	}
}

// TestRebuild: background operations take about Load of every member's
// time and foreground requests queue behind them; restore stops them.
func TestRebuild(t *testing.T) {
	a := newTestArray(t, Geometry{Level: RAID1, Members: 2, Size: 64 << 20})
	a.preset = Preset{Name: "fixed", Fixed: time.Millisecond}
	m := 1
	if err := a.Apply(Fault{Kind: FaultRebuild, Member: &m, Load: 0.8}); err != nil {
		t.Fatal(err)
	}
	var sum time.Duration
	const n = 40
	for range n {
		now := time.Now()
		done, _, err := a.serve(false, 0, 4096)
		if err != nil {
			t.Fatal(err)
		}
		a.done()
		sum += done.Sub(now)
		time.Sleep(time.Millisecond)
	}
	st := a.Stats().MemberStats
	if mean := sum / n; mean < 1200*time.Microsecond {
		t.Errorf("mean read %v during a rebuild at load 0.8, want > 1.2ms (1ms service + queueing)", mean)
	}
	if st[0].RebuildOps < 500 || st[0].RebuildWrite || !st[1].RebuildWrite || st[0].RebuildEvery != 1250*time.Microsecond {
		t.Errorf("rebuild stats %+v / %+v: want background reads on member 0 (>= 500 in the first second), writes on 1, every 1.25ms", st[0], st[1])
	}
	if err := a.Apply(Fault{Kind: FaultRestore}); err != nil {
		t.Fatal(err)
	}
	before := a.Stats().MemberStats[0].RebuildOps
	// Time passes: a rebuild still going would add background ops (one
	// every 1.25ms) by the next request.
	time.Sleep(5 * time.Millisecond)
	a.serve(false, 0, 4096)
	a.done()
	if after := a.Stats().MemberStats[0].RebuildOps; after != before {
		t.Errorf("after restore %d more background ops, want none", after-before)
	}
	if err := a.Apply(Fault{Kind: FaultRebuild, Member: &m, Load: 1}); err == nil {
		t.Error("Apply(rebuild, load 1): no error")
	}
}
