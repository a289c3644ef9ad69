package baseline

import (
	"fmt"
	"math"
	"time"
)

// Status is a volume's degradation state for one probe kind.
type Status string

// Statuses.
const (
	// Learning: no reference yet (history too short, no cohort, no prior).
	Learning Status = "learning"
	OK       Status = "ok"
	Degraded Status = "degraded"
)

// Reference names what a latency was compared with.
type Reference string

// References.
const (
	NoReference Reference = ""
	History     Reference = "history" // the volume's own rolling window
	Cohort      Reference = "cohort"  // volumes of the same profile
	Prior       Reference = "prior"   // the profile's expected band
)

// Comparison is one run against one reference. Baseline 0 means the
// reference was not available for this run.
//
// The history judges the run's latency; the cohort and the prior judge the
// volume's level (State.Level, the median of its window and this run),
// because the cohort is made of such medians and a prior band is a median
// expectation: a volume whose runs alternate between two modes is then
// judged by where it sits, not by which mode the last run hit.
type Comparison struct {
	Baseline float64 // seconds: history or cohort median, prior's typical
	// Sigma: Stats.Sigma floored at MinRelativeSpread × Baseline; prior:
	// (high−typical)/DegradeZ. Against a history, Sigma and Z are computed
	// only when Ratio >= the recovery ratio (below it a run is normal
	// whatever the spread), else they are 0.
	Sigma float64
	Ratio float64 // latency (history) or level (cohort, prior) / Baseline
	Z     float64 // (value − Baseline) / Sigma
}

// Available reports whether the reference was there to compare with.
func (c Comparison) Available() bool { return c.Baseline > 0 }

// State is the outcome of one run.
type State struct {
	Status Status
	// Reference is what the state is judged against: while degraded, the
	// reference the sustained shift was measured against; otherwise the
	// primary reference in use (history, else cohort, else prior).
	Reference Reference
	// Ratio is this run's latency over that reference's baseline.
	Ratio float64
	// Since is when the status began: for Degraded the time of the first
	// run of the sustained shift of the earliest signal degraded now (the
	// episode's start, whichever signal leads it now); for OK the first run of the recovery
	// streak (or the first run ever); for Learning the first run.
	Since time.Time
	// Streak counts the consecutive runs towards the next transition: runs
	// beyond the thresholds while OK, normal runs while Degraded.
	Streak int

	// This run, and how it compares with each reference. The prior is
	// compared only while the cohort is too small.
	Time    time.Time
	Latency float64 // seconds
	// Level is the median of the history window and this run: what the
	// cohort and the prior judge.
	Level                  float64
	History, Cohort, Prior Comparison

	// Signal is what the state is about: while degraded, the signal that
	// moved (the median when it did; else the rate when it fell short with
	// the median steady — a throttled volume, Throttled — even while the
	// tail or the mean degraded first and the rate is still beyond in its
	// recent runs; else the signal that moved first); otherwise the
	// median.
	Signal Signal
	// IOPS and Cap are this run's achieved rate and IOPS cap (0: uncapped
	// or not carried).
	IOPS, Cap float64
	// SlowOps is the pooled slow-op count (at most SlowConfig.PerRun a
	// run), SlowOf the pool's ops and SlowCeiling the largest pool the
	// volume's history holds, while the state is about SignalSlow.
	SlowOps, SlowOf, SlowCeiling int
}

// Throttled reports a volume degraded on its rate alone, its median
// steady: it cannot reach its IOPS cap though each operation is as fast as
// ever — a cloud volume out of burst credits or at its provisioned IOPS,
// whose remedy is not a disk swap.
func (s State) Throttled() bool { return s.Status == Degraded && s.Signal == SignalRate }

