package baseline

import (
	"math"
	"slices"
)

// madToSigma turns a median absolute deviation into a standard-deviation
// equivalent for normally distributed data (1/Φ⁻¹(3/4)).
const madToSigma = 1.4826

// p95ToSigma is how many standard deviations the 95th percentile lies above
// the median of a normal distribution (Φ⁻¹(0.95)).
const p95ToSigma = 1.6449

// Stats is a robust summary of a set of latencies (seconds): how many, their
// median, their median absolute deviation from it (unscaled) and their
// 95th percentile.
type Stats struct {
	N      int
	Median float64
	MAD    float64
	P95    float64
}

// Sigma is the spread a latency is judged against: the MAD scaled to a
// standard deviation (1.4826 × MAD), widened to the upper tail's
// (P95 − Median)/1.6449 when that is larger. For normal noise the two
// agree. For bimodal latency — synced writes that land either in a cache
// (~1 ms) or on the platter (~8 ms) — the MAD collapses to the width of the
// larger mode and would make every visit to the other mode look like a
// shift; the upper tail keeps it in view, as long as the slow mode holds
// at least one run in twenty.
func (s Stats) Sigma() float64 {
	return math.Max(madToSigma*s.MAD, (s.P95-s.Median)/p95ToSigma)
}

// Summarize computes the median and MAD of xs, skipping values that are not
// positive and finite. xs is not modified.
func Summarize(xs []float64) Stats {
	buf := make([]float64, 0, len(xs))
	for _, x := range xs {
		if valid(x) {
			buf = append(buf, x)
		}
	}
	return summarizeInPlace(buf)
}

// CohortOf summarises a cohort: the recent medians (History().Median) of
// every volume of one profile whose history is trusted. The cohort's
// median is what a volume of that profile should show and its MAD how
// much healthy volumes differ; a volume judged against its own cohort
// may be a member of it — with at least Config.MinCohort members its own
// value barely moves the median.
func CohortOf(medians []float64) Stats { return Summarize(medians) }

// summarizeInPlace sorts buf and summarises it.
func summarizeInPlace(buf []float64) Stats {
	slices.Sort(buf)
	return summarizeSorted(buf)
}

// summarizeSorted summarises sorted values without modifying them. The MAD
// is the median of |x − median|: the deviations of the values below the
// median grow leftwards and those of the rest grow rightwards, so merging
// the two runs finds it in one pass, with no second sort.
func summarizeSorted(s []float64) Stats {
	n := len(s)
	if n == 0 {
		return Stats{}
	}
	med := sortedMedian(s)
	m, _ := slices.BinarySearch(s, med) // s[:m] < med <= s[m:]
	l, r := m-1, m
	next := func() float64 {
		if r >= n || l >= 0 && med-s[l] <= s[r]-med {
			l--
			return med - s[l+1]
		}
		r++
		return s[r-1] - med
	}
	var dev, prev float64
	for range n/2 + 1 {
		prev, dev = dev, next()
	}
	mad := dev
	if n%2 == 0 {
		mad = (prev + dev) / 2
	}
	return Stats{N: n, Median: med, MAD: mad, P95: sortedQuantile(s, 0.95)}
}

// medianWith is the median of sorted s with x added.
func medianWith(s []float64, x float64) float64 {
	pos, _ := slices.BinarySearch(s, x)
	at := func(q int) float64 {
		switch {
		case q < pos:
			return s[q]
		case q == pos:
			return x
		}
		return s[q-1]
	}
	n := len(s) + 1
	if n%2 == 1 {
		return at(n / 2)
	}
	return (at(n/2-1) + at(n/2)) / 2
}

func sortedMedian(s []float64) float64 {
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func valid(x float64) bool { return x > 0 && !math.IsInf(x, 1) }

// sortedQuantile interpolates linearly between order statistics.
func sortedQuantile(s []float64, q float64) float64 {
	h := q * float64(len(s)-1)
	i := int(h)
	if i+1 >= len(s) {
		return s[len(s)-1]
	}
	return s[i] + (h-float64(i))*(s[i+1]-s[i])
}
