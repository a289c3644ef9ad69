package exporter

import (
	"bytes"
	"context"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/plumbline/plumbline/internal/server/baseline"
	"github.com/plumbline/plumbline/internal/server/store"
)

// The probe series of a volume: baseline ratios, degraded and failing
// states, latency histograms, last probe, stop counts — one part per
// volume, checked after every evaluator pass and read again when its
// rows changed or MaxAge passed — and the cohorts (fleet-wide).

// basePart is a volume's baselines, probe statistics and stop counts,
// rebuilt when one of its rows changes.
type basePart struct {
	part
	built   bool
	host    string
	checked EvaluatorStatus // the evaluator's status when its rows were last checked
	readAt  time.Time       // when its rows were last read
	rows    []store.MetricsBaseline
	stops   []store.StopCount
	failing []store.ProbeFailing
	hists   map[string]*histFacts // by kind
	db      dbFacts
}

// baseJob is one volume whose baseline part is due: read again (fetch),
// or checked against the evaluator's run counts.
type baseJob struct {
	k       volKey
	p       *basePart
	host    string
	fetch   bool
	rows    []store.MetricsBaseline
	stops   []store.StopCount
	failing []store.ProbeFailing
	db      dbFacts
	rebuilt bool
	series  []*series
}

// refreshBaselines brings the baseline parts of sel's present volumes up
// to date: those the evaluator may have judged since they were checked,
// those read longer than MaxAge ago, those of a renamed host.
func (c *Collector) refreshBaselines(ctx context.Context, now time.Time, ev EvaluatorStatus, sel shardSel) error {
	jobs := c.dueBaselines(now, ev, sel)
	if len(jobs) == 0 {
		return nil
	}
	in, err := c.readBaselines(ctx, jobs, ev, now)
	if err != nil {
		return err
	}
	stops := groupMap(in.stops, func(s *store.StopCount) volKey { return volKey{s.AgentID, s.MountPoint} })
	failing := groupMap(in.failing, func(f *store.ProbeFailing) volKey { return volKey{f.AgentID, f.MountPoint} })
	for i := range jobs {
		j := &jobs[i]
		if j.fetch {
			j.rows = in.rows[j.k]
			j.p.readAt = now
		} else {
			j.rows = j.p.rows
		}
		j.stops, j.failing = stops[j.k], failing[j.k]
		j.db = in.db.of(j.k)
		j.p.checked = ev
	}
	c.buildBaselines(jobs)
	if sel.hasGlobal() {
		c.buildCohorts(in.cohorts)
	}
	return nil
}

// dueBaselines lists the parts of sel's present volumes that are due,
// creating those of new volumes.
func (c *Collector) dueBaselines(now time.Time, ev EvaluatorStatus, sel shardSel) []baseJob {
	var jobs []baseJob
	for k, pv := range c.present {
		if !sel.has(pv.hash) {
			continue
		}
		p := c.baseParts[k]
		if p == nil {
			p = &basePart{part: part{hash: pv.hash}, hists: map[string]*histFacts{}}
			c.baseParts[k] = p
		}
		expired := !p.built || now.Sub(p.readAt) >= c.opts.MaxAge || now.Before(p.readAt)
		evaluated := c.opts.Evaluator == nil || p.checked.Passes != ev.Passes || p.checked.Failures != ev.Failures
		if expired || evaluated || p.host != pv.host {
			jobs = append(jobs, baseJob{k: k, p: p, host: pv.host, fetch: expired})
		}
	}
	return jobs
}

// baseInputs is what one refresh read of the baselines.
type baseInputs struct {
	rows map[volKey][]store.MetricsBaseline // of the jobs to fetch
	passReads
}

// passReads are the whole-table reads behind the baselines — stop counts,
// failing streaks, cohorts, and each volume's count of states and sum of
// runs — which only an evaluator pass writes: the scrapes of several
// shards between two passes share them (read again after MaxAge, and on
// every scrape without an evaluator).
type passReads struct {
	ok      bool
	ev      EvaluatorStatus
	at      time.Time
	stops   []store.StopCount
	failing []store.ProbeFailing
	cohorts []store.Cohort
	db      dbReads
	runs    map[volKey]store.BaselineRuns // nil until a refresh needed them
}

