package baseline

import (
	"cmp"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"time"
)

// Signal is a shape of a probe run judged on its own history. Every signal
// is a value where higher is worse.
type Signal string

// Signals.
const (
	// SignalMedian is the run's median latency: steady slowness. It is the
	// only signal also judged against the cohort and the prior.
	SignalMedian Signal = "median"
	// SignalTail is the run's 99th-percentile latency: stalls and tails.
	// At the default 50 ops per run its rank (49.5) falls on the slowest
	// operation, so one stalled operation in fifty moves it; a p95 (rank
	// 47.5) needs three (6% of the run) and misses a member that stalls 3%
	// of its operations. Its noise (a healthy run's slowest op) is what its
	// own history's spread and the higher ratio threshold absorb.
	SignalTail Signal = "p99"
	// SignalMean is the run's mean latency (what SQLIO, diskspd and the
	// seeds report): many moderately slow operations.
	SignalMean Signal = "mean"
	// SignalRate is the run's IOPS cap over the rate it achieved (1 when
	// it kept up with its cap, 2.5 at 20 of 50 IOPS): a volume that cannot
	// reach its cap on an idle device is throttled.
	SignalRate Signal = "rate"
	// SignalSlow is the count of slow operations (at least SlowFactor ×
	// their run's median) pooled over the last runs, against the
	// distribution of that pooled count in the volume's own history
	// (SlowConfig): a member that stalls a few percent of its ops, too few
	// per run for the p99 to stay up run after run.
	SignalSlow Signal = "slow"
)

// allSignals is the order of the signals: the median, the tracks (in the
// order of the serialised tracks), the slow-op count.
var allSignals = [numSignals]Signal{SignalMedian, SignalTail, SignalMean, SignalRate, SignalSlow}

const (
	numSignals = 5
	// numTracks is the signals judged by a track: tail, mean, rate.
	numTracks = 3
)

// Signals returns every signal, the median first.
func Signals() []Signal { return slices.Clone(allSignals[:]) }

func signalIndex(s Signal) int {
	for i, x := range allSignals {
		if x == s {
			return i
		}
	}
	return -1
}

// Run is what one probe run shows. Median is required; a zero P99, Mean or
// Cap leaves that signal out of this run (too few ops for a p99, an
// uncapped run has no rate to fall short of).
type Run struct {
	Median, P99, Mean float64 // seconds
	// Ops is how many operations completed: the tail is judged only on
	// runs with at least SignalConfig.MinOps of them.
	Ops int
	// IOPS is the rate the run achieved (ops over its measured duration)
	// and Cap the IOPS cap it ran under (0: uncapped).
	IOPS, Cap float64
	// Slow is how many of its ops took at least SlowFactor × its median
	// (SlowOps); counted on runs of at least SlowConfig.MinOps ops.
	Slow int
}

// SignalConfig is the detection constants of one signal other than the
// median (the median's are Config's own). Zero fields take the signal's
// default (DefaultConfig); the z thresholds, MinHistory, Window and
// MinRelativeSpread are Config's.
type SignalConfig struct {
	// DegradeRatio and RecoverRatio are as in Config.
	DegradeRatio, RecoverRatio float64
	// Sustain beyond runs among the last Within turn the signal degraded
	// (Within = Sustain, the default: in a row); Recover normal runs in a
	// row back. A tail moved by intermittent stalls is beyond in most runs,
	// not all: "3 of the last 5" catches it where "3 in a row" waits for a
	// lucky streak — at the price of more false alerts on noisy tails.
	Sustain, Within, Recover int
	// MinOps is the fewest completed operations a run needs for the
	// signal to be judged.
	MinOps int
	// Corroborated, when set, degrades the signal after that many beyond
	// runs in a row each of which was corroborated. The mean is
	// corroborated by a run whose median is also at least
	// CorroborateRatio × its history: every op moved a little, not a few
	// ops a lot — a slow member of a mirror, which moves the median of its
	// reads ×1.5–1.8 and their mean ×2, and not the bursts of a loaded
	// host, whose few huge ops move the mean alone. The rate is
	// corroborated by a run whose lost time is spread over many ops
	// ((mean − median)/(p99 − median) ≥ 0.1: a token bucket's waits), not
	// carried by a few stalls. The tail has no corroboration.
	Corroborated     int
	CorroborateRatio float64
}

func (c *SignalConfig) fill(d SignalConfig) {
	c.DegradeRatio = cmp.Or(c.DegradeRatio, d.DegradeRatio)
	c.RecoverRatio = cmp.Or(c.RecoverRatio, d.RecoverRatio)
	c.Sustain = cmp.Or(c.Sustain, d.Sustain)
	c.Within = cmp.Or(c.Within, max(d.Within, c.Sustain))
	c.Recover = cmp.Or(c.Recover, d.Recover)
	c.MinOps = cmp.Or(c.MinOps, d.MinOps)
	c.Corroborated = cmp.Or(c.Corroborated, d.Corroborated)
	c.CorroborateRatio = cmp.Or(c.CorroborateRatio, d.CorroborateRatio)
}

// maxWithin bounds SignalConfig.Within (the beyond runs are a 16-bit mask).
const maxWithin = 16