// Detail says in words which signal the state is about and by how much:
// "median ×2.1 vs history", "p99 ×40 vs history", "rate 20/50 IOPS".
func (s State) Detail() string {
	sig := s.Signal
	if sig == "" {
		sig = SignalMedian
	}
	switch {
	case sig == SignalRate && s.Cap > 0 && s.IOPS > 0:
		return fmt.Sprintf("rate %.3g/%.3g IOPS, %.2g× below its history", s.IOPS, s.Cap, s.Ratio)
	case sig == SignalSlow:
		return fmt.Sprintf("slow ops %d of %d vs history ≤%d", s.SlowOps, s.SlowOf, s.SlowCeiling)
	case sig == SignalMedian:
		return fmt.Sprintf("median ×%.2g vs %s", s.Ratio, orNone(s.Reference))
	}
	return fmt.Sprintf("%s ×%.2g vs history", sig, s.Ratio)
}

func (s State) String() string {
	return fmt.Sprintf("{%s vs %s ×%.3g since %s streak %d}", s.Status, orNone(s.Reference), s.Ratio, s.Since.UTC().Format(time.RFC3339), s.Streak)
}

func orNone(r Reference) string {
	if r == NoReference {
		return "none"
	}
	return string(r)
}

// Refs are the references other than history, supplied by the caller for
// each run: the cohort of the volume's profile (CohortOf) and the prior
// band (Priors.Expect(...).Band). A zero Cohort or Prior is absent.
type Refs struct {
	Cohort Stats
	Prior  Band
}

// Detector is the compact state of one volume and probe kind: a ring of
// the last Window per-run median latencies and the degradation state
// machine. It is not safe for concurrent use; it does no I/O and reads no
// clock.
type Detector struct {
	cfg Config

	// hist is the median's history: the last cfg.Window per-run medians.
	hist window[float64]
	// held are runs kept out of the history while a shift against it is
	// pending: committed if the streak breaks, dropped if it turns degraded.
	held []float64

	last State // the median's last state (its Signal, IOPS and Cap unused); persisted without the comparisons
	// streakSince is the time of the first run of the current streak.
	streakSince time.Time

	// tracks are the signals after the median (tail, mean, rate), their
	// windows slices of one block; view is the last state of all of them.
	tracks [numTracks]track
	// slow is the slow-op count (SignalSlow).
	slow slowTrack
	// iops and cap are the last run's rate and cap (0: not carried);
	// waitShare its (mean − median)/(p99 − median), not persisted.
	iops, cap, waitShare float64
}

// minWaitShare is the least (mean − median)/(p99 − median) of a run for a
// rate shortfall to lead over a tail that moved with it: a token bucket
// makes a good share of a run's ops wait (the throttled volume:
// 40% of its ops at 80 ms, 0.4), a stalling disk a few (3 stalled ops of
// 50: 0.06), whose lost time also costs a short run its rate.
const minWaitShare = 0.1

// NewDetector returns an empty Detector. Zero fields of cfg take their
// defaults.
func NewDetector(cfg Config) (*Detector, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("baseline config: %w", err)
	}
	cfg = cfg.withDefaults()
	d := &Detector{cfg: cfg, hist: newWindow(make([]float64, 2*cfg.Window), cfg.Window)}
	sw := cfg.SignalWindow
	block := make([]float32, 2*len(d.tracks)*sw)
	for i, sc := range []*SignalConfig{&d.cfg.Tail, &d.cfg.Mean, &d.cfg.Rate} {
		d.tracks[i].sc = sc
		d.tracks[i].win = newWindow(block[2*i*sw:2*(i+1)*sw], sw)
	}
	d.slow.sc = &d.cfg.Slow
	return d, nil
}

// Config is the Detector's configuration, defaults applied.
func (d *Detector) Config() Config { return d.cfg }

// State is the last run's state (the zero State before the first run).
// After UnmarshalBinary its comparisons are zero.
func (d *Detector) State() State { return d.combine() }

// History summarises the window: its length, median, MAD and 95th
// percentile. The history is a reference once N >= Config.MinHistory
// (Trusted); its Median is what the volume contributes to its cohort.
func (d *Detector) History() Stats { return d.hist.stats() }

// Trusted reports whether the history has enough runs to be a reference.
func (d *Detector) Trusted() bool { return d.hist.len() >= d.cfg.MinHistory }

