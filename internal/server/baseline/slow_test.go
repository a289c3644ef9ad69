package baseline

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// slowRunOf is opsRun with the run's slow ops counted as the evaluator
// counts them (at least SlowFactor × the run's median).
func slowRunOf(lat []float64, capIOPS, achieved float64) Run {
	r := opsRun(lat, capIOPS, achieved)
	for _, x := range lat {
		if x >= SlowFactor*r.Median {
			r.Slow++
		}
	}
	return r
}

// slowHealthy: a 50-op run with no op near SlowFactor × its median.
func slowHealthy(rng *rand.Rand) Run {
	return slowRunOf(healthyOps(rng, 50, 0.35*ms), 50, 50*(1+0.02*rng.Float64()))
}

// withSlowOps: a healthy run with n of its ops stalled for stall.
func withSlowOps(rng *rand.Rand, n int, stall float64) Run {
	ops := healthyOps(rng, 50, 0.35*ms)
	for _, i := range rng.Perm(len(ops))[:n] {
		ops[i] = stall * (1 + 0.1*rng.Float64())
	}
	return slowRunOf(ops, 50, 50)
}

// TestSlowShapes: synthetic series after a history long enough for the
// slow-op count (its MinHistory pools) at the shipped defaults. A stall
// too sparse for the p99 to stay up run after run degrades on the slow-op
// count and names it; one or two stalled runs, and bursts of slow ops the
// history already holds, do not.
func TestSlowShapes(t *testing.T) {
	t.Parallel()
	def := DefaultConfig()
	learn := def.Slow.MinHistory + def.Slow.Pool + 2*def.Slow.Pool
	rng := rand.New(rand.NewPCG(15, 8))
	quiet := func(int) Run { return slowHealthy(rng) }
	// bursty: every 25 runs a burst of 3 runs with 2 slow ops each (a
	// pooled count of 6), as a loaded host's own stalls come.
	bursty := func(i int) Run {
		if i%25 < 3 {
			return withSlowOps(rng, 2, 20*ms)
		}
		return slowHealthy(rng)
	}
	stall := func(frac float64) func(int) Run {
		return func(int) Run { return slowRunOf(stallOps(rng, 50, 0.35*ms, frac, 100*ms), 50, 50) }
	}
	tests := []struct {
		name    string
		history func(int) Run
		fault   []func(int) Run // one per faulted run; the last repeats to faultRuns
		runs    int             // faulted runs judged, then the history's shape again
		after   int             // runs of the history's shape after the fault
		// by: degraded on the slow-op count by this faulted run (0: never
		// degraded on anything).
		by int
		// clearBy: ok again within this many runs after the fault (0: not
		// checked).
		clearBy int
		// orTail: the p99, whose 6 runs see the same stalls, may name it
		// first.
		orTail bool
	}{
		{name: "single stall run (30% of ops at 100 ms): no alert", history: quiet, fault: []func(int) Run{stall(0.3)}, runs: 1, after: 60},
		{name: "two stall runs (10% of ops at 100 ms): no alert", history: quiet, fault: []func(int) Run{stall(0.1)}, runs: 2, after: 60},
		{name: "3% of ops stall 100 ms: slow ops", history: quiet, fault: []func(int) Run{stall(0.03)}, runs: 12, by: 6},
		{name: "3% stall, then restored: ok again", history: quiet, fault: []func(int) Run{stall(0.03)}, runs: 12, after: 30, by: 6,
			clearBy: def.Slow.Pool + def.Slow.Recover + 2},
		{name: "a stall ramping up a slow op at a time: the ramp is not learned", history: quiet,
			fault: []func(int) Run{
				func(int) Run { return withSlowOps(rng, 1, 100*ms) }, quiet, quiet, quiet,
				func(int) Run { return withSlowOps(rng, 1, 100*ms) }, quiet, func(int) Run { return withSlowOps(rng, 1, 100*ms) }, quiet,
				func(int) Run { return withSlowOps(rng, 1, 100*ms) }, func(int) Run { return withSlowOps(rng, 1, 100*ms) },
				func(int) Run { return withSlowOps(rng, 2, 100*ms) },
			}, runs: 14, by: 14},
		{name: "bursty history, the same bursts: no alert", history: bursty, fault: []func(int) Run{bursty}, runs: 500},
		{name: "bursty history, 2 slow ops every run: slow ops", history: bursty,
			fault: []func(int) Run{func(int) Run { return withSlowOps(rng, 2, 100*ms) }}, runs: 12, by: 6, orTail: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := NewDetector(def)
			if err != nil {
				t.Fatal(err)
			}
			for i := range learn {
				if s := d.ObserveRun(at(i), tt.history(i), Refs{}); s.Status == Degraded {
					t.Fatalf("history run %d: %v (%s), want not degraded", i, s, s.Detail())
				}
			}
			if st := d.Of(SignalSlow).Status; st != OK {
				t.Fatalf("after %d history runs the slow-op count is %s, want ok", learn, st)
			}
			first, end := -1, -1
			var firstState State
			n := learn
			for i := range tt.runs + tt.after {
				var r Run
				switch {
				case i >= tt.runs:
					r = tt.history(n)
				case i < len(tt.fault):
					r = tt.fault[i](n)
				default:
					r = tt.fault[len(tt.fault)-1](n)
				}
				s := d.ObserveRun(at(n), r, Refs{})
				n++
				if s.Status == Degraded && first < 0 {
					first, firstState = i+1, s
				}
				if i >= tt.runs && s.Status == OK && end < 0 {
					end = i - tt.runs + 1
				}
			}
			if tt.by == 0 {
				if first > 0 {
					t.Fatalf("degraded at faulted run %d on %s (%s), want never", first, firstState.Signal, firstState.Detail())
				}
				return
			}
			if first < 0 || first > tt.by {
				t.Fatalf("first degraded at faulted run %d, want by run %d", first, tt.by)
			}
			if tt.orTail && firstState.Signal == SignalTail {
				if st := d.Of(SignalSlow); st.Status != Degraded {
					t.Errorf("degraded on the p99 at faulted run %d, the slow-op count %+v: want it degraded too", first, st)
				}
				return
			}
			if firstState.Signal != SignalSlow || !strings.HasPrefix(firstState.Detail(), "slow ops ") || d.Of(SignalMedian).Status == Degraded {
				t.Errorf("degraded at faulted run %d: %v on %s (%s), want the slow-op count with the median steady", first, firstState, firstState.Signal, firstState.Detail())
			}
			if firstState.SlowOps < def.Slow.Floor || firstState.SlowOps < firstState.SlowCeiling+def.Slow.Margin || firstState.SlowOf != def.Slow.Pool*50 {
				t.Errorf("degraded with %d slow ops of %d vs a ceiling of %d: want at least the floor %d and the ceiling + %d, of %d ops",
					firstState.SlowOps, firstState.SlowOf, firstState.SlowCeiling, def.Slow.Floor, def.Slow.Margin, def.Slow.Pool*50)
			}
			t.Logf("degraded at faulted run %d (%s)", first, firstState.Detail())
			if tt.clearBy > 0 && (end < 0 || end > tt.clearBy) {
				t.Errorf("ok again %d runs after the fault ended, want by %d", end, tt.clearBy)
			}
		})
	}
}

