package stripescan

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// DefaultAlpha is the family-wise false-positive rate of an inference
// (Holm over the candidates): a volume with no stripe is called striped in
// at most 1 run in 100.
const DefaultAlpha = 0.01

// MinPerClass is the fewest samples a class needs to be tested.
const MinPerClass = 20

// The smallest shift that counts as a split penalty, whatever its
// p-value: MinShift, or MinRelativeShift of the inside reads' median,
// whichever is larger. A rank test on 2,000 reads of a fast, quiet device
// finds sub-microsecond differences (a VM's virtual disk: 0.4 µs of
// 42 µs, 1%, straddles of 1 MiB faster); no RAID member serves a second
// operation that cheaply, so such a difference is not a stripe.
const (
	MinShift         = 2e-6 // seconds
	MinRelativeShift = 0.02
)

// Candidate is the test of one candidate unit: its straddles against the
// inside reads.
type Candidate struct {
	Unit      int64 `json:"unit_bytes"`
	Straddles int   `json:"straddles"`
	Inside    int   `json:"inside"`
	// Shift is the Hodges–Lehmann estimate of how much longer a straddle
	// takes than an inside read (seconds; negative: shorter), with a
	// simultaneous 1−α interval over the candidates.
	Shift     float64 `json:"shift_seconds"`
	ShiftLow  float64 `json:"shift_low_seconds"`
	ShiftHigh float64 `json:"shift_high_seconds"`
	// Material: |Shift| reaches the smallest penalty that counts
	// (MinShift, MinRelativeShift of the inside median).
	Material bool `json:"material"`
	// Superiority is P(straddle > inside), the rank test's effect size
	// (0.5: no difference).
	Superiority float64 `json:"superiority"`
	P           float64 `json:"p_value"`     // Mann–Whitney U, two-sided
	AdjustedP   float64 `json:"adjusted_p"`  // Holm over every test of the scan
	Significant bool    `json:"significant"` // AdjustedP ≤ α and Material
	Tested      bool    `json:"tested"`      // both classes had MinPerClass samples
	// The step test: this candidate's straddles against those of every
	// smaller candidate (inside reads for the smallest), in the same Holm
	// family. The true unit is where the latency steps: the tests against
	// the shared inside reads all move together when that sample happens
	// to be fast or slow, the step test does not.
	StepP           float64 `json:"step_p_value"`
	StepAdjustedP   float64 `json:"step_adjusted_p"`
	StepSignificant bool    `json:"step_significant"`
}

// Inference is the answer of one scan (or several merged).
type Inference struct {
	// Unit is the inferred stripe unit in bytes; 0 for none.
	Unit int64 `json:"inferred_stripe_unit_bytes"`
	// Confidence is 1 − the largest Holm-adjusted p-value of the tests the
	// answer rests on (every candidate from Unit up differs from the inside
	// reads, and Unit's straddles from the next smaller ones); 0 for none.
	Confidence float64 `json:"confidence"`
	Alpha      float64 `json:"alpha"`
	// Uneven is the Kruskal–Wallis p-value of the straddles from the
	// would-be unit up when it refused the answer (their costs differ
	// among themselves); 0 otherwise.
	Uneven float64 `json:"uneven_p,omitempty"`
	// Reason says why the answer is none, or how it was reached.
	Reason     string      `json:"reason"`
	Candidates []Candidate `json:"candidates"`
	// StraddleCost is the extra latency of a split read (seconds): the
	// Hodges–Lehmann shift of every straddle from Unit up against the
	// inside reads, with its 1−α interval; 0 for none.
	StraddleCost     float64 `json:"straddle_cost_seconds"`
	StraddleCostLow  float64 `json:"straddle_cost_low_seconds"`
	StraddleCostHigh float64 `json:"straddle_cost_high_seconds"`
}