// Reset forgets the history and the state, for an operator who accepts a
// volume's new level (a new array, a changed workload) as its normal.
func (d *Detector) Reset() {
	d.hist.reset()
	d.held, d.last, d.streakSince = d.held[:0], State{}, time.Time{}
	for i := range d.tracks {
		d.tracks[i].reset()
	}
	d.slow.reset()
	d.iops, d.cap = 0, 0
}

func (d *Detector) compare(x, baseline, sigma float64) Comparison {
	if !(baseline > 0) {
		return Comparison{}
	}
	sigma = math.Max(sigma, d.cfg.MinRelativeSpread*baseline)
	return Comparison{Baseline: baseline, Sigma: sigma, Ratio: x / baseline, Z: (x - baseline) / sigma}
}

func (d *Detector) beyond(c Comparison) bool {
	return c.Available() && c.Ratio >= d.cfg.DegradeRatio && c.Z >= d.cfg.DegradeZ
}

func (d *Detector) normal(c Comparison) bool {
	return !c.Available() || c.Ratio < d.cfg.RecoverRatio || c.Z < d.cfg.RecoverZ
}

// Observe judges one run: t is when it ran and latency its median latency
// in seconds (the probe result's p50). Runs are expected in time order: a
// run not later than the last one (a replay), or a latency that is not
// positive and finite, changes nothing and returns the last state.
//
// The rule: the run is compared with the history (once trusted) and with
// the cohort (once it has MinCohort volumes) or, failing that, the prior.
// It is beyond when, against any of them, ratio >= DegradeRatio and
// z >= DegradeZ. Sustain consecutive beyond runs turn OK into Degraded,
// with Since = the first of them and Reference = the history if every one
// of them was beyond it, else the cohort or prior reference the last run
// is furthest beyond (the history when it is beyond neither). While
// Degraded, Recover consecutive runs normal against every reference
// (ratio < RecoverRatio or z < RecoverZ) turn it back, with Since = the
// first of those.
//
// Runs beyond the history are kept out of it: held while the shift is
// pending (committed if the streak breaks, dropped once it is sustained),
// and while degraded against the history only runs normal against it go
// in — the window freezes, so the history never learns a degraded level
// and a slow step stays visible until it is fixed or Reset accepts it.
// Degraded against the cohort or the prior only, the history goes on
// learning the volume's own level.
func (d *Detector) Observe(t time.Time, latency float64, refs Refs) State {
	return d.ObserveRun(t, Run{Median: latency}, refs)
}

// ObserveRun judges one run on every signal it carries: the median as
// Observe does, and the tail, the mean and the rate each against its own
// history with its own SignalConfig. A run without a valid median, or not
// later than the last, changes nothing. The state is degraded when any
// signal is; State.Signal and State.Detail say which.
func (d *Detector) ObserveRun(t time.Time, run Run, refs Refs) State {
	if !valid(run.Median) || !d.last.Time.IsZero() && !t.After(d.last.Time) {
		return d.combine()
	}
	d.observeMedian(t, run.Median, refs)
	vals := [numTracks]float64{run.P99, run.Mean, 0}
	if run.Cap > 0 && run.IOPS > 0 && !math.IsInf(run.Cap, 0) {
		vals[2] = run.Cap / run.IOPS
	}
	d.waitShare = 0
	if run.P99 > run.Median && run.Mean > run.Median {
		d.waitShare = (run.Mean - run.Median) / (run.P99 - run.Median)
	}
	corroborated := [numTracks]bool{false, d.last.History.Ratio >= d.cfg.Mean.CorroborateRatio, d.waitShare >= minWaitShare}
	for i := range d.tracks {
		x := vals[i]
		if run.Ops < d.tracks[i].sc.MinOps {
			x = 0
		}
		d.tracks[i].observe(t, x, &d.cfg, corroborated[i])
	}
	d.slow.observe(t, run.Slow, run.Ops)
	d.iops, d.cap = 0, 0
	if vals[2] > 0 {
		d.iops, d.cap = run.IOPS, run.Cap
	}
	return d.combine()
}

