package baseline

import (
	"math"
	"slices"
)

// madToSigma turns a median absolute deviation into a standard-deviation
// equivalent for normally distributed data (1/Φ⁻¹(3/4)).
const madToSigma = 1.4826

// Stats is a robust summary of a set of latencies (seconds): how many, their
// median, and their median absolute deviation from it (unscaled).
type Stats struct {
	N      int
	Median float64
	MAD    float64
}

// Sigma is the MAD scaled to a standard deviation (1.4826 × MAD).
func (s Stats) Sigma() float64 { return madToSigma * s.MAD }

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

// summarizeInPlace sorts buf and overwrites it with absolute deviations.
func summarizeInPlace(buf []float64) Stats {
	n := len(buf)
	if n == 0 {
		return Stats{}
	}
	slices.Sort(buf)
	med := sortedMedian(buf)
	for i, x := range buf {
		buf[i] = math.Abs(x - med)
	}
	slices.Sort(buf)
	return Stats{N: n, Median: med, MAD: sortedMedian(buf)}
}

func sortedMedian(s []float64) float64 {
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func valid(x float64) bool { return x > 0 && !math.IsInf(x, 1) }
