package baseline

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// opsRun builds a Run from per-operation latencies the way the evaluator
// reads a histogram: order-statistic quantiles, the exact mean, and the
// achieved rate of a run paced at capIOPS whose operations also took the
// time given by extra (seconds the run spent waiting beyond its pacing).
func opsRun(lat []float64, capIOPS, achieved float64) Run {
	s := slices.Sorted(slices.Values(lat))
	var sum float64
	for _, x := range s {
		sum += x
	}
	return Run{Median: sortedQuantile(s, 0.5), P99: sortedQuantile(s, 0.99), Mean: sum / float64(len(s)),
		Ops: len(s), IOPS: achieved, Cap: capIOPS}
}

// healthyOps: n operations around base, ±20% log-uniform.
func healthyOps(rng *rand.Rand, n int, base float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = base * math.Exp(0.2*(2*rng.Float64()-1))
	}
	return out
}

// stallOps: healthy operations of which each stalls for stall with
// probability frac.
func stallOps(rng *rand.Rand, n int, base, frac, stall float64) []float64 {
	out := healthyOps(rng, n, base)
	for i := range out {
		if rng.Float64() < frac {
			out[i] = stall * (1 + 0.1*rng.Float64())
		}
	}
	return out
}

// bimodalOps: synced writes that land in a cache (fast) or on the platter
// (slow), slow with probability pSlow.
func bimodalOps(rng *rand.Rand, n int, fast, slow, pSlow float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		base := fast
		if rng.Float64() < pSlow {
			base = slow
		}
		out[i] = base * math.Exp(0.15*(2*rng.Float64()-1))
	}
	return out
}

// healthyRun: a 50-op run that keeps up with its 50 IOPS cap.
func healthyRun(rng *rand.Rand) Run {
	return opsRun(healthyOps(rng, 50, 0.35*ms), 50, 50*(1+0.02*rng.Float64()))
}