// Infer tests each candidate's straddle latencies (straddles[i], seconds)
// against the inside latencies at family-wise level alpha (0: DefaultAlpha)
// and returns the smallest unit whose straddles differ, in the same
// direction, for it and every larger candidate; none otherwise.
func Infer(inside []float64, straddles [][]float64, alpha float64) Inference {
	if alpha <= 0 || alpha >= 1 {
		alpha = DefaultAlpha
	}
	units := Candidates()
	inf := Inference{Alpha: alpha, Candidates: make([]Candidate, len(units))}
	x := sortedFinite(inside)
	ys := make([][]float64, len(units))
	var family []test
	for i, u := range units {
		c := &inf.Candidates[i]
		c.Unit, c.Inside, c.P, c.AdjustedP, c.StepP, c.StepAdjustedP = u, len(x), 1, 1, 1, 1
		if i < len(straddles) {
			ys[i] = sortedFinite(straddles[i])
		}
		c.Straddles = len(ys[i])
		if len(x) < MinPerClass || len(ys[i]) < MinPerClass {
			continue
		}
		c.Tested = true
		c.P, c.Superiority = mannWhitney(x, ys[i])
		family = append(family, test{&c.P, &c.AdjustedP})
		if i == 0 {
			continue // its step test is the test against the inside reads
		}
		if below := lower(ys[:i]); len(below) >= MinPerClass {
			c.StepP, _ = mannWhitney(below, ys[i])
			family = append(family, test{&c.StepP, &c.StepAdjustedP})
		}
	}
	holm(family)
	m := max(len(family), 1)
	minShift := MinShift
	if len(x) > 0 {
		minShift = max(MinShift, MinRelativeShift*x[len(x)/2])
	}
	for i := range inf.Candidates {
		c := &inf.Candidates[i]
		if i == 0 {
			c.StepP, c.StepAdjustedP = c.P, c.AdjustedP
		}
		if !c.Tested {
			continue
		}
		c.Shift, c.ShiftLow, c.ShiftHigh = hodgesLehmann(x, ys[i], alpha/float64(m))
		c.Material = math.Abs(c.Shift) >= minShift
		c.Significant = c.AdjustedP <= alpha && c.Material
		c.StepSignificant = c.StepAdjustedP <= alpha
	}
	decide(&inf, x, ys)
	return inf
}

// decide picks the smallest candidate from which every larger one is
// significant with the same sign, if the pattern is a clean, even step
// there (refusal), and the straddle cost from there up.
func decide(inf *Inference, x []float64, ys [][]float64) {
	cs := inf.Candidates
	if len(cs) == 0 || !cs[len(cs)-1].Tested {
		inf.Reason = fmt.Sprintf("too few reads: every class needs %d", MinPerClass)
		return
	}
	from := len(cs)
	sign := math.Copysign(1, cs[len(cs)-1].Superiority-0.5)
	for i := len(cs) - 1; i >= 0; i-- {
		c := cs[i]
		if !c.Significant || math.Copysign(1, c.Superiority-0.5) != sign {
			break
		}
		from = i
	}
	if from == len(cs) {
		inf.Reason = noneReason(cs, inf.Alpha)
		return
	}
	if why := refusal(inf, ys, from); why != "" {
		inf.Reason = why
		return
	}
	inf.Unit = cs[from].Unit
	var pooled []float64
	worst := cs[from].StepAdjustedP
	for i := from; i < len(cs); i++ {
		worst = max(worst, cs[i].AdjustedP)
		pooled = append(pooled, ys[i]...)
	}
	inf.Confidence = 1 - worst
	slices.Sort(pooled)
	inf.StraddleCost, inf.StraddleCostLow, inf.StraddleCostHigh = hodgesLehmann(x, pooled, inf.Alpha)
	word := "slower"
	if sign < 0 {
		word = "faster"
	}
	inf.Reason = fmt.Sprintf("straddles of %d bytes and every larger candidate are %s than inside reads (Holm-adjusted p ≤ %.2g)", inf.Unit, word, worst)
}

// noneReason says why no candidate run from the top differs.
func noneReason(cs []Candidate, alpha float64) string {
	for _, c := range cs {
		if c.AdjustedP <= alpha && !c.Material {
			return fmt.Sprintf("straddles of %d bytes differ by %.2g µs, below the smallest split penalty that counts: no stripe unit inferred", c.Unit, c.Shift*1e6)
		}
		if c.Significant {
			return fmt.Sprintf("straddles of %d bytes differ but not consistently for every larger unit: no stripe unit inferred", c.Unit)
		}
	}
	return fmt.Sprintf("no candidate from 16 KiB to 1 MiB differs at the %g level with every larger one: no stripe unit in range, or the effect is below the noise", alpha)
}