// combine folds the median's state and the other signals' into one State.
func (d *Detector) combine() State {
	med := &d.last
	s := *med
	s.Signal, s.IOPS, s.Cap = SignalMedian, d.iops, d.cap
	if med.Status == Degraded {
		s.Since = d.episodeSince(med.Since)
		return s
	}
	// The first signal to degrade leads, unless the rate has fallen short
	// too (degraded, or beyond in its recent runs) and the run's lost time
	// is spread over many ops (minWaitShare), or the tail and the mean are
	// steady: a token bucket makes the waiting ops' tail and mean move
	// with the rate, often a run or two before the rate's own streak
	// completes, and the remedy is the rate's.
	per := &d.tracks
	lead := -1
	for i := range per {
		if per[i].st.Status == Degraded && (lead < 0 || per[i].st.Since.Before(per[lead].st.Since)) {
			lead = i
		}
	}
	slow := d.slow.st.Status == Degraded
	if slow && (lead < 0 || d.slow.st.Since.Before(per[lead].st.Since)) {
		lead = numTracks
	}
	if lead < 0 {
		return s
	}
	s.Status, s.Reference = Degraded, History
	s.Since = d.episodeSince(time.Time{})
	tailsSteady := per[0].st.Status != Degraded && per[1].st.Status != Degraded && !slow
	if r := &per[2]; (r.st.Status == Degraded || r.st.Streak > 0) && (tailsSteady || d.waitShare >= minWaitShare) {
		lead = 2
	}
	s.Signal = allSignals[lead+1]
	if lead == numTracks {
		s.Streak, s.Ratio = d.slow.st.Streak, d.slow.ratio
		s.SlowOps, s.SlowOf, s.SlowCeiling = int(d.slow.st.Value), d.slow.ops, d.slow.ceiling()
		return s
	}
	s.Streak, s.Ratio = per[lead].st.Streak, per[lead].ratio
	return s
}

// episodeSince is when the episode began: the earliest Since of the
// signals degraded now (and of since, unless zero). Another signal may
// come to lead an episode as it goes on — a stall's p99 first, then the
// median — and the episode's start stays.
func (d *Detector) episodeSince(since time.Time) time.Time {
	earliest := func(t time.Time) {
		if since.IsZero() || t.Before(since) {
			since = t
		}
	}
	for i := range d.tracks {
		if d.tracks[i].st.Status == Degraded {
			earliest(d.tracks[i].st.Since)
		}
	}
	if d.slow.st.Status == Degraded {
		earliest(d.slow.st.Since)
	}
	return since
}

// Of returns the last run's state of one signal against its own history
// (the median's: its state machine and History comparison, whatever the
// reference). The zero SignalState for an unknown signal.
func (d *Detector) Of(sig Signal) SignalState {
	switch i := signalIndex(sig); {
	case i == 0:
		m := &d.last
		return SignalState{Status: m.Status, Since: m.Since, Streak: m.Streak, Value: m.Latency, History: m.History}
	case i > 0 && i <= numTracks:
		return d.tracks[i-1].st
	case i == numTracks+1:
		return d.slow.st
	}
	return SignalState{}
}

// observeMedian is the median's state machine (Observe's rule); it sets
// d.last.
func (d *Detector) observeMedian(t time.Time, latency float64, refs Refs) {
	s := d.compareMedian(t, latency, refs)
	j := d.judgeMedian(&s)
	if d.last.Status == Degraded {
		d.whileDegraded(&s, j)
	} else {
		d.whileNotDegraded(&s, j)
	}
	switch s.Reference {
	case History:
		s.Ratio = s.History.Ratio
	case Cohort:
		s.Ratio = s.Cohort.Ratio
	case Prior:
		s.Ratio = s.Prior.Ratio
	}
	d.last = s
}

