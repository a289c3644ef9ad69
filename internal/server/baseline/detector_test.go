package baseline

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

const ms = 1e-3

var t0 = time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)

// at is the time of run i: hourly runs.
func at(i int) time.Time { return t0.Add(time.Duration(i) * time.Hour) }

// Series generators. Noise is deterministic (seeded PCG).

// steady is n runs at level with ±jitter relative uniform noise.
func steady(rng *rand.Rand, n int, level, jitter float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = level * (1 + jitter*(2*rng.Float64()-1))
	}
	return out
}

func concat(parts ...[]float64) []float64 {
	var out []float64
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// drift multiplies run i by (1+rate)^i.
func drift(xs []float64, rate float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = x * math.Pow(1+rate, float64(i))
	}
	return out
}

// bimodal: each run is ~fast with probability 1−pSlow, else ~slow; with
// alternate set, runs strictly alternate fast, slow, fast, ...
func bimodal(rng *rand.Rand, n int, fast, slow, pSlow float64, alternate bool) []float64 {
	out := make([]float64, n)
	for i := range out {
		isSlow := rng.Float64() < pSlow
		if alternate {
			isSlow = i%2 == 1
		}
		base := fast
		if isSlow {
			base = slow
		}
		out[i] = base * (1 + 0.1*(2*rng.Float64()-1))
	}
	return out
}

// check is the expected state after run i. since < 0: not checked.
type check struct {
	i      int
	status Status
	ref    Reference
	since  int
}

