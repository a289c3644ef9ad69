package baseline

import (
	"errors"
	"fmt"
	"math"
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
	// runs in a row to degrade: 6 for the tail, the mean and the rate, 5
	// for the mean when the run's median corroborates (≥ 1.25× its
	// history). With 4, 56 days of the recorded noise of internal/lab/replay
	// raised 231 p99, 469 mean and 126 rate alerts on this machine's disk;
	// with the tail at 5 (before the slow-op count took the stalls) 14,
	// nearly all p99; with these defaults 5 over both recordings, and 0 in
	// the 7-day replay (bench/tails -noise, docs/degradation.md, "Degradation: median,
	// tail, mean, rate"); an uncorroborated mean at 5 raised 24 more. 3
	// normal runs in a row to recover; at least 50 ops for the tail, 10 for
	// the mean and the rate.
	Tail, Mean, Rate SignalConfig

	// Slow is the slow-op count's constants (SignalSlow): by default the
	// last 6 runs pooled, at most 2 slow ops counted per run, beyond when
	// the pool reaches 5 and the largest pool the volume's own history
	// holds (half-life 960 runs, judged after 240) + 3, 2 beyond in a row
	// to degrade, 3 normal to recover, runs of at least 50 ops.
	Slow SlowConfig
}

// DefaultConfig is the configuration every zero field of a Config takes.
func DefaultConfig() Config {
	return Config{
		Window: 48, MinHistory: 12, MinCohort: 5,
		DegradeRatio: 1.5, DegradeZ: 3, Sustain: 4,
		RecoverRatio: 1.2, RecoverZ: 2, Recover: 3,
		MinRelativeSpread: 0.05,
		SignalWindow:      24,
		Tail:              SignalConfig{DegradeRatio: 3, RecoverRatio: 2, Sustain: 6, Within: 6, Recover: 3, MinOps: 50},
		Mean:              SignalConfig{DegradeRatio: 1.5, RecoverRatio: 1.2, Sustain: 6, Within: 6, Recover: 3, MinOps: 10, Corroborated: 5, CorroborateRatio: 1.25},
		Rate:              SignalConfig{DegradeRatio: 1.5, RecoverRatio: 1.2, Sustain: 6, Within: 6, Recover: 3, MinOps: 10, Corroborated: 5},
		Slow:              SlowConfig{Pool: 6, PerRun: 2, Floor: 5, Margin: 3, MinHistory: 240, HalfLife: 960, Sustain: 2, Recover: 3, MinOps: 50},
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
	c.Slow.fill(d.Slow)
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
	if err := c.Slow.validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// signalConfigs are the extra signals' constants in track order.
func (c *Config) signalConfigs() [numTracks]SignalConfig {
	return [numTracks]SignalConfig{c.Tail, c.Mean, c.Rate}
}
