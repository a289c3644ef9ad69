// Package attribution says whose fault a database's latency regression on
// a volume is, from three witnesses: the work on the volume as the device
// counted it (the probe's busy-guard windows before its runs, device.go),
// the database's own demand (the operations its sessions wait for, at
// their rates against their history, demand.go), and the probe's
// judgement of the same volume.
//
//   - throttle: the volume delivered at most Ceiling (half) of its usual
//     work while the latency rose — a throughput ceiling (a token bucket,
//     a provisioned-IOPS cap, or a device at capacity). A bucket the
//     workload saturates slows the probe too (each of its operations waits
//     for a token), so a slowed probe does not outrank the ceiling.
//   - load or database: more work was asked of the volume (the device
//     DeviceRise ×, or the database's demand Rise × its usual), the
//     database's or another workload's; or the work is level and the
//     probe stayed on its baseline (the database's own doing: locks,
//     plans, checkpoints).
//   - device: the work is level and the probe slowed too (its median or
//     mean ×Pending); or the busy guard skipped every probe run since the
//     regression began while the work is level — the device is saturated
//     by the usual work: each operation takes longer.
//
// A probe kind whose only finding is a rate short of its cap (median
// steady) does not say throttle when the work is known and level: a
// throttle the database runs into cuts the work delivered, and a RAID 1
// mirror with a slow member keeps its random-read median (reads go to the
// healthy leg) while its rate falls; it waits for another kind. A kind
// that slowed outranks one that only fell short of its rate. Without the
// device's windows or a rate history the probe alone speaks, as before.
//
// It is pure: the evaluator hands it the states it holds and stores the
// answer with the volume's database state.
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
	// Rise and Ceiling bound the database's demand on the volume (its
	// operations' rates weighted by their usual latency, over the same at
	// their history's rates; demand.go): at or above Rise (default 1.3)
	// it asked more of the volume (load); at or below Ceiling (default
	// 0.5) the volume delivered less than it asked while its latency rose
	// (a throughput ceiling: throttle).
	Rise, Ceiling float64
	// DeviceRise is the device's rate in the busy guard's windows since
	// the regression began (their median) over its usual from which more
	// work was asked of it than usual, the database's or another
	// workload's (default 1.5: one-second windows swing more than the
	// database's intervals). The device's ceiling is Ceiling.
	DeviceRise float64
}

