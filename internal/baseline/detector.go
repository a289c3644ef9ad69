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
}

// DefaultConfig is the configuration every zero field of a Config takes.
func DefaultConfig() Config {
	return Config{
		Window: 48, MinHistory: 12, MinCohort: 5,
		DegradeRatio: 1.5, DegradeZ: 3, Sustain: 4,
		RecoverRatio: 1.2, RecoverZ: 2, Recover: 3,
		MinRelativeSpread: 0.05,
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
	setI(&c.Sustain, d.Sustain)
	setI(&c.Recover, d.Recover)
	setF(&c.DegradeRatio, d.DegradeRatio)
	setF(&c.DegradeZ, d.DegradeZ)
	setF(&c.RecoverRatio, d.RecoverRatio)
	setF(&c.RecoverZ, d.RecoverZ)
	setF(&c.MinRelativeSpread, d.MinRelativeSpread)
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
	return errors.Join(errs...)
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
	Sigma    float64 // seconds: Stats.Sigma floored at MinRelativeSpread × Baseline; prior: (high−typical)/DegradeZ
	Ratio    float64 // latency (history) or level (cohort, prior) / Baseline
	Z        float64 // (value − Baseline) / Sigma
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

	last State // the last run's state; persisted without the comparisons
	// streakSince is the time of the first run of the current streak.
	streakSince time.Time
}

// NewDetector returns an empty Detector. Zero fields of cfg take their
// defaults.
func NewDetector(cfg Config) (*Detector, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("baseline config: %w", err)
	}
	cfg = cfg.withDefaults()
	return &Detector{cfg: cfg, ring: make([]float64, 0, cfg.Window), byValue: make([]float64, 0, cfg.Window)}, nil
}

// Config is the Detector's configuration, defaults applied.
func (d *Detector) Config() Config { return d.cfg }

// State is the last run's state (the zero State before the first run).
// After UnmarshalBinary its comparisons are zero.
func (d *Detector) State() State { return d.last }

// History summarises the window: its length, median, MAD and 95th
// percentile. The history is a reference once N >= Config.MinHistory
// (Trusted); its Median is what the volume contributes to its cohort.
func (d *Detector) History() Stats { return summarizeSorted(d.byValue) }

// Trusted reports whether the history has enough runs to be a reference.
func (d *Detector) Trusted() bool { return len(d.ring) >= d.cfg.MinHistory }

// Reset forgets the history and the state, for an operator who accepts a
// volume's new level (a new array, a changed workload) as its normal.
func (d *Detector) Reset() {
	d.ring, d.byValue, d.head, d.held, d.last, d.streakSince = d.ring[:0], d.byValue[:0], 0, d.held[:0], State{}, time.Time{}
}

func (d *Detector) push(x float64) {
	if len(d.ring) < cap(d.ring) {
		d.ring = append(d.ring, x)
	} else {
		old := d.ring[d.head]
		d.ring[d.head] = x
		d.head = (d.head + 1) % len(d.ring)
		i, _ := slices.BinarySearch(d.byValue, old)
		d.byValue = slices.Delete(d.byValue, i, i+1)
	}
	i, _ := slices.BinarySearch(d.byValue, x)
	d.byValue = slices.Insert(d.byValue, i, x)
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
	if !valid(latency) || !d.last.Time.IsZero() && !t.After(d.last.Time) {
		return d.last
	}
	s := State{Time: t, Latency: latency}
	if d.Trusted() {
		h := d.History()
		s.History = d.compare(latency, h.Median, h.Sigma())
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
	return s
}