// TestSlowLearning: before MinHistory pools the slow-op count is learning
// and judges nothing; a volume whose every pool is full of slow ops (this
// machine's disk: bimodal synced writes) learns a ceiling at the top and
// never alerts on it.
func TestSlowLearning(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(4, 8))
	def := DefaultConfig()
	d, _ := NewDetector(def)
	for i := range def.Slow.MinHistory {
		s := d.ObserveRun(at(i), withSlowOps(rng, 2+rng.IntN(3), 20*ms), Refs{})
		if st := d.Of(SignalSlow).Status; st != Learning || s.Status == Degraded {
			t.Fatalf("run %d: slow-op count %s, state %v: want learning, not degraded", i, st, s)
		}
	}
	for i := def.Slow.MinHistory; i < 2000; i++ {
		if s := d.ObserveRun(at(i), withSlowOps(rng, 2+rng.IntN(3), 20*ms), Refs{}); s.Status == Degraded {
			t.Fatalf("run %d: %v (%s), want never degraded", i, s, s.Detail())
		}
	}
	if st := d.Of(SignalSlow); st.Status != OK || st.History.Baseline != float64(def.Slow.Pool*def.Slow.PerRun) {
		t.Errorf("slow-op count after 2000 saturated runs = %+v, want ok against a ceiling of %d", st, def.Slow.Pool*def.Slow.PerRun)
	}
}