func (c Config) withDefaults() Config {
	if c.Pending <= 0 {
		c.Pending = 1.5
	}
	if c.Fresh <= 0 {
		c.Fresh = 30 * time.Minute
	}
	if c.Rise <= 0 {
		c.Rise = 1.3
	}
	if c.Ceiling <= 0 {
		c.Ceiling = 0.5
	}
	if c.DeviceRise <= 0 {
		c.DeviceRise = 1.5
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
	// LastBusy is when the busy guard last skipped a run of the kind (the
	// device was busier than the guard's threshold); zero: never seen.
	LastBusy time.Time
}

// Op is one database operation's judgement on the volume.
type Op struct {
	Source, Op string
	Status     baseline.Status
	// Latency and HistoryMedian in seconds; Ratio their quotient as the
	// detector judged it; Since when the status began.
	Latency, HistoryMedian, Ratio float64
	Since                         time.Time
	// Rate is the last interval's operations per second, HistoryRate the
	// median rate of its history (0: no trusted rate history).
	Rate, HistoryRate float64
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
// probes the probe's kinds on the same volume and dev what its busy guard
// saw of the device before its latest runs, at the end of the database's
// last interval (at).
func Attribute(at time.Time, ops []Op, probes []Probe, dev Device, cfg Config) Result {
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
	d := demandOf(ops)
	v := judgeProbes(at, began.Add(-cfg.Lead), probes, cfg)
	dv := dev.since(began.Add(-cfg.Lead))
	attr, why := decide(d, v, dv, began, cfg)
	reason := fmt.Sprintf("%s: database %s", attr, strings.Join(slow, ", "))
	if d.known {
		reason += "; demand " + d.String()
	}
	if dv.known() {
		reason += "; device " + dv.String()
	}
	return Result{Attribution: attr, Reason: reason + "; probe " + why}
}

// decide weighs the witnesses of work asked and delivered (pressureOf)
// and the probe's view; it returns the attribution and what the probe
// said (with the reason for waiting when undetermined).
func decide(d demand, v view, dev deviceView, began time.Time, cfg Config) (vocab.Attribution, string) {
	busy := "skipped by the busy guard since the regression began (" + strings.Join(v.busy, ", ") + ")"
	switch p := pressureOf(d, dev, cfg); {
	case p == ceiling:
		return vocab.AttributionThrottle, v.String() + " (the volume delivered under its usual rate: a throughput ceiling)"
	case p == rise:
		return vocab.AttributionLoad, v.String() + " (more work asked of the volume than usual)"
	case len(v.slowed) > 0:
		return vocab.AttributionDevice, strings.Join(v.slowed, ", ")
	case len(v.short) > 0 && !d.known && !dev.known():
		return vocab.AttributionThrottle, strings.Join(v.short, ", ")
	case len(v.short) > 0:
		return vocab.AttributionUndetermined, strings.Join(v.short, ", ") +
			": a rate shortfall alone while the work on the volume is level; waiting for another kind"
	case len(v.steady) > 0:
		return vocab.AttributionLoad, "on its baseline: " + strings.Join(v.steady, ", ")
	case len(v.busy) > 0 && (dev.known() || d.known):
		return vocab.AttributionDevice, busy + ": the device is saturated by the usual work, each operation longer"
	case len(v.busy) > 0:
		return vocab.AttributionUndetermined, busy + ", and neither the device's nor the database's rate has a history yet"
	case v.before:
		return vocab.AttributionUndetermined, fmt.Sprintf("has not run since the regression began (%s): waiting for its next run",
			began.UTC().Format(time.RFC3339))
	}
	return vocab.AttributionUndetermined, fmt.Sprintf("has no trusted run within %s to compare with", cfg.Fresh)
}

// view is what the probe's kinds say of the volume since the regression
// began: slowed, short of their rate only, on their baseline, skipped by
// the busy guard; before: a kind's last run is older than that.
type view struct {
	slowed, short, steady, busy []string
	before                      bool
}

func (v view) String() string {
	var parts []string
	for _, p := range [][]string{v.slowed, v.short, v.steady, v.busy} {
		parts = append(parts, p...)
	}
	if len(parts) == 0 {
		return "has not run since the regression began"
	}
	return strings.Join(parts, ", ")
}

// judgeProbes sorts the probe's kinds into a view. Only runs (and busy
// skips) at or after from speak.
func judgeProbes(at, from time.Time, probes []Probe, cfg Config) view {
	probes = slices.Clone(probes)
	slices.SortFunc(probes, func(a, b Probe) int { return strings.Compare(a.Kind, b.Kind) })
	var v view
	for _, p := range probes {
		if !p.LastBusy.Before(from) && !p.LastBusy.After(at) && p.LastBusy.After(p.LastRun) {
			v.busy = append(v.busy, p.Kind+" skipped busy at "+p.LastBusy.UTC().Format(time.TimeOnly))
			continue
		}
		if p.LastRun.IsZero() || at.Sub(p.LastRun) > cfg.Fresh || !p.Trusted && p.State.Status != baseline.Degraded {
			continue
		}
		if p.LastRun.Before(from) {
			v.before = true
			continue
		}
		s := p.State
		switch {
		case s.Throttled():
			v.short = append(v.short, fmt.Sprintf("%s %s", p.Kind, s.Detail()))
		case s.Status == baseline.Degraded:
			v.slowed = append(v.slowed, fmt.Sprintf("%s degraded, %s", p.Kind, s.Detail()))
		case p.HistoryRatio >= cfg.Pending || p.MeanRatio >= cfg.Pending:
			v.slowed = append(v.slowed, fmt.Sprintf("%s last run median ×%.2g, mean ×%.2g vs history", p.Kind, p.HistoryRatio, p.MeanRatio))
		case p.RateRatio >= cfg.Pending:
			v.short = append(v.short, fmt.Sprintf("%s rate short of its cap ×%.2g vs history, median ×%.2g", p.Kind, p.RateRatio, p.HistoryRatio))
		default:
			v.steady = append(v.steady, fmt.Sprintf("%s median ×%.2g vs history", p.Kind, p.HistoryRatio))
		}
	}
	return v
}

// ms writes seconds as milliseconds, three figures.
func ms(seconds float64) string { return fmt.Sprintf("%.3g ms", seconds*1e3) }
