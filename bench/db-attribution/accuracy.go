//go:build linux

package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/plumbline/plumbline/internal/lab/dblab"
	"github.com/plumbline/plumbline/internal/vocab"
)

// comparison is one reported operation of one interval against the
// database's own views over the same interval.
type comparison struct {
	db, scenario string
	r            reported
	truth        float64 // the views' latency from the samples nearest the interval's ends, seconds
	relErr       float64 // the reported latency's relative difference from truth
	misalign     time.Duration
	// lo and hi are the latencies the views allow over the interval: its
	// count and time each lie between the views' deltas over the samples
	// just inside and just outside it (dblab.History.Bracket); rangeErr is
	// the reported figures' relative distance outside that range (0
	// within it), the one the result line gives.
	lo, hi   float64
	rangeErr float64
}

// guard is how far a sample must be from an end of the agent's interval
// to count as inside or outside it: the agent times its interval by its
// clock around its statements, which read the views within milliseconds.
const guard = 50 * time.Millisecond

// rangeError is how far the reported count and latency of r lie outside
// what the views allow, inner and outer being r's operation's deltas over
// the samples just inside and just outside its interval: the count
// within [inner, outer], the latency within [inner time / outer count,
// outer time / inner count]. Relative to the nearer bound; 0 inside.
func rangeError(r reported, inner, outer dblab.Delta) (lo, hi, e float64) {
	lo, hi = 0, math.Inf(1)
	if outer.Count > 0 {
		lo = inner.Nanos / float64(outer.Count) / 1e9
	}
	if inner.Count > 0 {
		hi = outer.Nanos / float64(inner.Count) / 1e9
	}
	switch l := r.latency(); {
	case l < lo:
		e = (lo - l) / lo
	case l > hi:
		e = (l - hi) / hi
	}
	switch c := float64(r.count); {
	case c < float64(inner.Count):
		e = max(e, (float64(inner.Count)-c)/float64(inner.Count))
	case c > float64(outer.Count):
		e = max(e, (c-float64(outer.Count))/float64(outer.Count))
	}
	return lo, hi, e
}

// deltaOf is the delta of (loc, op) among ds, zero when absent.
func deltaOf(ds []dblab.Delta, loc vocab.DatabaseLocation, op vocab.DatabaseOp) dblab.Delta {
	if i := slices.IndexFunc(ds, func(x dblab.Delta) bool { return x.Location == loc && x.Op == op }); i >= 0 {
		return ds[i]
	}
	return dblab.Delta{}
}

// compare matches every interval the server stored for d since since
// with the views over the same interval. Only timed operations with at
// least minOps in the interval count (fewer: one operation more or less
// at either end moves the mean by more than the target), and only where
// the views were sampled within maxMisalign of both ends.
func compare(ctx context.Context, obs *observer, d *database, since time.Time, trials []trial, minOps uint64, maxMisalign time.Duration) ([]comparison, error) {
	reps, err := obs.intervals(ctx, d.name, since)
	if err != nil {
		return nil, err
	}
	var out []comparison
	for _, r := range reps {
		if !r.measured || r.count < minOps {
			continue
		}
		deltas, off, err := d.over(r.started, r.started.Add(r.interval))
		if err != nil || off > maxMisalign {
			continue
		}
		i := slices.IndexFunc(deltas, func(x dblab.Delta) bool { return x.Location == r.location && x.Op == r.op })
		if i < 0 || deltas[i].Count == 0 || deltas[i].Latency() == 0 {
			continue
		}
		inner, outer, ok, err := d.bracket(r.started, r.started.Add(r.interval), guard)
		if err != nil || !ok {
			continue
		}
		truth := deltas[i].Latency()
		c := comparison{db: d.name, scenario: scenarioAt(trials, d.name, r.started, r.started.Add(r.interval)),
			r: r, truth: truth, relErr: math.Abs(r.latency()-truth) / truth, misalign: off}
		c.lo, c.hi, c.rangeErr = rangeError(r, deltaOf(inner, r.location, r.op), deltaOf(outer, r.location, r.op))
		out = append(out, c)
	}
	return out, nil
}

// scenarioAt names the trial of db an interval falls in ("quiet" between
// trials).
func scenarioAt(trials []trial, db string, from, to time.Time) string {
	for _, t := range trials {
		if t.db == db && from.Before(t.end) && to.After(t.start) {
			return t.scenario
		}
	}
	return "quiet"
}

// worst is the largest distance outside the views' range (rangeErr) and
// the largest difference from the nearest samples (relErr) of the
// comparisons of a scenario ("" for all), and how many there were.
func worst(cs []comparison, scenario string) (rangeErr, relErr float64, n int) {
	for _, c := range cs {
		if scenario == "" || c.scenario == scenario {
			rangeErr, relErr, n = max(rangeErr, c.rangeErr), max(relErr, c.relErr), n+1
		}
	}
	return rangeErr, relErr, n
}

func (c comparison) String() string {
	return fmt.Sprintf("%s %s %s/%s %s+%s: reported %d ops %.3f ms, views %.3f ms (%.3f–%.3f ms over the interval), outside %.1f%%, error %.1f%% (misaligned %s)",
		c.db, c.scenario, c.r.location, c.r.op, c.r.started.UTC().Format(time.TimeOnly), c.r.interval.Round(time.Millisecond),
		c.r.count, c.r.latency()*1e3, c.truth*1e3, c.lo*1e3, c.hi*1e3, c.rangeErr*100, c.relErr*100, c.misalign.Round(time.Millisecond))
}
