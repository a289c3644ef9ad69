// Package evaluator is the server's baseline loop: it reads the probe
// results the store has not judged yet, feeds each run (RunOf: its median,
// p99 and mean latency, its rate against its IOPS cap and its count of
// slow ops) to the
// baseline.Detector of its volume and probe kind — against the volume's
// history of each signal, its profile's cohort and the profile's prior
// (the median); the profile is the one the volume's judged record names —
// and persists the
// detectors, their states and cumulative probe statistics for the exporter
// and the inventory, with each volume and kind's failing streak (runs the
// agent refused or failed to start, until one does I/O again).
//
// Progress is a per-agent watermark in the store (store.PendingProbeRuns):
// a pass that fails writes nothing and the next one judges the same runs
// again, and a run is never judged twice.
package evaluator

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/plumbline/plumbline/internal/histogram"
	"github.com/plumbline/plumbline/internal/server/baseline"
	"github.com/plumbline/plumbline/internal/server/store"
	"github.com/plumbline/plumbline/internal/vocab"
	"github.com/plumbline/plumbline/internal/wire"
)

// Options configure an Evaluator. Zero fields take their defaults.
type Options struct {
	// Interval between passes (default 30s).
	Interval time.Duration
	// BatchSize is how many probe runs one store read returns (default 5000).
	BatchSize int
	// Config is the detectors' configuration (baseline.DefaultConfig).
	Config baseline.Config
	// Priors default to baseline.DefaultPriors.
	Priors *baseline.Priors
	// Database configures the judge of the databases' own latency.
	Database DatabaseOptions
	Logger   *slog.Logger
}

// Status is what the evaluator reports about itself.
type Status struct {
	LastSuccess time.Time // end of the last pass without error
	Passes      uint64    // passes completed without error
	Failures    uint64    // passes that failed
	Runs        uint64    // probe runs judged since start
}

// Store is what the evaluator reads and writes: the probe runs it has not
// judged, its detectors and their states, and the profile each volume was
// judged with.
type Store interface {
	PendingProbeRuns(ctx context.Context, limit int) ([]store.ProbeRun, error)
	ListProbeBaselines(ctx context.Context) ([]store.ProbeBaseline, error)
	ListJudgedProfiles(ctx context.Context) ([]store.JudgedProfile, error)
	SaveBaselines(ctx context.Context, u store.BaselineUpdate) error
	PutBaselineStates(ctx context.Context, states []store.BaselineState) error
}

var _ Store = (*store.Store)(nil)

// Evaluator owns the detectors. Pass and Run must not be called concurrently.
type Evaluator struct {
	st     Store
	opts   Options
	priors *baseline.Priors

	loaded   bool
	entries  map[key]*entry
	profiles map[volKey]profileAt
	// rebuilds are the volumes whose latest run was made during a rebuild
	// (rebuild.go); rebuildsTouched those whose rebuild changed.
	rebuilds        map[volKey]rebuildAt
	rebuildsTouched map[volKey]bool
	db              databases
	// busy is when the busy guard last skipped a run of each volume and
	// kind (in memory: the attribution's witness that the device was too
	// busy for the probe; a restart forgets it until the next skip).
	busy map[key]time.Time
	// devices is what the busy guard saw of each volume's device (device.go).
	devices map[volKey]*deviceWitness

	mu     sync.Mutex
	status Status
}

type volKey struct{ agent, mount string }

type key struct {
	volKey
	kind string
}

// entry is one volume and kind: its detector and what is persisted with it.
type entry struct {
	det   *baseline.Detector
	row   store.ProbeBaseline
	hist  *histogram.Histogram
	dirty bool
	// device is the history of the device's rate before the kind's runs
	// (ProbeResult.busy_io; device.go).
	device rateHistory
}