func TestObserveRunShapes(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(15, 1))
	runs := func(n int, f func() Run) []Run {
		out := make([]Run, n)
		for i := range out {
			out[i] = f()
		}
		return out
	}
	join := func(parts ...[]Run) []Run {
		var out []Run
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	healthy := runs(60, func() Run { return healthyRun(rng) })
	def := DefaultConfig()
	tests := []struct {
		name   string
		series []Run
		// wantFrom: the first faulted run (-1: never degraded at all, on
		// any signal). The state must turn degraded on signal, with the
		// median's own state not degraded unless signal is the median,
		// no sooner than the shortest sustain of the shipped defaults
		// (the median's 4 runs) and by the by-th faulted run.
		wantFrom, by int
		signal       Signal
		detail       string // a substring of State.Detail at the end
		// clearBy: ok again by this run (0: not checked).
		clearBy int
	}{
		{
			// One member stalls 3% of its operations for 100 ms: the median
			// does not move, the p99 does in most runs.
			name: "median steady, tail up (3% of ops stall 100 ms)",
			series: join(healthy, runs(20, func() Run {
				return opsRun(stallOps(rng, 50, 0.35*ms, 0.03, 100*ms), 50, 48)
			})),
			wantFrom: 60, by: def.Tail.Sustain + 2, signal: SignalTail, detail: "p99 ×",
		},
		{
			// The throttled volume: 60% of ops at their usual
			// latency, 40% waiting ~80 ms for a token, 20 of 50 IOPS.
			name: "rate capped: throttled, median steady",
			series: join(healthy, runs(20, func() Run {
				return opsRun(stallOps(rng, 50, 0.35*ms, 0.4, 80*ms), 50, 20*(1+0.05*rng.Float64()))
			})),
			wantFrom: 60, by: def.Rate.Sustain, signal: SignalRate, detail: "/50 IOPS",
		},
		{
			// Every op as fast as ever, but the run cannot keep its pace.
			name: "rate capped alone",
			series: join(healthy, runs(20, func() Run {
				return opsRun(healthyOps(rng, 50, 0.35*ms), 50, 20)
			})),
			wantFrom: 60, by: def.Rate.Sustain, signal: SignalRate, detail: "rate 20/50 IOPS",
		},
		{
			name: "rate capped, then restored: ok after 3 normal runs",
			series: join(healthy, runs(10, func() Run {
				return opsRun(healthyOps(rng, 50, 0.35*ms), 50, 20)
			}), runs(10, func() Run { return healthyRun(rng) })),
			wantFrom: 60, by: def.Rate.Sustain, signal: SignalRate, clearBy: 72,
		},
		{
			// Rebuild-style background load: most ops queue behind it a
			// little, the mean and the tail rise, the median by 30%: the
			// median corroborates the mean (Mean.Corroborated runs).
			name: "mean up (background load), median below its threshold",
			series: join(healthy, runs(20, func() Run {
				ops := healthyOps(rng, 50, 0.45*ms)
				for i := range ops {
					if rng.Float64() < 0.2 {
						ops[i] += 4 * ms * rng.Float64()
					}
				}
				return opsRun(ops, 50, 49)
			})),
			wantFrom: 60, by: def.Mean.Corroborated, signal: SignalMean, detail: "mean ×",
		},
		{
			name: "single stall run (30% of ops at 100 ms): no alert",
			series: join(healthy[:40], []Run{opsRun(stallOps(rng, 50, 0.35*ms, 0.3, 100*ms), 50, 12)},
				runs(40, func() Run { return healthyRun(rng) })),
			wantFrom: -1,
		},
		{
			name: "two stall runs, below sustain: no alert",
			series: join(healthy[:40], runs(2, func() Run { return opsRun(stallOps(rng, 50, 0.35*ms, 0.1, 100*ms), 50, 30) }),
				runs(40, func() Run { return healthyRun(rng) })),
			wantFrom: -1,
		},
		{
			name: "healthy with a rare slow op (1 in 400 at 20 ms): no alert",
			series: runs(600, func() Run {
				return opsRun(stallOps(rng, 50, 0.35*ms, 1.0/400, 20*ms), 50, 50)
			}),
			wantFrom: -1,
		},
		{
			name: "bimodal synced writes (1 / 8 ms, 30% slow): no alert",
			series: runs(600, func() Run {
				return opsRun(bimodalOps(rng, 50, 1*ms, 8*ms, 0.3), 0, 0)
			}),
			wantFrom: -1,
		},
		{
			name: "bimodal synced writes, the slow share wandering 5-60% per run: no alert",
			series: runs(600, func() Run {
				return opsRun(bimodalOps(rng, 50, 1*ms, 8*ms, 0.05+0.55*rng.Float64()), 0, 0)
			}),
			wantFrom: -1,
		},
		{
			name: "median step: the median names it",
			series: join(healthy, runs(10, func() Run {
				return opsRun(healthyOps(rng, 50, 1.0*ms), 50, 50)
			})),
			wantFrom: 60, by: def.Sustain, signal: SignalMedian, detail: "median ×",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := NewDetector(def) // the shipped defaults
			if err != nil {
				t.Fatal(err)
			}
			first := -1
			var last, firstState State
			for i, r := range tt.series {
				s := d.ObserveRun(at(i), r, Refs{})
				last = s
				if s.Status != Degraded {
					continue
				}
				if tt.wantFrom < 0 {
					t.Fatalf("ObserveRun(run %d, %+v) = %v on %s (%s), never want degraded", i, r, s, s.Signal, s.Detail())
				}
				if first < 0 {
					first, firstState = i, s
					if s.Signal != tt.signal || tt.signal != SignalMedian && d.Of(SignalMedian).Status == Degraded {
						t.Errorf("ObserveRun(run %d) = %v on %s (%s), want degraded on %s with the median steady", i, s, s.Signal, s.Detail(), tt.signal)
					}
					if want := tt.signal == SignalRate; s.Throttled() != want {
						t.Errorf("ObserveRun(run %d).Throttled() = %v, want %v", i, s.Throttled(), want)
					}
					if tt.detail != "" && !strings.Contains(s.Detail(), tt.detail) {
						t.Errorf("ObserveRun(run %d).Detail() = %q, want it to contain %q", i, s.Detail(), tt.detail)
					}
				}
			}
			if tt.wantFrom < 0 {
				return
			}
			if lo, hi := tt.wantFrom+def.Sustain-1, tt.wantFrom+tt.by-1; first < lo || first > hi {
				t.Fatalf("first degraded at run %d, want between %d and %d (last state %v, %s)", first, lo, hi, last, last.Detail())
			}
			t.Logf("degraded at faulted run %d on %s (%s)", first-tt.wantFrom+1, firstState.Signal, firstState.Detail())
			if tt.clearBy > 0 && last.Status != OK {
				t.Errorf("after the fault ended: %v (%s), want ok", last, last.Detail())
			}
		})
	}
}