// refusal is why candidates from `from` up, all differing from the inside
// reads, are still not a stripe; "" when they are one.
func refusal(inf *Inference, ys [][]float64, from int) string {
	cs := inf.Candidates
	for j := range from {
		if cs[j].Significant {
			// Not a clean step: a smaller unit differs, a larger one does
			// not (a chance miss, or a layout that is not a stripe).
			return fmt.Sprintf("straddles of %d bytes differ from inside reads but those of %d do not: no consistent step, no stripe unit inferred", cs[j].Unit, cs[from-1].Unit)
		}
	}
	if !cs[from].StepSignificant {
		// The smallest unit that differs does not differ from the smaller
		// ones: the inside sample is off, or the step is too weak to place
		// the unit. Either way no unit is placed — never a wrong one.
		return fmt.Sprintf("straddles of %d bytes and up differ from inside reads, but not from the straddles of smaller units (step adjusted p %.2g): no stripe unit inferred", cs[from].Unit, cs[from].StepAdjustedP)
	}
	if p := kruskalWallis(ys[from:]); p <= inf.Alpha {
		// A stripe splits every straddle from its unit up the same way
		// (one more member operation), so their costs are equal; a cost
		// that grows with the unit is something else's layout (a thin
		// pool's or an image file's allocation chunks, a cache's lines).
		inf.Uneven = p
		last := cs[len(cs)-1]
		return fmt.Sprintf("straddles of %d bytes and up differ from inside reads, but unequally (%.0f µs at %d bytes, %.0f µs at %d; Kruskal–Wallis p %.2g): not a stripe's even split cost, no stripe unit inferred",
			cs[from].Unit, cs[from].Shift*1e6, cs[from].Unit, last.Shift*1e6, last.Unit, p)
	}
	return ""
}

// kruskalWallis is the p-value of the Kruskal–Wallis H test that the
// groups (each sorted) come from one distribution (ties corrected, χ²
// approximation); 1 for fewer than two non-empty groups.
func kruskalWallis(groups [][]float64) float64 {
	type obs struct {
		v float64
		g int
	}
	var all []obs
	for g, ys := range groups {
		for _, v := range ys {
			all = append(all, obs{v, g})
		}
	}
	k := 0
	for _, ys := range groups {
		if len(ys) > 0 {
			k++
		}
	}
	n := float64(len(all))
	if k < 2 || n < 3 {
		return 1
	}
	slices.SortFunc(all, func(a, b obs) int { return cmp.Compare(a.v, b.v) })
	rankSum := make([]float64, len(groups))
	var ties float64
	for i := 0; i < len(all); {
		j := i
		for j < len(all) && all[j].v == all[i].v {
			j++
		}
		mid := float64(i+j+1) / 2 // ranks i+1 … j
		for _, o := range all[i:j] {
			rankSum[o.g] += mid
		}
		t := float64(j - i)
		ties += t*t*t - t
		i = j
	}
	var h float64
	for g, ys := range groups {
		if len(ys) > 0 {
			h += rankSum[g] * rankSum[g] / float64(len(ys))
		}
	}
	h = 12/(n*(n+1))*h - 3*(n+1)
	if c := 1 - ties/(n*n*n-n); c > 0 {
		h /= c
	}
	return chiSquareSF(max(h, 0), k-1)
}

// chiSquareSF is P(X > x) for X χ² with df degrees of freedom, by the
// closed forms for integer df.
func chiSquareSF(x float64, df int) float64 {
	if df%2 == 0 {
		term, sum := 1.0, 1.0
		for i := 1; i < df/2; i++ {
			term *= x / 2 / float64(i)
			sum += term
		}
		return math.Exp(-x/2) * sum
	}
	chi := math.Sqrt(x)
	p := math.Erfc(chi / math.Sqrt2)
	term, sum := chi, 0.0
	for r := 1; r <= (df-1)/2; r++ {
		if r > 1 {
			term *= x / float64(2*r-1)
		}
		sum += term
	}
	return min(1, p+math.Sqrt(2/math.Pi)*math.Exp(-x/2)*sum)
}

// lower pools the straddles of the smaller candidates, sorted.
func lower(ys [][]float64) []float64 {
	var out []float64
	for _, y := range ys {
		out = append(out, y...)
	}
	slices.Sort(out)
	return out
}