// compareMedian compares a run's median with the history (its latency)
// and with the cohort or, failing that, the prior (its level).
func (d *Detector) compareMedian(t time.Time, latency float64, refs Refs) State {
	s := State{Time: t, Latency: latency}
	if d.Trusted() {
		// The spread (a pass over the window) only when the ratio reaches
		// the recovery threshold: below it the run is normal, and cannot
		// be beyond, whatever the spread.
		if med := d.hist.median(); med > 0 && latency/med < d.cfg.RecoverRatio {
			s.History = Comparison{Baseline: med, Ratio: latency / med}
		} else {
			h := d.History()
			s.History = d.compare(latency, h.Median, h.Sigma())
		}
	}
	s.Level = medianWith(d.hist.byValue, latency)
	if refs.Cohort.N >= d.cfg.MinCohort {
		s.Cohort = d.compare(s.Level, refs.Cohort.Median, refs.Cohort.Sigma())
	} else if refs.Prior.Typical > 0 && refs.Prior.High >= refs.Prior.Typical {
		s.Prior = d.compare(s.Level, refs.Prior.Typical, (refs.Prior.High-refs.Prior.Typical)/d.cfg.DegradeZ)
	}
	return s
}

// medianJudgement is one run's median against every reference in use.
type medianJudgement struct {
	// primary is the first reference available (history, cohort, prior).
	primary Reference
	// worstOther is the cohort or prior reference the run is furthest
	// beyond (by ratio), if any.
	worstOther       Reference
	beyond, isNormal bool
}

func (d *Detector) judgeMedian(s *State) medianJudgement {
	j := medianJudgement{isNormal: true}
	var worstRatio float64
	for _, rc := range [...]struct {
		ref Reference
		c   Comparison
	}{{History, s.History}, {Cohort, s.Cohort}, {Prior, s.Prior}} {
		if !rc.c.Available() {
			continue
		}
		if j.primary == NoReference {
			j.primary = rc.ref
		}
		if d.beyond(rc.c) {
			j.beyond = true
			if rc.ref != History && rc.c.Ratio > worstRatio {
				j.worstOther, worstRatio = rc.ref, rc.c.Ratio
			}
		}
		j.isNormal = j.isNormal && d.normal(rc.c)
	}
	return j
}

// whileDegraded counts normal runs towards recovery. The history is
// frozen against a shift in itself: only runs normal against it go in.
// Degraded against the cohort or the prior only, the history goes on
// learning the volume's own level.
func (d *Detector) whileDegraded(s *State, j medianJudgement) {
	prev := d.last
	s.Status, s.Since, s.Reference = Degraded, prev.Since, prev.Reference
	if j.isNormal {
		s.Streak = prev.Streak + 1
		if s.Streak == 1 {
			d.streakSince = s.Time
		}
	}
	if prev.Reference != History || d.normal(s.History) {
		d.hist.push(s.Latency)
	}
	if s.Streak >= d.cfg.Recover {
		s.Status, s.Reference, s.Since, s.Streak = OK, j.primary, d.streakSince, 0
		if j.primary == NoReference {
			s.Status = Learning
		}
	}
}

// whileNotDegraded counts beyond runs towards a degraded state, holding
// the runs beyond the history out of it while the shift is pending.
func (d *Detector) whileNotDegraded(s *State, j medianJudgement) {
	prev := d.last
	s.Status, s.Reference, s.Since = OK, j.primary, prev.Since
	if j.primary == NoReference {
		s.Status = Learning
	}
	if prev.Status != s.Status || prev.Since.IsZero() {
		s.Since = s.Time
	}
	if !j.beyond {
		for _, x := range d.held {
			d.hist.push(x)
		}
		d.held = d.held[:0]
		d.hist.push(s.Latency)
		return
	}
	s.Streak = prev.Streak + 1
	if s.Streak == 1 {
		d.streakSince = s.Time
	}
	if d.beyond(s.History) {
		d.held = append(d.held, s.Latency)
	} else {
		d.hist.push(s.Latency)
	}
	if s.Streak >= d.cfg.Sustain {
		// The history names the shift ("slower than it used to be,
		// since ...") when every run of the streak was beyond it — they
		// are the held runs. A streak beyond the cohort or the prior that
		// a spike against the history happens to end is named by the
		// reference it was beyond, else the history.
		ref := j.worstOther
		if ref == NoReference || len(d.held) >= s.Streak {
			ref = History
		}
		s.Status, s.Reference, s.Since, s.Streak = Degraded, ref, d.streakSince, 0
		d.held = d.held[:0]
	}
}
