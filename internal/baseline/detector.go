package baseline

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

// Config holds the detection constants. The zero value of a field means
// its default (DefaultConfig).
type Config struct {
	// Window is how many per-run medians the history keeps (default 48:
	// 2.4 hours of the agent's default 3-minute runs, two days of hourly
	// ones; 384 bytes per volume and kind).
	Window int
	// MinHistory is how many runs the history needs before it is a
	// reference (default 12).
	MinHistory int
	// MinCohort is how many volumes a cohort needs before it is a
	// reference (default 5); below that the prior stands in for it.
	MinCohort int

	// A run is beyond a reference when latency/baseline >= DegradeRatio
	// and its robust z-score >= DegradeZ (defaults 1.5 and 3): both
	// significant (outside the reference's own noise) and big enough to
	// matter. Sustain consecutive runs beyond (default 4: 9+ minutes at
	// the agent's default 3-minute schedule) turn the state degraded.
	DegradeRatio float64
	DegradeZ     float64
	Sustain      int
	// While degraded, a run is normal when against every reference in use
	// latency/baseline < RecoverRatio or z < RecoverZ (defaults 1.2 and 2);
	// Recover consecutive normal runs (default 3) turn it back to ok.
	RecoverRatio float64
	RecoverZ     float64
	Recover      int

	// MinRelativeSpread floors a reference's sigma at this share of its
	// baseline (default 0.05), so that a reference with no spread at all
	// (MAD 0) does not make every small wobble infinitely significant.
	MinRelativeSpread float64

	// SignalWindow is how many runs the history of each signal after the
	// median keeps (default 24, at most Window): a tail or a rate is about
	// episodes, not drifts (the median's 48 runs and the cohort watch
	// those), and a shorter window keeps a volume's four histories in
	// 1.5 KiB and BenchmarkObserve within twice the median alone's cost.
	SignalWindow int

	// Tail, Mean and Rate are the constants of the signals other than the
	// median (SignalTail, SignalMean, SignalRate), each judged against its
	// own history with its own spread: defaults ratio 3 to degrade and 2
	// to recover for the tail (a 50-op run's p99 is its slowest op: one
	// host hiccup moves it), 1.5 and 1.2 for the mean and the rate; beyond
	// runs in a row to degrade: 5 for the tail, 6 for the mean and the rate
	// (with fewer, the 7-day noise-only replays of internal/replay alerted:
	// 2 a day on the p99 with 4, 7 a week on the mean and rate with 4; "3 of the last
	// 5" caught a stalling RAID 1 member sooner but alerted 3.2 times a
	// week on the lab's noise, bench/degrade-tails.sh), 3 normal runs in a
	// row to recover; at least 50 ops for the tail, 10 for the mean and the
	// rate.
	Tail, Mean, Rate SignalConfig
}

// DefaultConfig is the configuration every zero field of a Config takes.
func DefaultConfig() Config {
	return Config{
		Window: 48, MinHistory: 12, MinCohort: 5,
		DegradeRatio: 1.5, DegradeZ: 3, Sustain: 4,
		RecoverRatio: 1.2, RecoverZ: 2, Recover: 3,
		MinRelativeSpread: 0.05,
		SignalWindow:      24,
		Tail:              SignalConfig{DegradeRatio: 3, RecoverRatio: 2, Sustain: 5, Within: 5, Recover: 3, MaxWeight: 2, MinOps: 50},
		Mean:              SignalConfig{DegradeRatio: 1.5, RecoverRatio: 1.2, Sustain: 6, Within: 6, Recover: 3, MaxWeight: 2, MinOps: 10},
		Rate:              SignalConfig{DegradeRatio: 1.5, RecoverRatio: 1.2, Sustain: 6, Within: 6, Recover: 3, MaxWeight: 2, MinOps: 10},
	}
}

// maxWindow bounds Config.Window and the serialised history.
const maxWindow = 1024