// TestSignalsFreezeAndHold: a tail regression is kept out of the tail's
// history (it stays degraded while it lasts) and the median's history
// learns on undisturbed.
func TestSignalsFreezeAndHold(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(2, 15))
	d, _ := NewDetector(Config{})
	for i := range 60 {
		d.ObserveRun(at(i), healthyRun(rng), Refs{})
	}
	var s State
	for i := 60; i < 160; i++ {
		s = d.ObserveRun(at(i), opsRun(stallOps(rng, 50, 0.35*ms, 0.1, 100*ms), 50, 40), Refs{})
	}
	if s.Status != Degraded || s.Signal != SignalTail {
		t.Errorf("after 100 stalled runs: %v on %s, want still degraded on the tail (history frozen)", s, s.Signal)
	}
	if h := d.History(); h.N != 48 || h.Median > 0.4*ms {
		t.Errorf("median History() = %+v, want a full window near 0.35 ms", h)
	}
}

// TestTailSustainWithin: configured "3 of the last 5", the tail degrades
// on 3 beyond runs among the last 5, not only 3 in a row; 2 in every 5
// never does.
func TestTailSustainWithin(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		pattern string // S: a stalled run, .: a healthy one (repeated)
		want    bool
	}{
		{"S.S.S: degraded at the third stalled run", "S.S.S.....", true},
		{"S..S..S..S: 2 in every 5 at most, never", "S..S.", false},
		{"SS...: a pair every 5 runs, never", "SS...", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, 15))
			once3 := SignalConfig{Sustain: 3, Within: 3}
			d, err := NewDetector(withTailWithin(Config{Sustain: 3, Tail: once3, Mean: once3, Rate: once3}, 5, true))
			if err != nil {
				t.Fatal(err)
			}
			for i := range 60 {
				d.ObserveRun(at(i), healthyRun(rng), Refs{})
			}
			degraded := -1
			for i := range 100 {
				r := healthyRun(rng)
				if tc.pattern[i%len(tc.pattern)] == 'S' {
					r = opsRun(stallOps(rng, 50, 0.35*ms, 0.06, 100*ms), 50, 45)
				}
				if s := d.ObserveRun(at(60+i), r, Refs{}); s.Status == Degraded && degraded < 0 {
					degraded = i
					if s.Signal != SignalTail || !s.Since.Equal(at(60)) {
						t.Errorf("degraded at run %d: %v on %s, want the p99 since the first stalled run", i, s, s.Signal)
					}
				}
			}
			if got := degraded >= 0; got != tc.want {
				t.Errorf("degraded at run %d of the pattern %q repeated, want degraded: %v", degraded, tc.pattern, tc.want)
			}
			if tc.want && degraded != 4 {
				t.Errorf("degraded at run %d, want 4 (the third stalled run of S.S.S)", degraded)
			}
		})
	}
}

func TestSignalConfigValidate(t *testing.T) {
	t.Parallel()
	for _, c := range []Config{
		{Tail: SignalConfig{DegradeRatio: 0.5}}, {Mean: SignalConfig{RecoverRatio: 3}},
		{Rate: SignalConfig{Sustain: 65}}, {Tail: SignalConfig{MinOps: -1}},
		{Tail: SignalConfig{Sustain: 4, Within: 3}}, {Mean: SignalConfig{Within: 17}},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v.Validate() = nil, want an error", c)
		}
	}
	c := DefaultConfig()
	if c.Tail.MinOps != 50 || c.Rate.DegradeRatio != 1.5 {
		t.Errorf("DefaultConfig() tail/rate = %+v / %+v", c.Tail, c.Rate)
	}
}

