package stripescan

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// hddRead is an 8 KiB read on a lab-like HDD member: 3.4 ms fixed plus a
// uniform rotational wait in [0, 4 ms); a split read waits for the slower
// of two members, each moving 4 KiB.
func hddRead(rng *rand.Rand, split bool) float64 {
	rot := func() float64 { return rng.Float64() * 4e-3 }
	if split {
		return 3.4e-3 + math.Max(rot(), rot()) + 27e-6
	}
	return 3.4e-3 + rot() + 54e-6
}

// ssdRead is an 8 KiB read on an SSD member behind a noisy round trip
// (log-normal, median 60 µs): a split read moves 4 KiB on each of two
// members at once and is 8 µs faster.
func ssdRead(rng *rand.Rand, split bool) float64 {
	rt := 60e-6 * math.Exp(0.3*rng.NormFloat64())
	if split {
		return 88e-6 + rt
	}
	return 96e-6 + rt
}

// noise is a read on a device with no stripe: heavy-tailed latency, the
// same for every class.
func noise(rng *rand.Rand, _ bool) float64 {
	v := 200e-6 * math.Exp(0.8*rng.NormFloat64())
	if rng.IntN(50) == 0 {
		v += 5e-3 * rng.Float64()
	}
	return v
}

// synth draws one run of n reads: unit 0 means no stripe.
func synth(rng *rand.Rand, n int, unit int64, read func(*rand.Rand, bool) float64) (inside []float64, straddles [][]float64) {
	ni, per := Shares(n)
	for range ni {
		inside = append(inside, read(rng, false))
	}
	for i, u := range Candidates() {
		var s []float64
		for range per[i] {
			s = append(s, read(rng, unit != 0 && u >= unit))
		}
		straddles = append(straddles, s)
	}
	return inside, straddles
}

func TestInferSynthetic(t *testing.T) {
	for _, tc := range []struct {
		name string
		unit int64
		read func(*rand.Rand, bool) float64
		want int64
	}{
		{"no stripe, heavy-tailed noise", 0, noise, 0},
		{"no stripe, HDD", 0, hddRead, 0},
		{"HDD 64 KiB", 64 << 10, hddRead, 64 << 10},
		{"HDD 16 KiB", 16 << 10, hddRead, 16 << 10},
		{"HDD 256 KiB", 256 << 10, hddRead, 256 << 10},
		{"HDD 1 MiB", 1 << 20, hddRead, 1 << 20},
		{"HDD 2 MiB: beyond the range", 2 << 20, hddRead, 0},
		{"SSD 128 KiB: split reads faster", 128 << 10, ssdRead, 128 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, uint64(tc.unit)))
			inside, st := synth(rng, MaxOps, tc.unit, tc.read)
			inf := Infer(inside, st, 0)
			if inf.Unit != tc.want {
				t.Fatalf("inferred %d, want %d: %s\n%+v", inf.Unit, tc.want, inf.Reason, inf.Candidates)
			}
			if tc.want == 0 {
				if inf.Confidence != 0 || inf.StraddleCost != 0 {
					t.Errorf("none with confidence %g, cost %g", inf.Confidence, inf.StraddleCost)
				}
				return
			}
			if inf.Confidence < 1-DefaultAlpha {
				t.Errorf("confidence %g below %g", inf.Confidence, 1-DefaultAlpha)
			}
			if inf.StraddleCostLow > inf.StraddleCost || inf.StraddleCost > inf.StraddleCostHigh {
				t.Errorf("cost %g outside its interval [%g, %g]", inf.StraddleCost, inf.StraddleCostLow, inf.StraddleCostHigh)
			}
		})
	}
}

// TestStraddleCostCoverage checks the straddle cost's interval: over
// seeded runs of the HDD model it holds the model's true shift (the median
// of a split read's latency minus an unsplit one's) in about 1−α of them.
func TestStraddleCostCoverage(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	d := make([]float64, 400001)
	for i := range d {
		d[i] = hddRead(rng, true) - hddRead(rng, false)
	}
	slices.Sort(d)
	truth := d[len(d)/2]
	trials, outside, none := 200, 0, 0
	if testing.Short() {
		trials = 50
	}
	for seed := range trials {
		rng := rand.New(rand.NewPCG(uint64(seed), 77))
		inside, st := synth(rng, MaxOps, 64<<10, hddRead)
		inf := Infer(inside, st, 0)
		switch inf.Unit {
		case 64 << 10:
		case 0:
			none++ // the uneven-cost and clean-step checks refuse ~1.5%
			continue
		default:
			t.Fatalf("seed %d: inferred %d, want 65536", seed, inf.Unit)
		}
		if truth < inf.StraddleCostLow || truth > inf.StraddleCostHigh {
			outside++
		}
	}
	// At α = 1% the expected misses are 2 of 200; 6 would be p < 0.02.
	if outside > max(2, trials*3/100) {
		t.Errorf("the true shift %.0f µs was outside the interval in %d of %d runs", truth*1e6, outside, trials)
	}
	if none > max(2, trials*4/100) {
		t.Errorf("%d of %d runs answered none on a 64 KiB array", none, trials)
	}
}