// TestSlowRoundTrip: a Detector persisted and restored anywhere in a stall
// episode goes on exactly like the one that never stopped; a version-2
// state (no slow-op count) restores with the slow-op count learning.
func TestSlowRoundTrip(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(5, 8))
	def := DefaultConfig()
	var series []Run
	for i := range def.Slow.MinHistory + 40 {
		if i%30 == 0 {
			series = append(series, withSlowOps(rng, 2, 20*ms))
			continue
		}
		series = append(series, slowHealthy(rng))
	}
	for range 15 {
		series = append(series, withSlowOps(rng, 2, 100*ms))
	}
	for range 15 {
		series = append(series, slowHealthy(rng))
	}
	n := len(series)
	for _, cut := range []int{3, def.Slow.MinHistory + 7, n - 28, n - 24, n - 20, n - 10} {
		live, _ := NewDetector(def)
		for i := range cut {
			live.ObserveRun(at(i), series[i], Refs{})
		}
		b, _ := live.MarshalBinary()
		restored, _ := NewDetector(def)
		if err := restored.UnmarshalBinary(b); err != nil {
			t.Fatalf("UnmarshalBinary(state after %d runs) = %v", cut, err)
		}
		if b2, _ := restored.MarshalBinary(); !bytes.Equal(b, b2) {
			t.Errorf("MarshalBinary(UnmarshalBinary(state after %d runs)) differs", cut)
		}
		for i := cut; i < n; i++ {
			want, got := live.ObserveRun(at(i), series[i], Refs{}), restored.ObserveRun(at(i), series[i], Refs{})
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("after a restore at run %d, ObserveRun(run %d) differs (-live +restored):\n%s", cut, i, diff)
			}
			if diff := cmp.Diff(live.Of(SignalSlow), restored.Of(SignalSlow)); diff != "" {
				t.Fatalf("after a restore at run %d, run %d: Of(slow) differs:\n%s", cut, i, diff)
			}
		}
	}

	// Version 2: the same bytes without the slow-op count.
	d, _ := NewDetector(def)
	for i := range def.Slow.MinHistory + 20 {
		d.ObserveRun(at(i), series[i], Refs{})
	}
	b, _ := d.MarshalBinary()
	v2 := slices.Clone(b[:len(b)-len(d.slow.append(nil))-numTracks])
	v2[3] = 2
	restored, _ := NewDetector(def)
	if err := restored.UnmarshalBinary(v2); err != nil {
		t.Fatalf("UnmarshalBinary(version 2) = %v", err)
	}
	if st := restored.Of(SignalSlow); st.Status != "" || restored.slow.learned != 0 {
		t.Errorf("after a version-2 restore the slow-op count = %+v (%d pools learned), want empty", st, restored.slow.learned)
	}
	if restored.Of(SignalTail).Status != d.Of(SignalTail).Status || restored.History() != d.History() {
		t.Errorf("version-2 restore lost the other signals")
	}
}

func TestSlowConfigValidate(t *testing.T) {
	t.Parallel()
	for _, c := range []Config{
		{Slow: SlowConfig{Pool: 17}}, {Slow: SlowConfig{Pool: 16, PerRun: 3}}, {Slow: SlowConfig{Floor: 13}},
		{Slow: SlowConfig{Sustain: -1}}, {Slow: SlowConfig{Margin: -2}}, {Slow: SlowConfig{MinOps: -1}},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v.Validate() = nil, want an error", c.Slow)
		}
	}
}