// TestThrottleLeadsTheTail: the waits of a throttle move the p99 in the
// same runs as the rate; when the tail's streak completes before the
// rate's, the state still names the rate (throttled) — but a shortfall
// carried by a few stalled ops (a stalling disk) leaves the tail leading.
func TestThrottleLeadsTheTail(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 15))
	d, _ := NewDetector(Config{}) // the shipped defaults
	for i := range 60 {
		d.ObserveRun(at(i), healthyRun(rng), Refs{})
	}
	stalls := func(achieved float64) Run { return opsRun(stallOps(rng, 50, 0.35*ms, 0.1, 80*ms), 50, achieved) }
	// Runs whose stalls cost little rate, one short of the tail's sustain,
	// then a throttled one.
	def := DefaultConfig()
	last := 60 + def.Tail.Sustain - 1
	for i := 60; i < last; i++ {
		d.ObserveRun(at(i), stalls(46), Refs{})
	}
	// The throttled run: 20 of its 50 ops (40%) wait ~80 ms for a token
	// (a fixed count: a random 40% can put the median among the waits).
	throttled := healthyOps(rng, 50, 0.35*ms)
	for i := range 20 {
		throttled[i] = 80 * ms * (1 + 0.1*rng.Float64())
	}
	s := d.ObserveRun(at(last), opsRun(throttled, 50, 20), Refs{})
	if d.Of(SignalTail).Status != Degraded || d.Of(SignalRate).Status == Degraded {
		t.Fatalf("tail %+v, rate %+v: want the tail degraded and the rate not yet", d.Of(SignalTail), d.Of(SignalRate))
	}
	if s.Status != Degraded || !s.Throttled() || !s.Since.Equal(at(60)) {
		t.Errorf("ObserveRun = %v on %s (%s), want degraded and throttled since run 60", s, s.Signal, s.Detail())
	}

	// A stalling disk: 2 of 50 ops at 100 ms cost a short run 40% of its
	// rate, but the wait share is small: the p99 leads.
	d2, _ := NewDetector(Config{})
	for i := range 60 {
		d2.ObserveRun(at(i), healthyRun(rng), Refs{})
	}
	for i := 60; i < 60+def.Rate.Sustain; i++ {
		ops := healthyOps(rng, 50, 0.35*ms)
		ops[10], ops[30] = 100*ms, 100*ms
		s = d2.ObserveRun(at(i), opsRun(ops, 50, 30), Refs{})
	}
	if d2.Of(SignalRate).Status != Degraded || s.Status != Degraded || s.Throttled() || s.Signal != SignalTail {
		t.Errorf("stalling disk: %v on %s (%s), rate %+v: want degraded on the p99, not throttled", s, s.Signal, s.Detail(), d2.Of(SignalRate))
	}
}

// withTailWithin sets "Sustain of the last within" on the tail (and the
// mean when mean is set).
func withTailWithin(c Config, within int, mean bool) Config {
	c.Tail.Within = within
	if mean {
		c.Mean.Within = within
	}
	return c
}

// An episode keeps its start when another signal comes to lead it: a
// member stalls 3% of its ops (the p99 degrades), then turns slow on every
// op (the median degrades too and names the state). Since stays the p99's
// start, so `degraded since` and the alert's duration do not jump.
func TestEpisodeKeepsItsStart(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 21))
	d, _ := NewDetector(Config{}) // the shipped defaults
	for i := range 60 {
		d.ObserveRun(at(i), healthyRun(rng), Refs{})
	}
	i := 60
	var s State
	for ; s.Status != Degraded && i < 80; i++ {
		s = d.ObserveRun(at(i), opsRun(stallOps(rng, 50, 0.35*ms, 0.03, 100*ms), 50, 48), Refs{})
	}
	if s.Status != Degraded || s.Signal != SignalTail {
		t.Fatalf("stalls: %v on %s, want degraded on the p99", s, s.Signal)
	}
	start := s.Since
	for n := 0; d.Of(SignalMedian).Status != Degraded && n < 20; n, i = n+1, i+1 {
		s = d.ObserveRun(at(i), opsRun(stallOps(rng, 50, 1.2*ms, 0.03, 100*ms), 50, 48), Refs{})
		if s.Status != Degraded || !s.Since.Equal(start) {
			t.Fatalf("run %d: %v on %s, want degraded since the episode's start %s", i, s, s.Signal, start.Format(time.RFC3339))
		}
	}
	if s.Signal != SignalMedian || d.Of(SignalMedian).Since.Equal(start) {
		t.Fatalf("slow member: %v on %s, median since %s; want the median leading, degraded after the p99", s, s.Signal, d.Of(SignalMedian).Since)
	}
}
