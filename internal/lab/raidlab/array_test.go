package raidlab

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func newTestArray(t *testing.T, g Geometry) *Array {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "a.img"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	a, err := NewArray(g, presets["fast"], f, 1)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestRAID5LeftSymmetric(t *testing.T) {
	t.Parallel()
	// md's left-symmetric layout, 4 members: parity on 3, 2, 1, 0, 3, ...;
	// data follows the parity, wrapping.
	g := Geometry{Level: RAID5, Members: 4, StripeUnit: 64 << 10, Size: 64 << 20}
	var got [][2]int // (chunk → member) for the first 8 data chunks, with each stripe's parity
	for c := range int64(8) {
		p := g.pieces(c*g.StripeUnit, 4096)[0]
		got = append(got, [2]int{p.member, g.parityMember(p.stripe)})
	}
	want := [][2]int{{0, 3}, {1, 3}, {2, 3}, {3, 2}, {0, 2}, {1, 2}, {2, 1}, {3, 1}}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("chunk → (member, parity member) (-want +got):\n%s", d)
	}
}

func countOps(phases [][]memberOp) (reads, writes int) {
	for _, ph := range phases {
		for _, o := range ph {
			if o.write {
				writes++
			} else {
				reads++
			}
		}
	}
	return
}

func TestPlanOps(t *testing.T) {
	t.Parallel()
	const k = 1 << 10
	r5 := Geometry{Level: RAID5, Members: 4, StripeUnit: 64 * k, Size: 64 << 20}
	r10 := Geometry{Level: RAID10, Members: 4, StripeUnit: 64 * k, Size: 64 << 20}
	r0 := Geometry{Level: RAID0, Members: 4, StripeUnit: 64 * k, Size: 64 << 20}
	for _, tc := range []struct {
		name               string
		g                  Geometry
		write              bool
		off, n             int64
		fail               int // member to fail, -1 none
		reads, writes      int
		phases             int
		wantErr, wantSplit bool
	}{
		{"raid0 read inside a chunk", r0, false, 8 * k, 8 * k, -1, 1, 0, 1, false, false},
		{"raid0 read across a boundary", r0, false, 60 * k, 8 * k, -1, 2, 0, 1, false, true},
		{"raid0 read of 5 chunks merges member 0's two", r0, false, 0, 320 * k, -1, 4, 0, 1, false, true},
		{"raid10 read", r10, false, 0, 8 * k, -1, 1, 0, 1, false, false},
		{"raid10 write goes to both mirrors", r10, true, 0, 8 * k, -1, 0, 2, 1, false, false},
		{"raid10 split write", r10, true, 60 * k, 8 * k, -1, 0, 4, 1, false, true},
		{"raid5 small write: read-modify-write, 4 ops", r5, true, 8 * k, 8 * k, -1, 2, 2, 2, false, false},
		{"raid5 split small write in one stripe: two columns, each its own RMW", r5, true, 60 * k, 8 * k, -1, 4, 4, 2, false, true},
		// Left-symmetric puts the next stripe's first data chunk on the member
		// that held the last stripe's parity, and vice versa: the two RMWs
		// touch adjacent bytes of the same two members, one op each.
		{"raid5 split small write across stripes: adjacent on the members", r5, true, 192*k - 4*k, 8 * k, -1, 2, 2, 2, false, true},
		{"raid5 half-stripe write: reconstruct-write reads less", r5, true, 0, 128 * k, -1, 1, 3, 2, false, true},
		{"raid5 full-stripe write: no reads", r5, true, 0, 192 * k, -1, 0, 4, 1, false, true},
		{"raid5 degraded read of the failed member rebuilds from 3", r5, false, 8 * k, 8 * k, 0, 3, 0, 1, false, false},
		{"raid5 degraded read elsewhere", r5, false, 64*k + 8*k, 8 * k, 0, 1, 0, 1, false, false},
		{"raid5 write with the data member failed: reconstruct-write", r5, true, 8 * k, 8 * k, 0, 2, 1, 2, false, false},
		{"raid5 write with the parity member failed: data only", r5, true, 8 * k, 8 * k, 3, 0, 1, 1, false, false},
		{"raid0 failed member", r0, false, 64 * k, 8 * k, 1, 0, 0, 0, true, false},
		{"raid10 degraded read from the mirror", r10, false, 0, 8 * k, 0, 1, 0, 1, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newTestArray(t, tc.g)
			if tc.fail >= 0 {
				m := tc.fail
				if err := a.Apply(Fault{Kind: FaultFail, Member: &m}); err != nil {
					t.Fatal(err)
				}
			}
			if got := tc.g.Split(tc.off, tc.n); got != tc.wantSplit {
				t.Errorf("Split = %v, want %v", got, tc.wantSplit)
			}
			phases, err := a.plan(tc.write, tc.off, tc.n)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("plan: no error, want one (%v)", phases)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			r, w := countOps(phases)
			if r != tc.reads || w != tc.writes || len(phases) != tc.phases {
				t.Fatalf("got %d reads, %d writes in %d phases, want %d, %d in %d: %+v", r, w, len(phases), tc.reads, tc.writes, tc.phases, phases)
			}
			for _, ph := range phases {
				for _, o := range ph {
					if o.member == tc.fail {
						t.Errorf("an op was queued on failed member %d: %+v", tc.fail, o)
					}
				}
			}
		})
	}
}