// TestCorroboratedMean: a mean beyond its history in runs whose median is
// at least CorroborateRatio × its own degrades after Corroborated runs (a
// slow mirror member), one whose median stays put waits for Sustain (a
// loaded host's bursts); a restore in the middle of the streak goes on
// like the live detector.
func TestCorroboratedMean(t *testing.T) {
	t.Parallel()
	def := DefaultConfig()
	rng := rand.New(rand.NewPCG(6, 8))
	// member: every op 1.4× slower, a fifth of them 3 ms more.
	member := func() Run {
		ops := healthyOps(rng, 50, 0.49*ms)
		for i := range ops {
			if i%5 == 0 {
				ops[i] += 3 * ms
			}
		}
		return opsRun(ops, 50, 50)
	}
	// burst: the median put, a fifth of the ops 3 ms more.
	burst := func() Run {
		ops := healthyOps(rng, 50, 0.35*ms)
		for i := range ops {
			if i%5 == 0 {
				ops[i] += 3 * ms
			}
		}
		return opsRun(ops, 50, 50)
	}
	for _, tc := range []struct {
		name  string
		shape func() Run
		want  int
	}{{"median ×1.4, mean up: corroborated", member, def.Mean.Corroborated}, {"median put, mean up: not corroborated", burst, def.Mean.Sustain}} {
		t.Run(tc.name, func(t *testing.T) {
			var series []Run
			for range 60 {
				series = append(series, healthyRun(rng))
			}
			for range 10 {
				series = append(series, tc.shape())
			}
			live, _ := NewDetector(def)
			first := -1
			for i, r := range series {
				if i == 62 {
					b, _ := live.MarshalBinary()
					restored, _ := NewDetector(def)
					if err := restored.UnmarshalBinary(b); err != nil {
						t.Fatal(err)
					}
					for j := i; j < len(series); j++ {
						if diff := cmp.Diff(live.ObserveRun(at(j), series[j], Refs{}), restored.ObserveRun(at(j), series[j], Refs{})); diff != "" {
							t.Fatalf("after a restore at run 62, run %d differs (-live +restored):\n%s", j, diff)
						}
					}
					break
				}
				live.ObserveRun(at(i), r, Refs{})
			}
			d, _ := NewDetector(def)
			for i, r := range series {
				if s := d.ObserveRun(at(i), r, Refs{}); s.Status == Degraded && first < 0 {
					first = i - 59
					if s.Signal != SignalMean && s.Signal != SignalTail {
						t.Errorf("degraded on %s (%s), want the mean or the p99", s.Signal, s.Detail())
					}
				}
			}
			if d.Of(SignalMean).Status != Degraded || first > tc.want {
				t.Errorf("first degraded at faulted run %d, mean %+v: want the mean degraded by run %d", first, d.Of(SignalMean), tc.want)
			}
			if tc.want == def.Mean.Corroborated && first != tc.want {
				t.Errorf("first degraded at faulted run %d, want %d (Corroborated)", first, tc.want)
			}
		})
	}
}

// TestCorroboratedRate: a rate shortfall whose lost time is spread over
// many ops (a token bucket: 20 of 50 ops wait ~50 ms) degrades after
// Rate.Corroborated runs and names the rate (throttled); one carried by two
// stalled ops waits for the rate's Sustain.
func TestCorroboratedRate(t *testing.T) {
	t.Parallel()
	def := DefaultConfig()
	rng := rand.New(rand.NewPCG(7, 8))
	bucket := func() Run {
		ops := healthyOps(rng, 50, 0.35*ms)
		for i := range 20 {
			ops[i] = 50 * ms * (1 + 0.1*rng.Float64())
		}
		return opsRun(ops, 50, 20)
	}
	stalls := func() Run {
		ops := healthyOps(rng, 50, 0.35*ms)
		ops[10], ops[30] = 400*ms, 400*ms
		return opsRun(ops, 50, 30)
	}
	for _, tc := range []struct {
		name  string
		shape func() Run
		want  int
		rate  bool // named by the rate (throttled)
	}{{"token bucket: corroborated", bucket, def.Rate.Corroborated, true}, {"two stalls a run: not corroborated", stalls, def.Rate.Sustain, false}} {
		t.Run(tc.name, func(t *testing.T) {
			d, _ := NewDetector(def)
			for i := range 60 {
				d.ObserveRun(at(i), healthyRun(rng), Refs{})
			}
			rateAt := -1
			var s State
			for i := range 10 {
				s = d.ObserveRun(at(60+i), tc.shape(), Refs{})
				if d.Of(SignalRate).Status == Degraded && rateAt < 0 {
					rateAt = i + 1
				}
			}
			if rateAt != tc.want {
				t.Errorf("the rate degraded at faulted run %d, want %d", rateAt, tc.want)
			}
			if s.Throttled() != tc.rate {
				t.Errorf("after 10 runs: %v on %s (%s), throttled %v, want %v", s, s.Signal, s.Detail(), s.Throttled(), tc.rate)
			}
		})
	}
}