// sharedReads returns the pass reads still valid for ev at now.
func (c *Collector) sharedReads(ev EvaluatorStatus, now time.Time) (passReads, bool) {
	p := c.pass
	ok := p.ok && c.opts.Evaluator != nil && p.ev.Passes == ev.Passes && p.ev.Failures == ev.Failures &&
		now.Sub(p.at) < c.opts.MaxAge && !now.Before(p.at)
	return p, ok
}

// readBaselines reads (or takes from the pass reads) the stop counts,
// failing streaks and cohorts, and reads the rows of the jobs due a fetch,
// and of those whose count of states or sum of runs moved: the evaluator
// writes a state only with a newly judged run, so these tell which volumes
// it changed (a change behind its back shows within MaxAge, when the rows
// are read again). It marks the jobs it fetched.
func (c *Collector) readBaselines(ctx context.Context, jobs []baseJob, ev EvaluatorStatus, now time.Time) (baseInputs, error) {
	pass, shared := c.sharedReads(ev, now)
	var otherErr error
	var wg sync.WaitGroup
	if !shared {
		pass = passReads{ok: true, ev: ev, at: now}
		wg.Go(func() {
			if pass.stops, otherErr = c.st.ListStopCounts(ctx); otherErr != nil {
				return
			}
			if pass.failing, otherErr = c.st.ListProbeFailing(ctx); otherErr != nil {
				return
			}
			if pass.cohorts, otherErr = c.st.ListCohorts(ctx); otherErr != nil {
				return
			}
			pass.db, otherErr = c.readDatabases(ctx)
		})
	}
	runs, err := c.markChanged(ctx, jobs, ev, pass.runs)
	var fetch []store.VolumeKey
	for _, j := range jobs {
		if j.fetch {
			fetch = append(fetch, store.VolumeKey{AgentID: j.k.agent, MountPoint: j.k.mount})
		}
	}
	var rows []store.MetricsBaseline
	switch {
	case err != nil || len(fetch) == 0:
	case len(fetch) > len(c.present)/4:
		rows, err = c.readAllBaselines(ctx) // many: one pass over the table beats a long list of keys
	default:
		rows, err = c.readBaselinesOf(ctx, fetch)
	}
	wg.Wait()
	if err == nil {
		err = otherErr
	}
	if err != nil {
		c.pass = passReads{}
		return baseInputs{}, err
	}
	pass.runs = runs
	c.pass = pass
	return baseInputs{rows: groupMap(rows, func(b *store.MetricsBaseline) volKey { return volKey{b.AgentID, b.MountPoint} }), passReads: pass}, nil
}

// markChanged marks the jobs not yet due a fetch whose count of states or
// sum of runs (from runs, or read when nil) differs from their part's
// rows, and returns the run counts. When the evaluator judged more runs
// since they were checked than a quarter of the states, most changed: it
// marks them all without asking which.
func (c *Collector) markChanged(ctx context.Context, jobs []baseJob, ev EvaluatorStatus, runs map[volKey]store.BaselineRuns) (map[volKey]store.BaselineRuns, error) {
	check := 0
	since := ev.Runs
	for _, j := range jobs {
		if !j.fetch {
			check++
			since = min(since, ev.Runs-min(j.p.checked.Runs, ev.Runs))
		}
	}
	if check == 0 {
		return runs, nil
	}
	states := 0
	for _, p := range c.baseParts {
		states += len(p.rows)
	}
	if runs == nil && c.opts.Evaluator != nil && since > uint64(states/4) {
		for i := range jobs {
			jobs[i].fetch = true
		}
		return nil, nil
	}
	if runs == nil {
		list, err := c.st.ListBaselineRuns(ctx)
		if err != nil {
			return nil, err
		}
		runs = make(map[volKey]store.BaselineRuns, len(list))
		for _, r := range list {
			runs[volKey{r.AgentID, r.MountPoint}] = r
		}
	}
	for i := range jobs {
		j := &jobs[i]
		if j.fetch {
			continue
		}
		r := runs[j.k]
		sum := uint64(0)
		for _, b := range j.p.rows {
			sum += b.Runs
		}
		j.fetch = r.States != len(j.p.rows) || r.Runs != sum
	}
	return runs, nil
}