// TestInferNoiseGivesNone is the false-positive property: with no stripe,
// at least 99% of seeded runs (of every noise shape) answer none.
func TestInferNoiseGivesNone(t *testing.T) {
	trials := 300
	if testing.Short() {
		trials = 60
	}
	for _, read := range []func(*rand.Rand, bool) float64{noise, hddRead, ssdRead} {
		wrong := 0
		for seed := range trials {
			rng := rand.New(rand.NewPCG(uint64(seed), 99))
			inside, st := synth(rng, MaxOps, 0, read)
			if inf := Infer(inside, st, 0); inf.Unit != 0 {
				wrong++
			}
		}
		if float64(wrong) > 0.01*float64(trials) {
			t.Errorf("%d of %d noise-only runs inferred a unit: want at most 1%%", wrong, trials)
		}
	}
}

// TestInferIgnoresImmaterialShifts: a virtual disk whose straddles of
// 512 KiB and up are consistently 0.5 µs faster (1% of 42 µs, measured
// on this machine's own disk) is significant to a rank test and no stripe.
func TestInferIgnoresImmaterialShifts(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	vdisk := func(rng *rand.Rand, split bool) float64 {
		v := 42e-6 + 2e-6*rng.NormFloat64()
		if split {
			v -= 0.5e-6
		}
		return v
	}
	inside, st := synth(rng, MaxOps, 512<<10, vdisk)
	inf := Infer(inside, st, 0)
	if inf.Unit != 0 {
		t.Fatalf("inferred %d from a 0.5 µs difference", inf.Unit)
	}
	if c := inf.Candidates[len(inf.Candidates)-1]; c.AdjustedP > DefaultAlpha || c.Material {
		t.Errorf("1 MiB: adjusted p %g, material %v: the test should see the shift and call it immaterial", c.AdjustedP, c.Material)
	}
}

// TestInferRefusesUnevenCosts: straddles that cost more the larger the
// unit (measured on a lab array with the ssd preset, whose own split
// cost is −8 µs: +30 µs at 256 KiB, +230 at 512 KiB, +660 at 1 MiB, from
// the stack under it) are not a stripe, whose every straddle splits once.
func TestInferRefusesUnevenCosts(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 11))
	graded := func(u int64) func(*rand.Rand, bool) float64 {
		return func(rng *rand.Rand, split bool) float64 {
			v := 500e-6 * math.Exp(0.5*rng.NormFloat64())
			if split {
				v += float64(u) / float64(1<<20) * 700e-6
			}
			return v
		}
	}
	ni, per := Shares(MaxOps)
	var inside []float64
	for range ni {
		inside = append(inside, graded(0)(rng, false))
	}
	var st [][]float64
	for i, u := range Candidates() {
		var s []float64
		for range per[i] {
			s = append(s, graded(u)(rng, u >= 256<<10))
		}
		st = append(st, s)
	}
	inf := Infer(inside, st, 0)
	if inf.Unit != 0 || inf.Uneven == 0 {
		t.Fatalf("inferred %d (uneven p %g): %s", inf.Unit, inf.Uneven, inf.Reason)
	}
}

func TestChiSquareSF(t *testing.T) {
	// Critical values at 5% and 1% (any χ² table).
	for _, tc := range []struct {
		x    float64
		df   int
		want float64
	}{{3.841, 1, 0.05}, {5.991, 2, 0.05}, {7.815, 3, 0.05}, {9.488, 4, 0.05}, {11.070, 5, 0.05}, {16.812, 6, 0.01}, {0, 3, 1}} {
		if got := chiSquareSF(tc.x, tc.df); math.Abs(got-tc.want) > 2e-4 {
			t.Errorf("chiSquareSF(%g, %d) = %.5f, want %.3f", tc.x, tc.df, got, tc.want)
		}
	}
}