// TestMemberQueue: one op at a time per member. Two reads of the same
// member queue behind each other; reads of different members overlap;
// a slow member takes its factor longer.
func TestMemberQueue(t *testing.T) {
	g := Geometry{Level: RAID0, Members: 2, StripeUnit: 64 << 10, Size: 64 << 20}
	a := newTestArray(t, g)
	a.preset = Preset{Name: "fixed", Fixed: 10 * time.Millisecond}
	t0 := time.Now()
	d1, _, _ := a.serve(false, 0, 4096)
	d2, _, _ := a.serve(false, 4096, 4096)   // member 0 again: queued
	d3, _, _ := a.serve(false, 64<<10, 4096) // member 1: in parallel
	if d2.Sub(d1) < 10*time.Millisecond {
		t.Errorf("second op on one member finished %v after the first, want ≥ 10ms (one at a time)", d2.Sub(d1))
	}
	if d3.Sub(t0) > 12*time.Millisecond {
		t.Errorf("op on an idle member finished %v after arrival, want ~10ms", d3.Sub(t0))
	}
	m := 1
	if err := a.Apply(Fault{Kind: FaultSlow, Member: &m, Factor: 3}); err != nil {
		t.Fatal(err)
	}
	t1 := time.Now()
	a.members[1].busyUntil = time.Time{}
	d4, _, _ := a.serve(false, 64<<10, 4096)
	if got := d4.Sub(t1); got < 30*time.Millisecond || got > 32*time.Millisecond {
		t.Errorf("slow ×3 member served a 10ms op in %v", got)
	}
	st := a.Stats()
	if st.MemberStats[0].ReadOps != 2 || st.MemberStats[1].ReadOps != 2 {
		t.Errorf("member op counts: %+v", st.MemberStats)
	}
}

func TestFaultValidation(t *testing.T) {
	t.Parallel()
	a := newTestArray(t, Geometry{Level: RAID1, Members: 2, Size: 1 << 20})
	bad, neg := 2, -1
	for _, f := range []Fault{
		{Kind: FaultSlow, Member: &bad, Factor: 2},
		{Kind: FaultSlow, Member: &neg, Factor: 2},
		{Kind: FaultSlow, Factor: 2},
		{Kind: FaultSlow, Member: new(int), Factor: 0.5},
		{Kind: FaultLatency, Add: -time.Second},
		{Kind: FaultLatency, Member: &bad, Add: time.Millisecond},
		{Kind: FaultFail},
		{Kind: FaultThrottle, IOPS: 10},
		{Kind: FaultThrottle, IOPS: 0.01, Burst: 1},
		{Kind: FaultRebuild, Load: 0.5},
		{Kind: FaultRebuild, Member: new(int), Load: -0.5},
		{Kind: "melt"},
	} {
		if err := a.Apply(f); err == nil {
			t.Errorf("Apply(%+v): no error", f)
		}
	}
}

// TestFaultsAddUp: faults of one member and of the array add up in Stats;
// restore clears every one of them.
func TestFaultsAddUp(t *testing.T) {
	t.Parallel()
	a := newTestArray(t, Geometry{Level: RAID10, Members: 4, StripeUnit: 64 << 10, Size: 64 << 20})
	one, two := 1, 2
	for _, f := range []Fault{
		{Kind: FaultSlow, Member: &one, Factor: 3},
		{Kind: FaultLatency, Member: &one, Add: 2 * time.Millisecond},
		{Kind: FaultLatency, Add: time.Millisecond},
		{Kind: FaultFail, Member: &two},
		{Kind: FaultStall, Member: &two, Fraction: 0.5, Add: time.Millisecond},
		{Kind: FaultThrottle, IOPS: 100, Burst: 10},
	} {
		if err := a.Apply(f); err != nil {
			t.Fatalf("Apply(%+v): %v", f, err)
		}
	}
	st := a.Stats()
	m1, m2 := st.MemberStats[1], st.MemberStats[2]
	if m1.SlowFactor != 3 || m1.AddLatency != 2*time.Millisecond || st.AddLatency != time.Millisecond ||
		!m2.Failed || m2.StallFraction != 0.5 || m2.StallLatency != time.Millisecond || st.ThrottleIOPS != 100 || st.ThrottleBurst != 10 {
		t.Errorf("after the faults: array %+v", st)
	}
	if err := a.Apply(Fault{Kind: FaultRestore}); err != nil {
		t.Fatal(err)
	}
	st = a.Stats()
	for i, m := range st.MemberStats {
		if m.SlowFactor != 0 || m.AddLatency != 0 || m.Failed || m.StallFraction != 0 || m.RebuildEvery != 0 {
			t.Errorf("member %d after restore: %+v", i, m)
		}
	}
	if st.AddLatency != 0 || st.ThrottleIOPS != 0 || st.ThrottleBurst != 0 {
		t.Errorf("array after restore: %+v", st)
	}
}