// withDefaults fills zero fields from DefaultConfig.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	setI := func(v *int, def int) {
		if *v == 0 {
			*v = def
		}
	}
	setF := func(v *float64, def float64) {
		if *v == 0 {
			*v = def
		}
	}
	setI(&c.Window, d.Window)
	setI(&c.MinHistory, d.MinHistory)
	setI(&c.MinCohort, d.MinCohort)
	if c.SignalWindow == 0 {
		c.SignalWindow = min(d.SignalWindow, c.Window)
	}
	setI(&c.Sustain, d.Sustain)
	setI(&c.Recover, d.Recover)
	setF(&c.DegradeRatio, d.DegradeRatio)
	setF(&c.DegradeZ, d.DegradeZ)
	setF(&c.RecoverRatio, d.RecoverRatio)
	setF(&c.RecoverZ, d.RecoverZ)
	setF(&c.MinRelativeSpread, d.MinRelativeSpread)
	c.Tail.fill(d.Tail)
	c.Mean.fill(d.Mean)
	c.Rate.fill(d.Rate)
	return c
}

// Validate checks a Config after defaults are applied.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	if c.Window < 3 || c.Window > maxWindow {
		errs = append(errs, fmt.Errorf("window %d: want 3 to %d", c.Window, maxWindow))
	}
	if c.MinHistory < 3 || c.MinHistory > c.Window {
		errs = append(errs, fmt.Errorf("min history %d: want 3 to the window (%d)", c.MinHistory, c.Window))
	}
	if c.SignalWindow < c.MinHistory || c.SignalWindow > c.Window {
		errs = append(errs, fmt.Errorf("signal window %d: want the min history (%d) to the window (%d)", c.SignalWindow, c.MinHistory, c.Window))
	}
	if c.MinCohort < 3 {
		errs = append(errs, fmt.Errorf("min cohort %d: want at least 3", c.MinCohort))
	}
	if c.Sustain < 1 || c.Sustain > 64 || c.Recover < 1 || c.Recover > 64 {
		errs = append(errs, fmt.Errorf("sustain %d, recover %d: want 1 to 64", c.Sustain, c.Recover))
	}
	if !(c.DegradeRatio > 1) || !(c.RecoverRatio >= 1) || c.RecoverRatio > c.DegradeRatio || math.IsInf(c.DegradeRatio, 0) {
		errs = append(errs, fmt.Errorf("ratios: degrade %v, recover %v: want 1 <= recover <= degrade, degrade > 1", c.DegradeRatio, c.RecoverRatio))
	}
	if !(c.DegradeZ > 0) || !(c.RecoverZ > 0) || c.RecoverZ > c.DegradeZ || math.IsInf(c.DegradeZ, 0) {
		errs = append(errs, fmt.Errorf("z: degrade %v, recover %v: want 0 < recover <= degrade", c.DegradeZ, c.RecoverZ))
	}
	if !(c.MinRelativeSpread > 0 && c.MinRelativeSpread < 1) {
		errs = append(errs, fmt.Errorf("min relative spread %v: want between 0 and 1", c.MinRelativeSpread))
	}
	for i, sc := range c.signalConfigs() {
		if err := sc.validate(allSignals[i+1]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// signalConfigs are the extra signals' constants in track order.
func (c *Config) signalConfigs() [numSignals - 1]SignalConfig {
	return [numSignals - 1]SignalConfig{c.Tail, c.Mean, c.Rate}
}

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
	// run of the sustained shift; for OK the first run of the recovery
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

	ring []float64 // capacity cfg.Window; ring[head] is the oldest once full
	head int
	// byValue holds the ring's values in ascending order, kept up to date
	// on every push (two binary searches and a short copy) so that no run
	// sorts the window. It is rebuilt, not serialised.
	byValue []float64
	// held are runs kept out of the history while a shift against it is
	// pending: committed if the streak breaks, dropped if it turns degraded.
	held []float64

	last medianState // the median's last state; persisted without the comparisons
	// streakSince is the time of the first run of the current streak.
	streakSince time.Time

	// tracks are the signals after the median (tail, mean, rate), their
	// windows slices of one block; view is the last state of all of them.
	tracks [numSignals - 1]track
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

// medianState is the median's part of State: what its state machine keeps
// between runs.
type medianState struct {
	Status                 Status
	Reference              Reference
	Ratio                  float64
	Since                  time.Time
	Streak                 int
	Time                   time.Time
	Latency, Level         float64
	History, Cohort, Prior Comparison
}

// NewDetector returns an empty Detector. Zero fields of cfg take their
// defaults.
func NewDetector(cfg Config) (*Detector, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("baseline config: %w", err)
	}
	cfg = cfg.withDefaults()
	med := make([]float64, 2*cfg.Window)
	d := &Detector{cfg: cfg, ring: med[:0:cfg.Window], byValue: med[cfg.Window : cfg.Window : 2*cfg.Window]}
	sw := cfg.SignalWindow
	block := make([]float32, 2*len(d.tracks)*sw)
	for i, sc := range []*SignalConfig{&d.cfg.Tail, &d.cfg.Mean, &d.cfg.Rate} {
		d.tracks[i].sc = sc
		w := block[2*i*sw : 2*(i+1)*sw]
		d.tracks[i].win = window{ring: w[:0:sw], byValue: w[sw : sw : 2*sw]}
	}
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
func (d *Detector) History() Stats { return summarizeSorted(d.byValue) }

// Trusted reports whether the history has enough runs to be a reference.
func (d *Detector) Trusted() bool { return len(d.ring) >= d.cfg.MinHistory }

// Reset forgets the history and the state, for an operator who accepts a
// volume's new level (a new array, a changed workload) as its normal.
func (d *Detector) Reset() {
	d.ring, d.byValue, d.head, d.held, d.last, d.streakSince = d.ring[:0], d.byValue[:0], 0, d.held[:0], medianState{}, time.Time{}
	for i := range d.tracks {
		d.tracks[i].reset()
	}
	d.iops, d.cap = 0, 0
}

func (d *Detector) push(x float64) {
	if len(d.ring) < cap(d.ring) {
		d.ring = append(d.ring, x)
		i, _ := slices.BinarySearch(d.byValue, x)
		d.byValue = slices.Insert(d.byValue, i, x)
		return
	}
	old := d.ring[d.head]
	d.ring[d.head] = x
	d.head = (d.head + 1) % len(d.ring)
	replaceSorted(d.byValue, old, x)
}

// replaceSorted replaces old, which sorted s holds, with x, keeping s
// sorted: old's place by binary search, then one insertion-sort pass from
// it towards x's place, shifting only the values in between.
func replaceSorted[T float32 | float64](s []T, old, x T) {
	i, _ := slices.BinarySearch(s, old)
	if x >= old {
		for i+1 < len(s) && s[i+1] < x {
			s[i] = s[i+1]
			i++
		}
	} else {
		for i > 0 && s[i-1] > x {
			s[i] = s[i-1]
			i--
		}
	}
	s[i] = x
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
	vals := [numSignals - 1]float64{run.P99, run.Mean, 0}
	if run.Cap > 0 && run.IOPS > 0 && !math.IsInf(run.Cap, 0) {
		vals[2] = run.Cap / run.IOPS
	}
	for i := range d.tracks {
		x := vals[i]
		if run.Ops < d.tracks[i].sc.MinOps {
			x = 0
		}
		d.tracks[i].observe(t, x, &d.cfg)
	}
	d.iops, d.cap, d.waitShare = 0, 0, 0
	if vals[2] > 0 {
		d.iops, d.cap = run.IOPS, run.Cap
	}
	if run.P99 > run.Median && run.Mean > run.Median {
		d.waitShare = (run.Mean - run.Median) / (run.P99 - run.Median)
	}
	return d.combine()
}

// combine folds the median's state and the other signals' into one State.
func (d *Detector) combine() State {
	med := &d.last
	s := State{Status: med.Status, Reference: med.Reference, Ratio: med.Ratio, Since: med.Since, Streak: med.Streak,
		Time: med.Time, Latency: med.Latency, Level: med.Level, History: med.History, Cohort: med.Cohort, Prior: med.Prior,
		Signal: SignalMedian, IOPS: d.iops, Cap: d.cap}
	if med.Status == Degraded {
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
	if lead < 0 {
		return s
	}
	s.Status, s.Reference, s.Since = Degraded, History, per[lead].st.Since
	tailsSteady := per[0].st.Status != Degraded && per[1].st.Status != Degraded
	if r := &per[2]; (r.st.Status == Degraded || r.st.Streak > 0) && (tailsSteady || d.waitShare >= minWaitShare) {
		lead = 2
	}
	s.Signal, s.Streak, s.Ratio = allSignals[lead+1], per[lead].st.Streak, per[lead].ratio
	// A median whose own streak beyond its history is pending names the
	// shift: another signal (a mean moved twice as far, weighing double)
	// completed its streak first, but "median ×2.8" is what moved.
	if med.Streak > 0 && d.beyond(med.History) && lead != 2 {
		s.Signal, s.Ratio = SignalMedian, med.History.Ratio
	}
	return s
}

// Of returns the last run's state of one signal against its own history
// (the median's: its state machine and History comparison, whatever the
// reference). The zero SignalState for an unknown signal.
func (d *Detector) Of(sig Signal) SignalState {
	switch i := signalIndex(sig); {
	case i == 0:
		m := &d.last
		return SignalState{Status: m.Status, Since: m.Since, Streak: m.Streak, Value: m.Latency, History: m.History}
	case i > 0:
		return d.tracks[i-1].st
	}
	return SignalState{}
}

// observeMedian is the median's state machine (Observe's rule); it sets
// d.last.
func (d *Detector) observeMedian(t time.Time, latency float64, refs Refs) {
	s := medianState{Time: t, Latency: latency}
	if d.Trusted() {
		// The spread (a pass over the window) only when the ratio reaches
		// the recovery threshold: below it the run is normal, and cannot
		// be beyond, whatever the spread.
		if med := sortedMedian(d.byValue); med > 0 && latency/med < d.cfg.RecoverRatio {
			s.History = Comparison{Baseline: med, Ratio: latency / med}
		} else {
			h := d.History()
			s.History = d.compare(latency, h.Median, h.Sigma())
		}
	}
	s.Level = medianWith(d.byValue, latency)
	if refs.Cohort.N >= d.cfg.MinCohort {
		s.Cohort = d.compare(s.Level, refs.Cohort.Median, refs.Cohort.Sigma())
	} else if refs.Prior.Typical > 0 && refs.Prior.High >= refs.Prior.Typical {
		s.Prior = d.compare(s.Level, refs.Prior.Typical, (refs.Prior.High-refs.Prior.Typical)/d.cfg.DegradeZ)
	}
	cmps := [...]struct {
		ref Reference
		c   Comparison
	}{{History, s.History}, {Cohort, s.Cohort}, {Prior, s.Prior}}

	// worstOther is the cohort or prior reference this run is furthest
	// beyond (by ratio), if any.
	primary, worstOther := NoReference, NoReference
	var worstRatio float64
	isBeyond, isNormal := false, true
	for _, rc := range cmps {
		if !rc.c.Available() {
			continue
		}
		if primary == NoReference {
			primary = rc.ref
		}
		if d.beyond(rc.c) {
			isBeyond = true
			if rc.ref != History && rc.c.Ratio > worstRatio {
				worstOther, worstRatio = rc.ref, rc.c.Ratio
			}
		}
		isNormal = isNormal && d.normal(rc.c)
	}
	prev := d.last
	switch prev.Status {
	case Degraded:
		s.Status, s.Since, s.Reference = Degraded, prev.Since, prev.Reference
		if isNormal {
			s.Streak = prev.Streak + 1
			if s.Streak == 1 {
				d.streakSince = t
			}
		}
		// Frozen against a shift in its own history: only runs normal
		// against it go in. Degraded against the cohort or the prior
		// only, the history goes on learning the volume's own level.
		if prev.Reference != History || d.normal(s.History) {
			d.push(latency)
		}
		if s.Streak >= d.cfg.Recover {
			s.Status, s.Reference, s.Since, s.Streak = OK, primary, d.streakSince, 0
			if primary == NoReference {
				s.Status = Learning
			}
		}
	default:
		s.Status, s.Reference, s.Since = OK, primary, prev.Since
		if primary == NoReference {
			s.Status = Learning
		}
		if prev.Status != s.Status || prev.Since.IsZero() {
			s.Since = t
		}
		if !isBeyond {
			for _, x := range d.held {
				d.push(x)
			}
			d.held = d.held[:0]
			d.push(latency)
			break
		}
		s.Streak = prev.Streak + 1
		if s.Streak == 1 {
			d.streakSince = t
		}
		if d.beyond(s.History) {
			d.held = append(d.held, latency)
		} else {
			d.push(latency)
		}
		if s.Streak >= d.cfg.Sustain {
			// The history names the shift ("slower than it used to be,
			// since ...") when every run of the streak was beyond it —
			// they are the held runs. A streak beyond the cohort or the
			// prior that a spike against the history happens to end is
			// named by the reference it was beyond, else the history.
			ref := worstOther
			if ref == NoReference || len(d.held) >= s.Streak {
				ref = History
			}
			s.Status, s.Reference, s.Since, s.Streak = Degraded, ref, d.streakSince, 0
			d.held = d.held[:0]
		}
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
