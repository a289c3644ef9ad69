package members

import (
	"math"
	"testing"
	"time"

	"github.com/plumbline/plumbline/internal/server/store"
	"github.com/plumbline/plumbline/internal/vocab"
)

// counters is a member doing n reads and n/2 writes of 8 KiB in an
// interval, taking readMS and writeMS per op.
func counters(dev string, n uint64, readMS, writeMS float64) store.MemberCounters {
	return store.MemberCounters{Device: dev, State: []string{"in_sync"},
		Reads: n, ReadTimeMS: uint64(float64(n) * readMS), ReadSectors: 16 * n,
		Writes: n / 2, WriteTimeMS: uint64(float64(n/2) * writeMS), WriteSectors: 8 * n,
		IOTimeMS: uint64(float64(n)*readMS + float64(n/2)*writeMS)}
}

func md(members ...store.MemberCounters) store.MemberGroup {
	return store.MemberGroup{Device: "md0", Kind: "md", MountPoints: []string{"/data"}, Members: members}
}

func TestJudgeGroup(t *testing.T) {
	t.Parallel()
	cfg := DefaultConfig()
	healthy := func(dev string) store.MemberCounters { return counters(dev, 3000, 2, 4) }
	tests := []struct {
		name    string
		g       store.MemberGroup
		beyond  string // the one member beyond ("" none)
		dir     string
		ratio   float64 // its ratio, ±5%
		notJudg []string
	}{
		{"all alike", md(healthy("sdb"), healthy("sdc"), healthy("sdd"), healthy("sde")), "", "", 0, nil},
		{"reads ×3 on one", md(healthy("sdb"), healthy("sdc"), counters("sdd", 3000, 6, 4), healthy("sde")), "sdd", Read, 3, nil},
		{"writes ×2 on a mirror leg", store.MemberGroup{Device: "dm-2", Kind: "mirror", Members: []store.MemberCounters{
			{Device: "sdb", Writes: 1000, WriteTimeMS: 1000, WriteSectors: 16000}, {Device: "sdc", Writes: 1000, WriteTimeMS: 2000, WriteSectors: 16000}}},
			"sdc", Write, 2, nil},
		{"×1.3 is noise", md(healthy("sdb"), healthy("sdc"), counters("sdd", 3000, 2.6, 4), healthy("sde")), "", "", 0, nil},
		{"too few ops", md(counters("sdb", 10, 2, 4), counters("sdc", 10, 20, 40)), "", "", 0, []string{"sdb", "sdc"}},
		{"a faulty member is not compared", md(healthy("sdb"), healthy("sdc"),
			func() store.MemberCounters { c := counters("sdd", 3000, 9, 9); c.State = []string{"faulty"}; return c }()), "", "", 0, []string{"sdd"}},
		{"a spare being rebuilt is not compared", md(healthy("sdb"), healthy("sdc"),
			func() store.MemberCounters { c := counters("sdd", 3000, 9, 9); c.State = []string{"spare"}; return c }()), "", "", 0, []string{"sdd"}},
		{"a write-mostly leg is not compared", md(healthy("sdb"),
			func() store.MemberCounters {
				c := counters("sdc", 3000, 9, 9)
				c.State = []string{"in_sync", "write_mostly"}
				return c
			}()), "", "", 0, []string{"sdb", "sdc"}},
		{"other work is not compared", md(healthy("sdb"), healthy("sdc"),
			func() store.MemberCounters { c := counters("sdd", 3000, 9, 4); c.ReadSectors *= 8; return c }()), "", "", 0, nil},
		{"an idle group", md(store.MemberCounters{Device: "sdb"}, store.MemberCounters{Device: "sdc"}), "", "", 0, []string{"sdb", "sdc"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			vs := JudgeGroup(cfg, time.Minute, tt.g)
			if len(vs) != len(tt.g.Members) {
				t.Fatalf("%d verdicts for %d members", len(vs), len(tt.g.Members))
			}
			for _, v := range vs {
				switch {
				case v.Device == tt.beyond:
					if !v.Beyond || v.Direction != tt.dir || v.Ratio < tt.ratio*0.95 || v.Ratio > tt.ratio*1.05 || v.Normal {
						t.Errorf("%s: %+v; want beyond in %s at ×%.1f", v.Device, v, tt.dir, tt.ratio)
					}
				case v.Beyond:
					t.Errorf("%s: beyond (%+v); want not", v.Device, v)
				}
				notJudged := false
				for _, d := range tt.notJudg {
					notJudged = notJudged || d == v.Device
				}
				if v.Judged == notJudged {
					t.Errorf("%s: judged %v; want %v", v.Device, v.Judged, !notJudged)
				}
			}
		})
	}
}

