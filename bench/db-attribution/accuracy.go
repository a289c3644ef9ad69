//go:build linux

package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/plumbline/plumbline/internal/lab/dblab"
)

// comparison is one reported operation of one interval against the
// database's own views over the same interval.
type comparison struct {
	db, scenario string
	r            reported
	truth        float64 // the views' latency, seconds
	relErr       float64
	misalign     time.Duration
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
		truth := deltas[i].Latency()
		out = append(out, comparison{db: d.name, scenario: scenarioAt(trials, d.name, r.started, r.started.Add(r.interval)),
			r: r, truth: truth, relErr: math.Abs(r.latency()-truth) / truth, misalign: off})
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

// worst is the largest relative error of the comparisons of a scenario
// ("" for all), and how many there were.
func worst(cs []comparison, scenario string) (float64, int) {
	e, n := 0.0, 0
	for _, c := range cs {
		if scenario == "" || c.scenario == scenario {
			e, n = max(e, c.relErr), n+1
		}
	}
	return e, n
}

func (c comparison) String() string {
	return fmt.Sprintf("%s %s %s/%s %s+%s: reported %d ops %.3f ms, views %.3f ms, error %.1f%% (misaligned %s)",
		c.db, c.scenario, c.r.location, c.r.op, c.r.started.UTC().Format(time.TimeOnly), c.r.interval.Round(time.Millisecond),
		c.r.count, c.r.latency()*1e3, c.truth*1e3, c.relErr*100, c.misalign.Round(time.Millisecond))
}