func TestObserve(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(5, 1))
	noRefs := func(int) Refs { return Refs{} }
	fixed := func(r Refs) func(int) Refs { return func(int) Refs { return r } }
	// A cohort of healthy 1 ms volumes, and one of bimodal log volumes
	// whose medians land anywhere between the modes.
	cohort1ms := CohortOf([]float64{0.95 * ms, 1 * ms, 1.02 * ms, 0.98 * ms, 1.05 * ms, 1.1 * ms, 0.97 * ms, 1.01 * ms})
	cohortBimodal := CohortOf([]float64{1.1 * ms, 4.4 * ms, 4.6 * ms, 7.9 * ms, 4.5 * ms, 1.0 * ms, 8.1 * ms})
	logPrior := Band{Low: 0.5 * ms, Typical: 8.3 * ms, High: 25 * ms} // hdd-7200 log-write, priors.yaml
	prior1ms := Band{Low: 0.5 * ms, Typical: 1 * ms, High: 2.5 * ms}

	base := steady(rng, 60, 1*ms, 0.1)
	tests := []struct {
		name   string
		series []float64
		refs   func(i int) Refs
		checks []check
		// never: a status that must not appear at any run.
		never Status
	}{
		{
			name:   "step: degraded after K=4 runs, since the step",
			series: concat(base, steady(rng, 40, 3*ms, 0.1)),
			refs:   noRefs,
			checks: []check{{11, Learning, NoReference, 0}, {12, OK, History, 12}, {59, OK, History, 12},
				{60, OK, History, 12}, {61, OK, History, 12}, {62, OK, History, 12}, {63, Degraded, History, 60},
				// The history froze: still degraded 38 runs later.
				{99, Degraded, History, 60}},
		},
		{
			name:   "step and back: hysteresis of 3 normal runs",
			series: concat(base, steady(rng, 10, 3*ms, 0.1), steady(rng, 10, 1*ms, 0.1)),
			refs:   noRefs,
			checks: []check{{63, Degraded, History, 60}, {69, Degraded, History, 60},
				{70, Degraded, History, 60}, {71, Degraded, History, 60}, {72, OK, History, 70}, {79, OK, History, 70}},
		},
		{
			name: "recovery streak broken by a slow run starts over",
			series: concat(base, steady(rng, 5, 3*ms, 0.1),
				[]float64{1 * ms, 1 * ms, 3 * ms, 1 * ms, 1 * ms, 1 * ms}),
			refs: noRefs,
			// Runs 65, 66 normal; 67 slow; 68, 69, 70 normal.
			checks: []check{{63, Degraded, History, 60}, {66, Degraded, History, 60}, {67, Degraded, History, 60}, {69, Degraded, History, 60}, {70, OK, History, 68}},
		},
		{
			name:   "single spike: no alert",
			series: concat(base[:40], []float64{20 * ms}, base[40:]),
			refs:   fixed(Refs{Cohort: cohort1ms}),
			never:  Degraded,
		},
		{
			name:   "two-run burst, below K: no alert",
			series: concat(base[:40], []float64{6 * ms, 6 * ms}, base[40:]),
			refs:   fixed(Refs{Cohort: cohort1ms}),
			never:  Degraded,
		},
		{
			name:   "bimodal sync writes alternating 1/8 ms: no alert",
			series: bimodal(rng, 300, 1*ms, 8*ms, 0, true),
			refs:   fixed(Refs{Cohort: cohortBimodal, Prior: logPrior}),
			never:  Degraded,
		},
		{
			name:   "bimodal sync writes, 30% slow at random (runs of 3+ slow): no alert",
			series: bimodal(rng, 500, 1*ms, 8*ms, 0.3, false),
			refs:   fixed(Refs{Prior: logPrior}),
			never:  Degraded,
		},
		{
			name:   "bimodal sync writes, 70% slow at random: no alert",
			series: bimodal(rng, 500, 1*ms, 8*ms, 0.7, false),
			refs:   fixed(Refs{Cohort: cohortBimodal}),
			never:  Degraded,
		},
		{
			name:   "insufficient history: cohort first, then history",
			series: steady(rng, 20, 1*ms, 0.1),
			refs:   fixed(Refs{Cohort: cohort1ms, Prior: prior1ms}),
			checks: []check{{0, OK, Cohort, 0}, {11, OK, Cohort, 0}, {12, OK, History, 0}},
			never:  Degraded,
		},
		{
			name:   "insufficient history, cohort too small: prior",
			series: steady(rng, 20, 1*ms, 0.1),
			refs:   fixed(Refs{Cohort: CohortOf([]float64{1 * ms, 1 * ms, 1 * ms}), Prior: prior1ms}),
			checks: []check{{0, OK, Prior, 0}, {12, OK, History, 0}},
			never:  Degraded,
		},
		{
			name:   "new slow host: caught by the prior before it has history",
			series: steady(rng, 20, 4*ms, 0.1),
			refs:   fixed(Refs{Prior: prior1ms}),
			checks: []check{{2, OK, Prior, 0}, {3, Degraded, Prior, 0}, {19, Degraded, Prior, 0}},
		},
		{
			name:   "always-slow host: cohort outlier from day one, and stays one",
			series: steady(rng, 100, 3*ms, 0.1),
			refs:   fixed(Refs{Cohort: cohort1ms}),
			checks: []check{{0, OK, Cohort, 0}, {2, OK, Cohort, 0}, {3, Degraded, Cohort, 0}, {99, Degraded, Cohort, 0}},
		},
		{
			name:   "cohort appears later: an always-slow host shows when it does",
			series: steady(rng, 100, 3*ms, 0.1),
			refs: func(i int) Refs {
				if i < 50 {
					return Refs{}
				}
				return Refs{Cohort: cohort1ms}
			},
			checks: []check{{49, OK, History, 12}, {52, OK, History, 12}, {53, Degraded, Cohort, 50}},
		},
		{
			// Found on the lab: a spike that ended the streak named the
			// history, and the volume was stuck degraded against it.
			name:   "always-slow host whose streak against the cohort ends on a spike: degraded vs the cohort",
			series: concat(steady(rng, 53, 3*ms, 0.1), []float64{9 * ms}, steady(rng, 20, 3*ms, 0.1)),
			refs: func(i int) Refs {
				if i < 50 {
					return Refs{}
				}
				return Refs{Cohort: cohort1ms}
			},
			checks: []check{{52, OK, History, 12}, {53, Degraded, Cohort, 50}, {73, Degraded, Cohort, 50}},
		},
		{
			name:   "slow drift (+0.5%/run): history adapts, the cohort catches it",
			series: drift(steady(rng, 400, 1*ms, 0.05), 0.005),
			refs:   fixed(Refs{Cohort: cohort1ms}),
			checks: []check{{60, OK, History, 0}, {399, Degraded, Cohort, -1}},
		},
		{
			name:   "slow drift (+0.5%/run), no cohort: the prior catches it",
			series: drift(steady(rng, 400, 1*ms, 0.05), 0.005),
			refs:   fixed(Refs{Prior: prior1ms}),
			checks: []check{{60, OK, History, 0}, {399, Degraded, Prior, -1}},
		},
		{
			name:   "no reference at all: learning until the history is trusted",
			series: steady(rng, 13, 1*ms, 0.1),
			refs:   noRefs,
			checks: []check{{0, Learning, NoReference, 0}, {11, Learning, NoReference, 0}, {12, OK, History, 12}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := NewDetector(Config{})
			if err != nil {
				t.Fatal(err)
			}
			states := make([]State, len(tt.series))
			for i, x := range tt.series {
				states[i] = d.Observe(at(i), x, tt.refs(i))
				if tt.never != "" && states[i].Status == tt.never {
					t.Fatalf("Observe(run %d, %.3g ms) = %v, never want %s (history %+v, cohort %+v, prior %+v)",
						i, x/ms, states[i], tt.never, states[i].History, states[i].Cohort, states[i].Prior)
				}
			}
			for _, c := range tt.checks {
				got := states[c.i]
				if got.Status != c.status || got.Reference != c.ref || c.since >= 0 && !got.Since.Equal(at(c.since)) {
					want := State{Status: c.status, Reference: c.ref, Since: at(max(c.since, 0)), Ratio: got.Ratio, Streak: got.Streak}
					t.Errorf("Observe(run %d, %.3g ms) = %v, want %v (history %+v, cohort %+v, prior %+v)",
						c.i, tt.series[c.i]/ms, got, want, got.History, got.Cohort, got.Prior)
				}
			}
		})
	}
}