func sortedFinite(v []float64) []float64 {
	out := make([]float64, 0, len(v))
	for _, f := range v {
		if !math.IsNaN(f) && !math.IsInf(f, 0) {
			out = append(out, f)
		}
	}
	slices.Sort(out)
	return out
}

// mannWhitney is the two-sided p-value of the Mann–Whitney U test of
// sorted samples x and y (normal approximation with tie correction and
// continuity correction) and P(Y > X) + ½P(Y = X).
func mannWhitney(x, y []float64) (p, superiority float64) {
	n1, n2 := float64(len(x)), float64(len(y))
	// Rank sum of y over the merged order, midranks for ties.
	var ry, ties float64
	i, j, rank := 0, 0, 0.0
	for i < len(x) || j < len(y) {
		v := math.Inf(1)
		if i < len(x) {
			v = x[i]
		}
		if j < len(y) && y[j] < v {
			v = y[j]
		}
		a, b := 0, 0
		for i < len(x) && x[i] == v {
			i++
			a++
		}
		for j < len(y) && y[j] == v {
			j++
			b++
		}
		t := float64(a + b)
		mid := rank + (t+1)/2
		ry += float64(b) * mid
		ties += t*t*t - t
		rank += t
	}
	u := ry - n2*(n2+1)/2 // pairs with y > x, ties counting ½
	superiority = u / (n1 * n2)
	n := n1 + n2
	sd := math.Sqrt(n1 * n2 / 12 * ((n + 1) - ties/(n*(n-1))))
	if sd == 0 {
		return 1, superiority
	}
	z := (math.Abs(u-n1*n2/2) - 0.5) / sd
	if z < 0 {
		z = 0
	}
	return math.Erfc(z / math.Sqrt2), superiority
}

// test is one p-value of a Holm family and where its adjusted value goes.
type test struct{ p, adjusted *float64 }

// holm sets the adjusted p-values of a family (Holm–Bonferroni).
func holm(family []test) {
	order := slices.Clone(family)
	slices.SortFunc(order, func(a, b test) int { return cmp.Compare(*a.p, *b.p) })
	m := len(order)
	run := 0.0
	for k, t := range order {
		run = max(run, min(1, float64(m-k)**t.p))
		*t.adjusted = run
	}
}

// hodgesLehmann is the median of the differences y−x over all pairs of
// sorted x and y, and its distribution-free 1−level interval (the order
// statistics of the differences that the Mann–Whitney test puts at its
// critical value), without forming the n1·n2 differences.
func hodgesLehmann(x, y []float64, level float64) (est, lo, hi float64) {
	n := int64(len(x)) * int64(len(y))
	if n == 0 {
		return 0, 0, 0
	}
	est = (kthDiff(x, y, (n+1)/2) + kthDiff(x, y, n/2+1)) / 2
	n1, n2 := float64(len(x)), float64(len(y))
	z := normalQuantile(1 - level/2)
	k := int64(math.Floor(n1*n2/2 - z*math.Sqrt(n1*n2*(n1+n2+1)/12)))
	k = max(k, 1)
	return est, kthDiff(x, y, k), kthDiff(x, y, n-k+1)
}

// kthDiff is the k-th smallest (1-based) difference y[j]−x[i] of sorted x
// and y, by bisection on the value with an O(n1+n2) count per step.
func kthDiff(x, y []float64, k int64) float64 {
	lo, hi := y[0]-x[len(x)-1], y[len(y)-1]-x[0]
	for range 200 {
		if hi-lo <= 1e-12*max(1, math.Abs(lo), math.Abs(hi)) {
			break
		}
		mid := lo + (hi-lo)/2
		if countLE(x, y, mid) >= k {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// countLE counts the pairs with y[j]−x[i] ≤ d.
func countLE(x, y []float64, d float64) int64 {
	var c int64
	i := 0 // x[i:] are the x ≥ v−d for the current v; i only grows as v does
	for _, v := range y {
		for i < len(x) && x[i] < v-d {
			i++
		}
		c += int64(len(x) - i)
	}
	return c
}

// normalQuantile is the standard normal quantile of q in (0, 1), by
// bisection on the complementary error function.
func normalQuantile(q float64) float64 {
	lo, hi := -40.0, 40.0
	for range 200 {
		mid := (lo + hi) / 2
		if 0.5*math.Erfc(-mid/math.Sqrt2) < q {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2
}