// The slow member's utilisation is shown beside its siblings' median.
func TestJudgeGroupUtilisation(t *testing.T) {
	t.Parallel()
	g := md(counters("sdb", 3000, 2, 4), counters("sdc", 3000, 2, 4), counters("sdd", 3000, 6, 4))
	vs := JudgeGroup(Config{}, time.Minute, g)
	if u := vs[2].Util; u < 0.39 || u > 0.41 { // 3000×6 + 1500×4 ms of 60 s
		t.Errorf("sdd utilisation %.3f, want 0.4", u)
	}
	if u := vs[2].SiblingsUtil; u < 0.19 || u > 0.21 {
		t.Errorf("sdd siblings' utilisation %.3f, want 0.2", u)
	}
}

// minutes feeds verdicts to Observe one minute apart, from at.
type minutes struct {
	cfg Config
	st  store.MemberState
	at  time.Time
}

func (m *minutes) step(v Verdict) bool {
	ch := Observe(m.cfg, &m.st, v, m.at, m.at.Add(time.Minute))
	m.at = m.at.Add(time.Minute)
	return ch
}

// A member is named once Sustain of the last SustainWindow intervals
// judged are beyond (a dip does not start over), since the oldest of them;
// an interval in between neither names nor clears it; it is cleared after
// Recover normal intervals in a row. Intervals it is not judged in move
// nothing; a gap of Stale starts the count again; scattered beyond
// intervals never name it.
func TestObserve(t *testing.T) {
	t.Parallel()
	cfg := DefaultConfig()
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	beyond := Verdict{Judged: true, Beyond: true, Direction: Read, Ratio: 3}
	between := Verdict{Judged: true, Direction: Read, Ratio: 1.3}
	normal := Verdict{Judged: true, Normal: true, Direction: Read, Ratio: 1}
	idle := Verdict{}
	m := &minutes{cfg: cfg, at: t0}
	step, st := m.step, &m.st
	step(normal)
	for i, v := range []Verdict{beyond, beyond, between, beyond} {
		if step(v) || st.Slow {
			t.Fatalf("interval %d: named after %b", i, st.Recent)
		}
	}
	// The 4th beyond of the last 6, the first of them at 00:01.
	if !step(beyond) || !st.Slow || !st.Since.Equal(t0.Add(time.Minute)) || st.Ratio != 3 {
		t.Fatalf("after 4 of 5 beyond: %+v; want named since %s at ×3", st, t0.Add(time.Minute))
	}
	for i, v := range []Verdict{normal, normal, between, normal, idle, normal} {
		if step(v) || !st.Slow {
			t.Fatalf("interval %d after naming: cleared too early (%+v)", i, st)
		}
	}
	if !step(normal) || st.Slow || !st.Since.IsZero() {
		t.Fatalf("after 3 normal in a row: %+v; want cleared", st)
	}
	// A count broken by an hour's silence starts again.
	step(beyond)
	step(beyond)
	step(beyond)
	m.at = m.at.Add(cfg.Stale)
	if step(beyond) || st.Slow || st.Recent != 1 {
		t.Fatalf("after a gap: %+v; want a new count of 1", st)
	}
	// Beyond one interval in three, for an hour: never named.
	*st = store.MemberState{}
	for i := range 60 {
		v := normal
		if i%3 == 0 {
			v = beyond
		}
		if step(v) || st.Slow {
			t.Fatalf("scattered beyond intervals named it at %d: %b", i, st.Recent)
		}
	}
}