// New returns an Evaluator over st. It loads the priors (once) but reads
// nothing from the store until the first pass.
func New(st Store, opts Options) (*Evaluator, error) {
	if opts.Interval <= 0 {
		opts.Interval = 30 * time.Second
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = 5000
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if _, err := baseline.NewDetector(opts.Config); err != nil {
		return nil, fmt.Errorf("evaluator: %w", err)
	}
	p := opts.Priors
	if p == nil {
		var err error
		if p, err = baseline.DefaultPriors(); err != nil {
			return nil, fmt.Errorf("evaluator: %w", err)
		}
	}
	return &Evaluator{st: st, opts: opts, priors: p, entries: map[key]*entry{}, profiles: map[volKey]profileAt{}}, nil
}

// Status returns the evaluator's counters. It is safe to call concurrently
// with Run.
func (e *Evaluator) Status() Status {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.status
}

// Run passes at once and then every Interval until ctx is cancelled; a
// failed pass is logged and retried at the next tick. It returns ctx's error.
func (e *Evaluator) Run(ctx context.Context) error {
	t := time.NewTicker(e.opts.Interval)
	defer t.Stop()
	for {
		n, err := e.Pass(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			e.opts.Logger.Error("baseline pass failed", "err", err)
		case n > 0:
			e.opts.Logger.Debug("baseline pass", "runs", n)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Pass judges every probe run that is pending and returns how many it judged.
func (e *Evaluator) Pass(ctx context.Context) (int, error) {
	n, err := e.pass(ctx)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.status.Runs += uint64(n)
	if err != nil {
		e.status.Failures++
		return n, err
	}
	e.status.Passes++
	e.status.LastSuccess = time.Now()
	return n, nil
}

func (e *Evaluator) pass(ctx context.Context) (int, error) {
	n, err := e.passProbes(ctx)
	if err != nil {
		return n, err
	}
	return n, e.passDatabases(ctx)
}

func (e *Evaluator) passProbes(ctx context.Context) (int, error) {
	if !e.loaded {
		if err := e.load(ctx); err != nil {
			e.entries = map[key]*entry{}
			return 0, err
		}
		e.loaded = true
	}
	if err := e.refreshProfiles(ctx); err != nil {
		return 0, err
	}
	total := 0
	for {
		runs, err := e.st.PendingProbeRuns(ctx, e.opts.BatchSize)
		if err != nil {
			return total, err
		}
		if len(runs) == 0 {
			return total, nil
		}
		if err := e.judge(ctx, runs); err != nil {
			// The store is unchanged: forget the in-memory detectors and
			// reload them from the store next time.
			e.loaded = false
			e.entries = map[key]*entry{}
			return total, err
		}
		total += len(runs)
		if len(runs) < e.opts.BatchSize {
			return total, nil
		}
	}
}

func (e *Evaluator) load(ctx context.Context) error {
	rows, err := e.st.ListProbeBaselines(ctx)
	if err != nil {
		return err
	}
	for _, r := range rows {
		d, _ := baseline.NewDetector(e.opts.Config)
		if err := d.UnmarshalBinary(r.Detector); err != nil {
			// A state this version cannot read starts over rather than
			// stopping every other volume's evaluation.
			e.opts.Logger.Warn("baseline state unreadable; starting over", "agent", r.AgentID, "mount_point", r.MountPoint, "kind", r.Kind, "err", err)
			d, _ = baseline.NewDetector(e.opts.Config)
		}
		h := &histogram.Histogram{}
		if len(r.Histogram) > 0 {
			if hh, err := wire.DecodeHistogram(r.Histogram); err == nil {
				h = hh
			}
		}
		en := &entry{det: d, row: r, hist: h}
		if err := en.device.UnmarshalBinary(r.DeviceHistory); err != nil {
			e.opts.Logger.Warn("device history unreadable; starting over", "agent", r.AgentID, "mount_point", r.MountPoint, "kind", r.Kind, "err", err)
		}
		e.entries[key{volKey{r.AgentID, r.MountPoint}, r.Kind}] = en
	}
	return nil
}

func (e *Evaluator) judge(ctx context.Context, runs []store.ProbeRun) error {
	minCohort := e.entryConfig().MinCohort
	cohorts := e.cohorts()
	u := store.BaselineUpdate{Watermarks: map[string]uint64{}}
	t := newTally()
	for i := range runs {
		r := &runs[i]
		u.Watermarks[r.AgentID] = max(u.Watermarks[r.AgentID], r.Sequence)
		t.count(r)
		e.noteRebuild(r)
		e.noteBusy(r)
		if r.Skipped || r.Ops == 0 || !vocab.IsJudged(vocab.ProbeKind(r.Kind)) {
			continue
		}
		h, err := wire.DecodeHistogram(r.Histogram)
		if err != nil || h.Count() == 0 {
			e.opts.Logger.Warn("probe result without a usable histogram", "agent", r.AgentID, "sequence", r.Sequence, "err", err)
			continue
		}
		if e.rebuildRun(r, h) {
			continue
		}
		e.observe(r, h, cohorts, minCohort)
	}
	dirty, err := e.dirtyStates(&u)
	if err != nil {
		return err
	}
	t.into(&u)
	u.Cohorts = []store.Cohort{}
	for ck, c := range e.cohorts() {
		u.Cohorts = append(u.Cohorts, store.Cohort{Profile: ck.profile, Kind: ck.kind, Volumes: c.N, Median: c.Median, MAD: c.MAD})
	}
	if err := e.st.SaveBaselines(ctx, u); err != nil {
		return err
	}
	for _, en := range dirty {
		en.dirty = false
	}
	// The inventory's per-volume summary (its degraded filter): best effort,
	// the evaluator's own state is already saved.
	if err := e.st.PutBaselineStates(ctx, e.volumeSummaries(dirty)); err != nil {
		e.opts.Logger.Warn("inventory baseline states", "err", err)
	}
	return nil
}

// tally is what a batch of runs says besides their latencies: stop
// reasons counted per volume and kind, failing streaks started or
// extended, and streaks ended.
type tally struct {
	stops     map[store.StopCount]uint64
	failing   map[store.ProbeKey]*store.ProbeFailing
	recovered map[store.ProbeKey]bool
}

func newTally() *tally {
	return &tally{stops: map[store.StopCount]uint64{}, failing: map[store.ProbeKey]*store.ProbeFailing{}, recovered: map[store.ProbeKey]bool{}}
}

// count notes one run. A refused or failed run starts or extends the
// volume's failing streak for the kind; a run that did I/O ends it. Skips
// (busy, lock-timeout) neither prove nor disprove anything.
func (t *tally) count(r *store.ProbeRun) {
	if r.Skipped || r.StoppedReason != "" {
		reason := r.StoppedReason
		if reason == "" {
			reason = "skipped"
		}
		t.stops[store.StopCount{AgentID: r.AgentID, MountPoint: r.MountPoint, Kind: r.Kind, Reason: reason}]++
	}
	pk := store.ProbeKey{AgentID: r.AgentID, MountPoint: r.MountPoint, Kind: r.Kind}
	switch {
	case r.StoppedReason == vocab.StopRefused || r.StoppedReason == vocab.StopFailed:
		f := t.failing[pk]
		if f == nil {
			f = &store.ProbeFailing{AgentID: r.AgentID, MountPoint: r.MountPoint, Kind: r.Kind, Since: r.StartedAt}
			t.failing[pk] = f
		}
		f.Reason, f.Failure, f.Last = r.StoppedReason, r.Failure, r.StartedAt
		f.Runs++
	case r.Ops > 0:
		delete(t.failing, pk)
		t.recovered[pk] = true
	}
}

// into adds the tally to u, each list in a stable order.
func (t *tally) into(u *store.BaselineUpdate) {
	for c, n := range t.stops {
		c.Runs = n
		u.StopCounts = append(u.StopCounts, c)
	}
	slices.SortFunc(u.StopCounts, func(a, b store.StopCount) int {
		return strings.Compare(a.AgentID+a.MountPoint+a.Kind+a.Reason, b.AgentID+b.MountPoint+b.Kind+b.Reason)
	})
	for k := range t.recovered {
		u.Recovered = append(u.Recovered, k)
	}
	slices.SortFunc(u.Recovered, func(a, b store.ProbeKey) int {
		return compareKey(a.AgentID, a.MountPoint, a.Kind, b.AgentID, b.MountPoint, b.Kind)
	})
	for _, f := range t.failing {
		u.Failing = append(u.Failing, *f)
	}
	slices.SortFunc(u.Failing, func(a, b store.ProbeFailing) int {
		return compareKey(a.AgentID, a.MountPoint, a.Kind, b.AgentID, b.MountPoint, b.Kind)
	})
}

// compareKey orders volumes and kinds by agent, mount point, kind.
func compareKey(agentA, mountA, kindA, agentB, mountB, kindB string) int {
	return strings.Compare(agentA+"\x00"+mountA+"\x00"+kindA, agentB+"\x00"+mountB+"\x00"+kindB)
}

// observe feeds one run with a usable histogram to its volume and kind's
// detector and updates the row persisted with it.
func (e *Evaluator) observe(r *store.ProbeRun, h *histogram.Histogram, cohorts map[cohortKey]baseline.Stats, minCohort int) {
	k := key{volKey{r.AgentID, r.MountPoint}, r.Kind}
	en := e.entries[k]
	if en == nil {
		d, _ := baseline.NewDetector(e.opts.Config)
		en = &entry{det: d, hist: &histogram.Histogram{}, row: store.ProbeBaseline{AgentID: r.AgentID, MountPoint: r.MountPoint, Kind: r.Kind}}
		e.entries[k] = en
	}
	var refs baseline.Refs
	if p, ok := e.profiles[k.volKey]; ok && p.ok {
		en.row.Profile = p.profile.Key()
		if c := cohorts[cohortKey{en.row.Profile, r.Kind}]; c.N >= minCohort {
			refs.Cohort = c
		}
		if x, err := e.priors.Expect(p.profile, baseline.Kind(r.Kind)); err == nil {
			refs.Prior = x.Band
		}
	}
	// The volume's cumulative latency histogram: a run that would make
	// it overflow (forged latencies; honest runs need 292 years of
	// latency) is left out of it, said aloud, and the histogram stays
	// valid — exposed as before rather than dropped from /metrics.
	if err := en.hist.Merge(h); err != nil {
		e.opts.Logger.Warn("probe run left out of the volume's latency histogram", "agent", r.AgentID, "mount_point", r.MountPoint,
			"kind", r.Kind, "sequence", r.Sequence, "err", err)
		return
	}
	en.det.ObserveRun(r.StartedAt, RunOf(r, h), refs)
	en.row.Runs++
	if r.StartedAt.After(en.row.LastRun) {
		en.row.LastRun = r.StartedAt
	}
	en.setState(en.det.State())
	en.dirty = true
}

// setState copies the detector's state into the persisted row.
func (en *entry) setState(s baseline.State) {
	en.row.Status, en.row.Reference, en.row.Ratio, en.row.Since = string(s.Status), string(s.Reference), s.Ratio, s.Since
	en.row.Signal, en.row.Detail = string(s.Signal), ""
	if s.Status == baseline.Degraded {
		en.row.Detail = s.Detail()
	}
	en.row.TailRatio = en.det.Of(baseline.SignalTail).History.Ratio
	en.row.MeanRatio = en.det.Of(baseline.SignalMean).History.Ratio
	en.row.RateRatio = en.det.Of(baseline.SignalRate).History.Ratio
	en.row.HistoryRatio, en.row.CohortRatio, en.row.CohortReference = 0, 0, ""
	if s.History.Available() {
		en.row.HistoryRatio = s.History.Ratio
	}
	switch {
	case s.Cohort.Available():
		en.row.CohortRatio, en.row.CohortReference = s.Cohort.Ratio, string(baseline.Cohort)
	case s.Prior.Available():
		en.row.CohortRatio, en.row.CohortReference = s.Prior.Ratio, string(baseline.Prior)
	}
	en.row.Trusted = en.det.Trusted()
	en.row.HistoryMedian = en.det.History().Median
}

// dirtyStates serialises every entry a run changed into u.States (in a
// stable order) and returns those entries.
func (e *Evaluator) dirtyStates(u *store.BaselineUpdate) ([]*entry, error) {
	var dirty []*entry
	for _, en := range e.entries {
		if !en.dirty {
			continue
		}
		b, err := en.det.MarshalBinary()
		if err != nil {
			return nil, err
		}
		hb, err := wire.EncodeHistogram(en.hist)
		if err != nil {
			return nil, err
		}
		en.row.Detector, en.row.Histogram = b, hb
		if en.row.DeviceHistory, err = en.device.MarshalBinary(); err != nil {
			return nil, err
		}
		u.States = append(u.States, en.row)
		dirty = append(dirty, en)
	}
	slices.SortFunc(u.States, func(a, b store.ProbeBaseline) int {
		return compareKey(a.AgentID, a.MountPoint, a.Kind, b.AgentID, b.MountPoint, b.Kind)
	})
	return dirty, nil
}

func (e *Evaluator) entryConfig() baseline.Config {
	d, _ := baseline.NewDetector(e.opts.Config)
	return d.Config()
}

// volumeSummaries folds the kinds of each volume touched into one
// inventory state: degraded when any kind is, else ok when any is, else
// learning.
func (e *Evaluator) volumeSummaries(touched []*entry) []store.BaselineState {
	vols := map[volKey]bool{}
	for _, en := range touched {
		vols[volKey{en.row.AgentID, en.row.MountPoint}] = true
	}
	e.addRebuildVolumes(vols)
	now := time.Now()
	out := make([]store.BaselineState, 0, len(vols))
	for vk := range vols {
		st := store.BaselineState{AgentID: vk.agent, MountPoint: vk.mount, State: string(baseline.Learning), UpdatedAt: now}
		var reasons []string
		for _, kind := range baseline.Kinds() {
			en := e.entries[key{vk, string(kind)}]
			if en == nil {
				continue
			}
			switch baseline.Status(en.row.Status) {
			case baseline.Degraded:
				st.State, st.Degraded = string(baseline.Degraded), true
				detail := en.row.Detail
				if detail == "" {
					detail = fmt.Sprintf("%.2f× %s", en.row.Ratio, en.row.Reference)
				}
				reasons = append(reasons, fmt.Sprintf("%s %s since %s", kind, detail, en.row.Since.UTC().Format(time.RFC3339)))
			case baseline.OK:
				if !st.Degraded {
					st.State = string(baseline.OK)
				}
			}
		}
		st.Reason = strings.Join(reasons, "; ")
		if st.Degraded {
			st.Reason += e.databaseNote(vk)
		}
		e.withRebuild(&st, vk)
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b store.BaselineState) int {
		return strings.Compare(a.AgentID+"\x00"+a.MountPoint, b.AgentID+"\x00"+b.MountPoint)
	})
	return out
}

// RunOf is what the detector judges of one probe run: the histogram's
// median, p99 and exact mean (histogram.Quantile, the rule the API and the
// agent's probe command show too), its op count, its slow ops (those in
// buckets at least baseline.SlowFactor × its median: histogram.CountOver),
// and — for a run that went its whole course or was cut by its time limit
// (not one stopped because the device was busy or a latency ceiling) and
// ran under an IOPS cap — the rate it achieved (ops over the measured
// duration) against that cap.
func RunOf(r *store.ProbeRun, h *histogram.Histogram) baseline.Run {
	med := h.Median()
	run := baseline.Run{Median: med, P99: h.Quantile(0.99), Mean: h.Mean().Seconds(), Ops: int(min(h.Count(), 1<<31-1))}
	if med > 0 {
		run.Slow = int(min(h.CountOver(baseline.SlowFactor*med), 1<<31-1))
	}
	if r.IOPSCap > 0 && r.Duration > 0 && (r.StoppedReason == "" || r.StoppedReason == vocab.StopMaxDuration) {
		run.IOPS, run.Cap = float64(r.Ops)/r.Duration.Seconds(), r.IOPSCap
	}
	return run
}
