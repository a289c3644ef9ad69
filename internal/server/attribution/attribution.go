// Package attribution says whose fault a database's latency regression on
// a volume is, from the probe's judgement of the same volume: device (the
// probe slowed too), load or database (the probe stayed on its baseline)
// or throttle (the probe's achieved rate fell short of its cap, its
// latency steady). It is pure: the evaluator hands it the states it holds
// and stores the answer with the volume's database state.
package attribution

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/plumbline/plumbline/internal/server/baseline"
	"github.com/plumbline/plumbline/internal/vocab"
)

// Config are the attribution's constants. Zero fields take their defaults.
type Config struct {
	// Pending is the probe's last-run latency (median or mean) over its history from which
	// the probe counts as slowed with the database before its own state
	// has turned degraded (default 1.5, the detector's DegradeRatio): the
	// database's minute intervals see a slow device before the probe's
	// few-minute runs have sustained it.
	Pending float64
	// Fresh is how old the probe's last run may be, at the end of the
	// database's last interval, to say anything (default 30m: several runs
	// of the agent's default schedule).
	Fresh time.Duration
	// Lead is how long before the regression's start (the end of its first
	// interval beyond the history) the probe's last run may have started
	// and still speak for it (default none: the change began somewhere in
	// that first interval, so only a run started after its end surely saw
	// it). A run from before the change says nothing of it, and
	// attributing from it would call every device fault "load" until the
	// probe's next run.
	Lead time.Duration
}

func (c Config) withDefaults() Config {
	if c.Pending <= 0 {
		c.Pending = 1.5
	}
	if c.Fresh <= 0 {
		c.Fresh = 30 * time.Minute
	}
	return c
}

// Probe is the probe's judgement of one kind on the volume.
type Probe struct {
	Kind  string
	State baseline.State
	// LastRun is when the kind's last run started; Trusted whether its
	// history is a reference yet; HistoryRatio its last run's median over
	// that history (0: not trusted), MeanRatio its mean over the mean's
	// history (a slow member of an array moves the mean before the
	// median) and RateRatio its rate shortfall (cap/achieved over its
	// history; 0: not carried).
	LastRun      time.Time
	Trusted      bool
	HistoryRatio float64
	MeanRatio    float64
	RateRatio    float64
}

// Op is one database operation's judgement on the volume.
type Op struct {
	Source, Op string
	Status     baseline.Status
	// Latency and HistoryMedian in seconds; Ratio their quotient as the
	// detector judged it; Since when the status began.
	Latency, HistoryMedian, Ratio float64
	Since                         time.Time
}

// Result is the attribution of a volume's database regression; zero when
// no operation is degraded.
type Result struct {
	Attribution vocab.Attribution
	// Reason says it with the numbers: the database's operations, the
	// probe's view.
	Reason string
}

// Attribute attributes the regression of the degraded ops among ops, with
// probes the probe's kinds on the same volume, at the end of the
// database's last interval (at).
func Attribute(at time.Time, ops []Op, probes []Probe, cfg Config) Result {
	cfg = cfg.withDefaults()
	var slow []string
	var began time.Time
	for _, o := range ops {
		if o.Status == baseline.Degraded {
			if began.IsZero() || o.Since.Before(began) {
				began = o.Since
			}
			slow = append(slow, fmt.Sprintf("%s %s %s vs %s (×%.2g) since %s", o.Source, o.Op, ms(o.Latency), ms(o.HistoryMedian),
				o.Ratio, o.Since.UTC().Format(time.RFC3339)))
		}
	}
	if len(slow) == 0 {
		return Result{}
	}
	attr, probe := judgeProbes(at, began.Add(-cfg.Lead), probes, cfg)
	return Result{Attribution: attr, Reason: fmt.Sprintf("%s: database %s; probe %s", attr, strings.Join(slow, ", "), probe)}
}

// judgeProbes says what the probe's kinds make of the volume: throttled,
// slowed, on its baseline, or nothing to go by. Only runs started at or
// after from speak.
func judgeProbes(at, from time.Time, probes []Probe, cfg Config) (vocab.Attribution, string) {
	probes = slices.Clone(probes)
	slices.SortFunc(probes, func(a, b Probe) int { return strings.Compare(a.Kind, b.Kind) })
	var throttled, slowed, steady []string
	before := false
	for _, p := range probes {
		if p.LastRun.IsZero() || at.Sub(p.LastRun) > cfg.Fresh || !p.Trusted && p.State.Status != baseline.Degraded {
			continue
		}
		if p.LastRun.Before(from) {
			before = true
			continue
		}
		s := p.State
		switch {
		case s.Throttled():
			throttled = append(throttled, fmt.Sprintf("%s %s", p.Kind, s.Detail()))
		case s.Status == baseline.Degraded:
			slowed = append(slowed, fmt.Sprintf("%s degraded, %s", p.Kind, s.Detail()))
		case p.RateRatio >= cfg.Pending && p.HistoryRatio < cfg.Pending:
			throttled = append(throttled, fmt.Sprintf("%s rate short of its cap ×%.2g vs history, median ×%.2g", p.Kind, p.RateRatio, p.HistoryRatio))
		case p.HistoryRatio >= cfg.Pending || p.MeanRatio >= cfg.Pending:
			slowed = append(slowed, fmt.Sprintf("%s last run median ×%.2g, mean ×%.2g vs history", p.Kind, p.HistoryRatio, p.MeanRatio))
		default:
			steady = append(steady, fmt.Sprintf("%s median ×%.2g vs history", p.Kind, p.HistoryRatio))
		}
	}
	switch {
	case len(throttled) > 0:
		return vocab.AttributionThrottle, strings.Join(throttled, ", ")
	case len(slowed) > 0:
		return vocab.AttributionDevice, strings.Join(slowed, ", ")
	case len(steady) > 0:
		return vocab.AttributionLoad, "on its baseline: " + strings.Join(steady, ", ")
	}
	if before {
		return vocab.AttributionUndetermined, fmt.Sprintf("has not run since the regression began (%s): waiting for its next run", from.Add(cfg.Lead).UTC().Format(time.RFC3339))
	}
	return vocab.AttributionUndetermined, fmt.Sprintf("has no trusted run within %s to compare with", cfg.Fresh)
}

// ms writes seconds as milliseconds, three figures.
func ms(seconds float64) string { return fmt.Sprintf("%.3g ms", seconds*1e3) }