// readAllBaselines reads every baseline row, in two halves by agent at
// once (the driver's decoding is most of the cost, and it is per row).
func (c *Collector) readAllBaselines(ctx context.Context) ([]store.MetricsBaseline, error) {
	ids := make([]string, len(c.hosts))
	for i, a := range c.hosts {
		ids[i] = a.ID
	}
	if len(ids) < 64 {
		return c.st.ListMetricsBaselines(ctx)
	}
	slices.Sort(ids)
	mid := ids[len(ids)/2] // any split is correct; the database's order need not be Go's
	return inHalves(func() ([]store.MetricsBaseline, error) { return c.st.ListMetricsBaselinesBetween(ctx, "", mid) },
		func() ([]store.MetricsBaseline, error) { return c.st.ListMetricsBaselinesBetween(ctx, mid, "") })
}

// readBaselinesOf reads the rows of some volumes, in two halves at once
// when they are many.
func (c *Collector) readBaselinesOf(ctx context.Context, keys []store.VolumeKey) ([]store.MetricsBaseline, error) {
	if len(keys) < 256 {
		return c.st.ListMetricsBaselinesOf(ctx, keys)
	}
	return inHalves(func() ([]store.MetricsBaseline, error) { return c.st.ListMetricsBaselinesOf(ctx, keys[:len(keys)/2]) },
		func() ([]store.MetricsBaseline, error) { return c.st.ListMetricsBaselinesOf(ctx, keys[len(keys)/2:]) })
}

// inHalves runs two reads at once and returns their rows, lower first.
func inHalves(lower, upper func() ([]store.MetricsBaseline, error)) ([]store.MetricsBaseline, error) {
	var up []store.MetricsBaseline
	var upErr error
	var wg sync.WaitGroup
	wg.Go(func() { up, upErr = upper() })
	low, err := lower()
	wg.Wait()
	if err == nil {
		err = upErr
	}
	if err != nil {
		return nil, err
	}
	return append(low, up...), nil
}

// groupMap maps each volume to its run of consecutive elements.
func groupMap[T any](s []T, key func(*T) volKey) map[volKey][]T {
	out := make(map[volKey][]T)
	for g := range volumeGroups(s, key) {
		out[key(&g[0])] = g
	}
	return out
}

// buildBaselines compares the due parts' rows with those they were built
// from and encodes the changed ones on every CPU (each job touches only
// its own part), then puts their series (serially: the families).
func (c *Collector) buildBaselines(jobs []baseJob) {
	do := func(jobs []baseJob) {
		for i := range jobs {
			j := &jobs[i]
			p := j.p
			same := p.built && p.host == j.host && slices.EqualFunc(p.rows, j.rows, sameBaseline) && slices.Equal(p.stops, j.stops) &&
				slices.EqualFunc(p.failing, j.failing, sameFailing) && p.db.equal(j.db)
			p.rows, p.stops, p.failing, p.db = j.rows, j.stops, j.failing, j.db // the latest read's, so older reads can be freed
			if !same {
				p.host, p.built = j.host, true
				j.rebuilt, j.series = true, c.baselineSeries(j.k, p)
			}
		}
	}
	workers := min(runtime.GOMAXPROCS(0), len(jobs)/256+1)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() { do(jobs[w*len(jobs)/workers : (w+1)*len(jobs)/workers]) })
	}
	wg.Wait()
	for i := range jobs {
		if j := &jobs[i]; j.rebuilt {
			c.rebuild(&j.p.part, j.series)
		}
	}
}

func (c *Collector) buildCohorts(cohorts []store.Cohort) {
	var volumes, median []*series
	for _, co := range cohorts {
		volumes = append(volumes, c.series(famCohortVolumes, float64(co.Volumes), co.Profile, co.Kind))
		median = append(median, c.series(famCohortMedian, co.Median, co.Profile, co.Kind))
	}
	c.set(famCohortVolumes, volumes)
	c.set(famCohortMedian, median)
}