func (c SignalConfig) validate(name Signal) error {
	switch {
	case !(c.DegradeRatio > 1) || !(c.RecoverRatio >= 1) || c.RecoverRatio > c.DegradeRatio || math.IsInf(c.DegradeRatio, 0):
		return fmt.Errorf("%s ratios: degrade %v, recover %v: want 1 <= recover <= degrade, degrade > 1", name, c.DegradeRatio, c.RecoverRatio)
	case c.Sustain < 1 || c.Within < c.Sustain || c.Within > maxWithin || c.Recover < 1 || c.Recover > maxHeld:
		return fmt.Errorf("%s sustain %d of %d, recover %d: want 1 <= sustain <= within <= %d, recover 1 to %d", name, c.Sustain, c.Within, c.Recover, maxWithin, maxHeld)
	case c.MinOps < 1:
		return fmt.Errorf("%s min ops %d: want at least 1", name, c.MinOps)
	case c.Corroborated < 0 || c.Corroborated > maxHeld || name == SignalMean && c.Corroborated > 0 && !(c.CorroborateRatio >= 1):
		return fmt.Errorf("%s corroborated %d at ratio %v: want 0 to %d, a ratio of at least 1", name, c.Corroborated, c.CorroborateRatio, maxHeld)
	}
	return nil
}

// SignalState is one signal of one run against the volume's own history.
type SignalState struct {
	// Status is the signal's own state machine: learning until its history
	// is trusted, degraded after a sustained shift.
	Status Status
	// Since and Streak are as in State, for this signal alone.
	Since  time.Time
	Streak int
	// Value is this run's value (seconds; for the rate, cap/achieved);
	// 0 when the run did not carry the signal.
	Value float64
	// History is this run's value against the signal's history (zero
	// while it is not trusted, and for a run that did not carry it).
	History Comparison
}

// track is the state machine of one signal other than the median, against
// the signal's own history only: the same rule as the median's history
// (beyond = ratio and z both over their thresholds, Sustain in a row to
// degrade, Recover normal in a row to recover, runs beyond the history
// held out of it, the window frozen while degraded).
type track struct {
	sc          *SignalConfig // in the Detector's Config
	win         window[float32]
	held        []float64
	st          SignalState // the last run's; Value and History zero after a restore
	streakSince time.Time
	// recent has bit i set when the run i runs ago (among the last Within
	// that carried the signal) was beyond, while not degraded.
	recent uint16
	// ratio is the last run that carried the signal against its history
	// (what a state degraded on it reports while runs lack it).
	ratio float64
	// corr counts the beyond runs in a row whose median corroborated
	// (SignalConfig.Corroborated).
	corr int
}

func (k *track) trusted(minHistory int) bool { return k.win.len() >= minHistory }

// compare judges x against the window. The spread (a pass over the window)
// is computed only when the ratio reaches the recovery threshold: below it
// a run is normal and cannot be beyond whatever the spread.
func (k *track) compare(x float64, c *Config, sc *SignalConfig) Comparison {
	if !k.trusted(c.MinHistory) {
		return Comparison{}
	}
	med := k.win.median()
	if !(med > 0) {
		return Comparison{}
	}
	cmp := Comparison{Baseline: med, Ratio: x / med}
	if cmp.Ratio >= sc.RecoverRatio {
		cmp.Sigma = math.Max(k.win.stats().Sigma(), c.MinRelativeSpread*med)
		cmp.Z = (x - med) / cmp.Sigma
	}
	return cmp
}

// observe judges one run's value of the signal (x not valid: the run did
// not carry it, and only Value and History are cleared); corroborated
// says whether the run corroborates a shift (SignalConfig.Corroborated).
func (k *track) observe(t time.Time, x float64, c *Config, corroborated bool) {
	sc := k.sc
	prev := k.st
	if !valid(x) || !valid(float64(float32(x))) {
		k.st.Value, k.st.History = 0, Comparison{}
		return
	}
	s := SignalState{Value: x, History: k.compare(x, c, sc)}
	h := s.History
	k.ratio = h.Ratio
	beyond := h.Available() && h.Ratio >= sc.DegradeRatio && h.Z >= c.DegradeZ
	normal := !h.Available() || h.Ratio < sc.RecoverRatio || h.Z < c.RecoverZ
	if prev.Status == Degraded {
		s.Status, s.Since = Degraded, prev.Since
		if normal {
			s.Streak = prev.Streak + 1
			if s.Streak == 1 {
				k.streakSince = t
			}
			k.win.push(x)
		}
		if s.Streak >= sc.Recover {
			s.Status, s.Since, s.Streak = OK, k.streakSince, 0
			k.recent, k.corr = 0, 0
		}
		k.st = s
		return
	}
	s.Status, s.Since = Learning, prev.Since
	if h.Available() {
		s.Status = OK
	}
	if prev.Status != s.Status || prev.Since.IsZero() {
		s.Since = t
	}
	// Streak: the beyond runs among the last Within. Held runs wait out
	// of the history until every one of them has left that window.
	k.recent = k.recent << 1 & (1<<sc.Within - 1)
	k.corr++
	if !beyond || !corroborated {
		k.corr = 0
	}
	if !beyond {
		k.win.push(x)
		if k.recent == 0 {
			for _, v := range k.held {
				k.win.push(v)
			}
			k.held = k.held[:0]
		}
		s.Streak = bits.OnesCount16(k.recent)
		k.st = s
		return
	}
	if k.recent == 0 {
		k.streakSince = t
	}
	k.recent |= 1
	s.Streak = bits.OnesCount16(k.recent)
	k.held = append(k.held, x)
	if s.Streak >= sc.Sustain || sc.Corroborated > 0 && k.corr >= sc.Corroborated {
		s.Status, s.Since, s.Streak = Degraded, k.streakSince, 0
		k.held, k.recent, k.corr = k.held[:0], 0, 0
	}
	k.st = s
}

func (k *track) reset() {
	k.win.reset()
	k.held, k.st, k.streakSince, k.ratio, k.recent, k.corr = k.held[:0], SignalState{}, time.Time{}, 0, 0, 0
}