// The CUSUM path: a member a little slower than its siblings in every
// interval — too little for any one interval to be beyond them — is named
// once the sum of its log ratios over the reference reaches the limit,
// since the interval the sum rose from 0; a member at or below the
// reference never is; one wild interval (capped) does not name it; and
// clearing it starts the sum again.
func TestObserveDrift(t *testing.T) {
	t.Parallel()
	cfg := DefaultConfig()
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	mild := func(ratio float64) Verdict {
		return Verdict{Judged: true, Direction: Write, Ratio: ratio, Excess: math.Log(min(ratio, cfg.DriftCap)), Normal: ratio < cfg.RecoverRatio}
	}
	m := &minutes{cfg: cfg, at: t0}
	step, st := m.step, &m.st
	// At the reference, or a little below it, for a day: never named.
	for i := range 1440 {
		r := 1.2
		if i%2 == 1 {
			r = 1.1
		}
		if step(mild(r)) || st.Slow || st.Drift > 1e-9 {
			t.Fatalf("interval %d at ×%.1f: drift %.3g, named %v", i, r, st.Drift, st.Slow)
		}
	}
	// ×1.4 in every interval: (ln 1.4 − ln 1.2) ≈ 0.154 an interval, the
	// limit 1.2 in the 8th.
	start := m.at
	for i := range 7 {
		if step(mild(1.4)) || st.Slow {
			t.Fatalf("×1.4 interval %d: named too early, drift %.3g", i, st.Drift)
		}
	}
	if !step(mild(1.4)) || !st.Slow || !st.Since.Equal(start) {
		t.Fatalf("after 8 intervals at ×1.4: %+v; want named since %s", st, start)
	}
	for range 3 {
		step(mild(1))
	}
	if st.Slow || st.Drift != 0 || !st.DriftStart.IsZero() {
		t.Fatalf("after 3 normal intervals: %+v; want cleared, sum 0", st)
	}
	// Two wild intervals (×10, capped at ×2) and normal ones after: not named.
	*st = store.MemberState{}
	for i, r := range []float64{10, 10, 1, 1, 1, 1, 1, 1} {
		if step(mild(r)) || st.Slow {
			t.Fatalf("interval %d (×%g): named on two wild intervals, drift %.3g", i, r, st.Drift)
		}
	}
	if st.Drift != 0 {
		t.Errorf("drift after recovery = %.3g, want 0", st.Drift)
	}
}

// JudgeGroup's Excess is the mean of the member's capped log ratios over
// the directions compared, and at most 0 where its await is within
// MinExcess of its siblings'.
func TestJudgeGroupExcess(t *testing.T) {
	t.Parallel()
	cfg := DefaultConfig()
	member := func(dev string, rMS, wMS uint64) store.MemberCounters {
		return store.MemberCounters{Device: dev, State: []string{vocab.MDInSync}, Reads: 100, ReadTimeMS: rMS, Writes: 100,
			WriteTimeMS: wMS, ReadSectors: 1600, WriteSectors: 1600}
	}
	g := store.MemberGroup{Device: "md0", Kind: string(vocab.MemberGroupMD), Members: []store.MemberCounters{
		member("sda", 1000, 1000), member("sdb", 1000, 1000), member("sdc", 1300, 1600), member("sdd", 9000, 1000)}}
	got := map[string]float64{}
	for _, v := range JudgeGroup(cfg, time.Minute, g) {
		got[v.Device] = v.Excess
	}
	want := map[string]float64{
		"sdc": (math.Log(1.3) + math.Log(1.6)) / 2, // both directions
		"sdd": (math.Log(2) + 0) / 2,               // read ×9 capped at ×2, write even
	}
	for dev, w := range want {
		if math.Abs(got[dev]-w) > 1e-9 {
			t.Errorf("%s: Excess %.4f, want %.4f", dev, got[dev], w)
		}
	}
	// Awaits of 1.5 and 1 µs: ×1.5, but within MinExcess: nothing added.
	tiny := store.MemberGroup{Device: "md1", Kind: string(vocab.MemberGroupMD), Members: []store.MemberCounters{
		member("nvme0n1", 0, 0), member("nvme1n1", 0, 0), member("nvme2n1", 0, 0)}}
	tiny.Members[2].Reads = 67 // 0.5 ms / 67 vs 0.5 ms / 100
	for _, v := range JudgeGroup(cfg, time.Minute, tiny) {
		if v.Excess > 0 {
			t.Errorf("%s: Excess %.4f within MinExcess, want ≤ 0", v.Device, v.Excess)
		}
	}
}