// TestKruskalWallisCalibrated: groups from one distribution reject at
// about the nominal rate.
func TestKruskalWallisCalibrated(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 13))
	rejected := 0
	for range 400 {
		groups := make([][]float64, 4)
		for g := range groups {
			for range 200 {
				groups[g] = append(groups[g], rng.ExpFloat64())
			}
			slices.Sort(groups[g])
		}
		if kruskalWallis(groups) <= 0.05 {
			rejected++
		}
	}
	if rejected < 6 || rejected > 40 { // 20 expected
		t.Errorf("%d of 400 null trials rejected at 5%%", rejected)
	}
}

func TestInferTooFewReads(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	inside, st := synth(rng, 50, 64<<10, hddRead)
	if inf := Infer(inside, st, 0); inf.Unit != 0 || inf.Reason == "" {
		t.Fatalf("50 reads inferred %d (%q): want none with a reason", inf.Unit, inf.Reason)
	}
}

func TestHodgesLehmannMatchesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range 50 {
		x := make([]float64, 1+rng.IntN(40))
		y := make([]float64, 1+rng.IntN(40))
		for i := range x {
			x[i] = float64(rng.IntN(20)) // ties on purpose
		}
		for i := range y {
			y[i] = float64(rng.IntN(20)) + 1.5
		}
		slices.Sort(x)
		slices.Sort(y)
		var d []float64
		for _, a := range x {
			for _, b := range y {
				d = append(d, b-a)
			}
		}
		slices.Sort(d)
		for _, k := range []int{1, len(d) / 3, len(d)} {
			k = max(k, 1)
			if got := kthDiff(x, y, int64(k)); math.Abs(got-d[k-1]) > 1e-9 {
				t.Fatalf("trial %d: kthDiff(%d) = %g, want %g", trial, k, got, d[k-1])
			}
		}
		// Superiority: P(Y > X) + ½ P(Y = X), by counting.
		var gt, eq float64
		for _, a := range x {
			for _, b := range y {
				if b > a {
					gt++
				} else if b == a {
					eq++
				}
			}
		}
		_, sup := mannWhitney(x, y)
		if want := (gt + eq/2) / float64(len(d)); math.Abs(sup-want) > 1e-12 {
			t.Fatalf("trial %d: superiority %g, want %g", trial, sup, want)
		}
	}
}

// TestMannWhitneyMatchesExact checks the normal approximation against the
// exact permutation distribution of U for two samples of 8 without ties
// (all C(16, 8) = 12,870 splits enumerated).
func TestMannWhitneyMatchesExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for trial := range 20 {
		v := make([]float64, 16)
		for i := range v {
			v[i] = rng.Float64() + float64(i%2)*0.3*float64(trial%4)
		}
		x, y := slices.Clone(v[:8]), slices.Clone(v[8:])
		for i := range 8 {
			x[i], y[i] = v[2*i], v[2*i+1]
		}
		u := func(x, y []float64) float64 {
			var c float64
			for _, a := range x {
				for _, b := range y {
					if b > a {
						c++
					}
				}
			}
			return c
		}
		obs := math.Abs(u(x, y) - 32)
		var extreme, all float64
		for mask := 0; mask < 1<<16; mask++ {
			if popcount(mask) != 8 {
				continue
			}
			var a, b []float64
			for i := range 16 {
				if mask&(1<<i) != 0 {
					a = append(a, v[i])
				} else {
					b = append(b, v[i])
				}
			}
			all++
			if math.Abs(u(a, b)-32) >= obs-1e-9 {
				extreme++
			}
		}
		exact := extreme / all
		slices.Sort(x)
		slices.Sort(y)
		p, _ := mannWhitney(x, y)
		if math.Abs(p-exact) > 0.02 {
			t.Errorf("trial %d: p = %.4f, exact %.4f", trial, p, exact)
		}
	}
}

func popcount(m int) int {
	n := 0
	for ; m != 0; m &= m - 1 {
		n++
	}
	return n
}

func TestNormalQuantile(t *testing.T) {
	for q, want := range map[float64]float64{0.975: 1.959964, 0.995: 2.575829, 0.5: 0, 0.999: 3.090232} {
		if got := normalQuantile(q); math.Abs(got-want) > 1e-5 {
			t.Errorf("normalQuantile(%g) = %g, want %g", q, got, want)
		}
	}
}