// TestDriftDetectedAfterHistoryAdapts: in the drift case the history alone
// never sees a shift, the cohort does; and the alert says by how much.
func TestDriftDetectedAfterHistoryAdapts(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 7))
	series := drift(steady(rng, 400, 1*ms, 0.05), 0.005)
	cohort := CohortOf([]float64{0.95 * ms, 1 * ms, 1.02 * ms, 0.98 * ms, 1.05 * ms})
	d, _ := NewDetector(Config{})
	first := -1
	for i, x := range series {
		s := d.Observe(at(i), x, Refs{Cohort: cohort})
		if s.History.Available() && s.History.Ratio >= d.Config().DegradeRatio {
			t.Fatalf("Observe(run %d) history ratio %.3f: want the history to keep up with a 0.5%%/run drift", i, s.History.Ratio)
		}
		if s.Status == Degraded && first < 0 {
			first = i
			if s.Reference != Cohort || s.Ratio < 1.5 || !s.Since.Equal(at(i-3)) {
				t.Errorf("Observe(run %d) = %v, want degraded vs cohort, ratio >= 1.5, since run %d", i, s, i-3)
			}
		}
	}
	if first < 0 {
		t.Fatalf("a 0.5%%/run drift over 400 runs (×%.1f) was never detected", math.Pow(1.005, 400))
	}
	// The level (median of 48 runs) lags the drift by ~24 runs: it crosses
	// 1.5 × the cohort near run ln(1.5)/ln(1.005) + 24 ≈ 105.
	if first < 90 || first > 130 {
		t.Errorf("drift detected at run %d, want about 105", first)
	}
}

func TestObserveIgnoresBadInput(t *testing.T) {
	t.Parallel()
	d, _ := NewDetector(Config{})
	for i := range 20 {
		d.Observe(at(10+i), 1*ms, Refs{})
	}
	want := d.State()
	for _, tc := range []struct {
		name string
		t    time.Time
		x    float64
	}{
		{"NaN", at(40), math.NaN()}, {"zero", at(40), 0}, {"negative", at(40), -1}, {"+Inf", at(40), math.Inf(1)},
		{"before the last run", at(0), 1 * ms},
		{"replay of the last run", at(29), 1 * ms},
	} {
		if got := d.Observe(tc.t, tc.x, Refs{}); got != want {
			t.Errorf("Observe(%s) = %v, want the last state %v unchanged", tc.name, got, want)
		}
	}
	if n := d.History().N; n != 20 {
		t.Errorf("History().N = %d after bad input, want 20", n)
	}
}