func sameBaseline(a, b store.MetricsBaseline) bool {
	return a.AgentID == b.AgentID && a.MountPoint == b.MountPoint && a.Kind == b.Kind && a.Status == b.Status &&
		a.Reference == b.Reference && a.Since.Equal(b.Since) && a.HistoryRatio == b.HistoryRatio && a.CohortRatio == b.CohortRatio &&
		a.CohortReference == b.CohortReference && a.LastRun.Equal(b.LastRun) && a.Runs == b.Runs && bytes.Equal(a.Histogram, b.Histogram) &&
		a.Signal == b.Signal && a.TailRatio == b.TailRatio && a.MeanRatio == b.MeanRatio && a.RateRatio == b.RateRatio
}

// sameFailing: the same failing streak as far as the exposition goes.
func sameFailing(a, b store.ProbeFailing) bool {
	return a.AgentID == b.AgentID && a.MountPoint == b.MountPoint && a.Kind == b.Kind && a.Reason == b.Reason && a.Since.Equal(b.Since)
}

func (c *Collector) baselineSeries(k volKey, p *basePart) []*series {
	agent, host, mount := k.agent, p.host, k.mount
	var ss []*series
	var lastRun time.Time
	kinds := make(map[string]bool, len(p.rows))
	for _, b := range p.rows {
		if b.LastRun.After(lastRun) {
			lastRun = b.LastRun
		}
		ss = c.appendRatios(ss, agent, host, mount, b)
		kinds[b.Kind] = true
		h := p.hists[b.Kind]
		if h == nil || h.runs != b.Runs || !bytes.Equal(h.raw, b.Histogram) {
			h = c.histFactsOf(b)
			p.hists[b.Kind] = h
		}
		if h.ok {
			ss = append(ss, c.fams[famLatency].encodeHistogram(famLatency, []string{agent, host, mount, b.Kind}, c.classic, &h.nativeHist))
		}
	}
	for kind := range p.hists {
		if !kinds[kind] {
			delete(p.hists, kind)
		}
	}
	if !lastRun.IsZero() {
		ss = append(ss, c.series(famVolLastProbe, seconds(lastRun), agent, host, mount))
	}
	// Stop counts by reason (kinds summed: the budget).
	var reasons []string
	sums := map[string]uint64{}
	for _, s := range p.stops {
		if _, ok := sums[s.Reason]; !ok {
			reasons = append(reasons, s.Reason)
		}
		sums[s.Reason] += s.Runs
	}
	for _, r := range reasons {
		ss = append(ss, c.series(famStops, float64(sums[r]), agent, host, mount, r))
	}
	for _, f := range p.failing {
		ss = append(ss, c.series(famFailingSince, seconds(f.Since), agent, host, mount, f.Kind, f.Reason))
	}
	return c.appendDatabase(ss, agent, host, mount, p.db)
}

// appendRatios appends a baseline row's ratios (one per signal against the
// history, the median against the cohort or prior) and its degraded state.
func (c *Collector) appendRatios(ss []*series, agent, host, mount string, b store.MetricsBaseline) []*series {
	for _, r := range [...]struct {
		sig baseline.Signal
		v   float64
	}{{baseline.SignalMedian, b.HistoryRatio}, {baseline.SignalTail, b.TailRatio}, {baseline.SignalMean, b.MeanRatio}, {baseline.SignalRate, b.RateRatio}} {
		if r.v > 0 {
			ss = append(ss, c.series(famRatio, r.v, agent, host, mount, b.Kind, string(baseline.History), string(r.sig)))
		}
	}
	if b.CohortRatio > 0 && b.CohortReference != "" {
		ss = append(ss, c.series(famRatio, b.CohortRatio, agent, host, mount, b.Kind, b.CohortReference, string(baseline.SignalMedian)))
	}
	if b.Status == string(baseline.Degraded) {
		sig := b.Signal
		if sig == "" {
			sig = string(baseline.SignalMedian)
		}
		ss = append(ss, c.series(famDegradedSince, seconds(b.Since), agent, host, mount, b.Kind, b.Reference, sig))
	}
	return ss
}