func TestStats(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   []float64
		want Stats
	}{
		{"empty", nil, Stats{}},
		{"odd", []float64{3, 1, 2}, Stats{N: 3, Median: 2, MAD: 1, P95: 2.9}},
		{"even", []float64{4, 1, 2, 3}, Stats{N: 4, Median: 2.5, MAD: 1, P95: 3.85}},
		{"skips invalid", []float64{1, math.NaN(), -1, 0, math.Inf(1), 1}, Stats{N: 2, Median: 1, MAD: 0, P95: 1}},
	}
	for _, tt := range tests {
		got := Summarize(tt.in)
		if got.N != tt.want.N || got.Median != tt.want.Median || got.MAD != tt.want.MAD || math.Abs(got.P95-tt.want.P95) > 1e-12 {
			t.Errorf("Summarize(%v) = %+v, want %+v", tt.in, got, tt.want)
		}
	}
	// Bimodal 70/30: the MAD collapses, the upper tail does not.
	xs := append(make([]float64, 0, 10), 1, 1, 1, 1, 1, 1, 1, 8, 8, 8)
	if s := Summarize(xs); s.MAD != 0 || s.Sigma() < 4 {
		t.Errorf("Summarize(70/30 bimodal) = %+v, Sigma %v: want MAD 0 and a sigma from the upper tail (>= 4)", s, s.Sigma())
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	if err := (Config{}).Validate(); err != nil {
		t.Errorf("Config{}.Validate() = %v, want nil (defaults)", err)
	}
	for _, c := range []Config{
		{Window: 2}, {Window: maxWindow + 1}, {MinHistory: 100}, {MinCohort: 1},
		{DegradeRatio: 0.9}, {RecoverRatio: 2}, {DegradeZ: -1}, {RecoverZ: 4},
		{Sustain: 100}, {Recover: -1}, {MinRelativeSpread: 1}, {DegradeRatio: math.Inf(1)},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v.Validate() = nil, want an error", c)
		}
		if _, err := NewDetector(c); err == nil {
			t.Errorf("NewDetector(%+v) = nil error, want one", c)
		}
	}
}

// TestWindowStaysSorted: the incrementally sorted copy of the window always
// equals the window sorted, through wrap-around, duplicates and Reset.
func TestWindowStaysSorted(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(11, 2))
	d, _ := NewDetector(Config{Window: 7, MinHistory: 3})
	for i := range 500 {
		x := float64(1+rng.IntN(5)) * ms // many duplicates
		if i == 250 {
			d.Reset()
		}
		d.ObserveRun(at(i), Run{Median: x, P99: 2 * x, Mean: float64(1+rng.IntN(5)) * ms, Ops: 50}, Refs{})
		want := slices.Sorted(slices.Values(d.hist.ring))
		if !slices.Equal(d.hist.byValue, want) {
			t.Fatalf("after run %d: byValue = %v, want %v", i, d.hist.byValue, want)
		}
		for k := range d.tracks {
			w := &d.tracks[k].win
			if want := slices.Sorted(slices.Values(w.ring)); !slices.Equal(w.byValue, want) {
				t.Fatalf("after run %d: signal %d byValue = %v, want %v", i, k, w.byValue, want)
			}
		}
	}
}

// TestSummarizeMatchesNaive: the one-pass MAD and the median-with-one-more
// agree with sorting the deviations.
func TestSummarizeMatchesNaive(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(4, 4))
	for n := 1; n < 60; n++ {
		for range 20 {
			xs := make([]float64, n)
			for i := range xs {
				xs[i] = float64(1 + rng.IntN(9)) // duplicates on purpose
			}
			sorted := slices.Sorted(slices.Values(xs))
			med := sortedMedian(sorted)
			devs := make([]float64, n)
			for i, x := range sorted {
				devs[i] = math.Abs(x - med)
			}
			slices.Sort(devs)
			if got, want := Summarize(xs).MAD, sortedMedian(devs); got != want {
				t.Fatalf("Summarize(%v).MAD = %v, want %v", xs, got, want)
			}
			x := float64(rng.IntN(11))
			if got, want := medianWith(sorted, x), sortedMedian(slices.Sorted(slices.Values(append(xs, x)))); got != want {
				t.Fatalf("medianWith(%v, %v) = %v, want %v", sorted, x, got, want)
			}
		}
	}
}
