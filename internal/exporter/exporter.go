// Package exporter is the server's Prometheus exposition over a store
// snapshot. Families are described once; metrics are built from what the
// store holds (the volumes' geometry and verdicts, the evaluator's
// baselines, the agents' last reports), so the exposition is the same on
// every server replica.
//
// A scrape of 10,000 volumes is ~280,000 series, so each series is
// encoded once per change, in both formats (text lines, and the
// io.prometheus.client.Metric message with the native histogram buckets),
// straight from the store's rows into bytes — no dto objects — and kept
// with its sort key; a family's body is its series in key order, the
// order the client library's registry gives. Every scrape reads the
// agents (cheap). The volumes' sequences are read when an agent wrote
// since (ingest moves its last-seen time in the same transaction), and
// the volumes themselves when one moved; after an evaluator pass, each
// volume's count of baseline states and sum of runs tell which volumes it
// judged, and only their rows are read again; everything is read at least
// every MaxAge. Only the volumes whose rows changed are encoded again. A
// scrape that finds nothing changed is a copy of the cached body (text
// or, when Prometheus asks for it, delimited protobuf; gzip when
// accepted). Tests hold the text to expfmt's encoding and the protobuf to
// proto.Marshal's, byte for byte, and the registry's consistency checks
// to Gather.
//
// Every per-volume metric carries host and mount_point. With default
// settings a volume costs at most 80 series (63 of them its three latency
// histograms' classic buckets): see README's metrics reference and
// TestSeriesPerVolume.
package exporter

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"math"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"google.golang.org/protobuf/encoding/protodelim"
	"google.golang.org/protobuf/proto"

	"github.com/plumbline/plumbline/internal/baseline"
	"github.com/plumbline/plumbline/internal/histogram"
	"github.com/plumbline/plumbline/internal/store"
	"github.com/plumbline/plumbline/internal/wire"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// DefaultClassicBuckets returns the classic bucket bounds of the probe
// latency histograms (seconds): the powers of two from 2^-14 ≈ 61 µs (below
// it only cache hits and the fastest flash) to 2^3 = 8 s (beyond is a stalled
// device; +Inf counts it), 18 bounds, so a heatmap of the classic buckets
// shows where a distribution sits within a factor of two: NVMe reads
// (~100 µs), SSD (~200 µs), synced log writes (0.1–5 ms), a rotating disk's
// random I/O (4–15 ms), queueing beyond. They are bounds of the schema-3 native
// buckets, so each classic count is exact. A histogram costs 21 series
// (18 bounds, +Inf, _sum, _count): a volume with three probe kinds 63. The
// native buckets (~9% wide, one series per histogram in Prometheus) carry
// the full distribution, and _sum/_count the exact mean.
func DefaultClassicBuckets() []float64 {
	b := make([]float64, 0, 18)
	for e := -14; e <= 3; e++ {
		b = append(b, math.Ldexp(1, e))
	}
	return b
}

// EvaluatorStatus is what the exporter shows about the baseline evaluator.
// Passes and Failures count finished passes: when either moves, the
// baselines are read again.
type EvaluatorStatus struct {
	LastSuccess time.Time
	Passes      uint64
	Runs        uint64
	Failures    uint64
}

// Options configure a Collector. Zero fields take their defaults.
type Options struct {
	// ClassicBuckets are the classic bucket upper bounds in seconds,
	// ascending, each a schema-3 bucket bound (2^(i/8)); default
	// DefaultClassicBuckets().
	ClassicBuckets []float64
	// AgentStaleAfter is how long after its last report an agent counts as
	// down (default 5m).
	AgentStaleAfter time.Duration
	// RecordCountsEvery bounds how often the records table is counted for
	// plumbline_ingest_records_total (default 1m).
	RecordCountsEvery time.Duration
	// Evaluator, when set, is asked for the evaluator's status on every
	// scrape; the baselines are read again only when its pass counts moved
	// (or MaxAge passed). Without it they are read on every scrape.
	Evaluator func() EvaluatorStatus
	// MaxAge bounds how long a read of the volumes and baselines is
	// reused when nothing signalled a change (default 30s; the server
	// passes its evaluator interval).
	MaxAge time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Timeout bounds the store reads of one scrape (default 20s).
	Timeout time.Duration
	Logger  *slog.Logger
}

// Collector builds the exposition of the whole server and serves it.
type Collector struct {
	st      *store.Store
	opts    Options
	fams    [numFamilies]family
	classic classicBounds // opts.ClassicBuckets, formatted once

	mu  sync.Mutex // held by the scrape that refreshes; the others wait and share its result
	gen uint64     // refreshes so far

	// Inputs of the last build.
	hosts     []store.Agent
	seqs      []store.VolumeSequence
	vols      []store.Volume
	volsOK    bool
	baselines []store.MetricsBaseline
	stops     []store.StopCount
	failing   []store.ProbeFailing
	cohorts   []store.Cohort
	baseOK    bool
	baseGen   EvaluatorStatus
	readAt    time.Time         // when the volumes and baselines were both last read
	present   map[volKey]string // present volumes: their host name
	volParts  map[volKey]*volPart
	baseParts map[volKey]*basePart
	counts    map[store.RecordKind]uint64
	countedAt time.Time

	// Outputs: each family's series and encodings, and the whole bodies
	// of the current version by format.
	out    [numFamilies]famState
	bodies map[bodyKey][]byte
}

// volPart is a volume's identity, geometry and findings, rebuilt when its
// row changes.
type volPart struct {
	part
	gen   uint64
	vol   store.Volume
	facts volumeFacts
}

// basePart is a volume's baselines, probe statistics and stop counts,
// rebuilt when one of its rows changes.
type basePart struct {
	part
	gen     uint64
	built   bool
	host    string
	rows    []store.MetricsBaseline
	stops   []store.StopCount
	failing []store.ProbeFailing
	hists   map[string]*histFacts // by kind
}

type bodyKey struct{ protobuf, gzip bool }

type volKey struct{ agent, mount string }

// New returns a Collector over st.
func New(st *store.Store, opts Options) (*Collector, error) {
	if opts.ClassicBuckets == nil {
		opts.ClassicBuckets = DefaultClassicBuckets()
	}
	for i, b := range opts.ClassicBuckets {
		if !(b > 0) || math.IsInf(b, 0) || histogram.UpperBound(histogram.Index(b)) != b {
			return nil, fmt.Errorf("exporter: classic bucket %g: want a schema-3 bucket bound 2^(i/8)", b)
		}
		if i > 0 && b <= opts.ClassicBuckets[i-1] {
			return nil, fmt.Errorf("exporter: classic buckets must ascend (%g after %g)", b, opts.ClassicBuckets[i-1])
		}
	}
	if opts.AgentStaleAfter <= 0 {
		opts.AgentStaleAfter = 5 * time.Minute
	}
	if opts.RecordCountsEvery <= 0 {
		opts.RecordCountsEvery = time.Minute
	}
	if opts.MaxAge <= 0 {
		opts.MaxAge = 30 * time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 20 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Collector{st: st, opts: opts, fams: newFamilies(), classic: newClassicBounds(opts.ClassicBuckets),
		volParts: map[volKey]*volPart{}, baseParts: map[volKey]*basePart{}}, nil
}

// Handler serves c's exposition on GET /metrics.
func Handler(c *Collector) (http.Handler, error) { return c, nil }

// Invalidate makes the next scrape read the volumes and baselines again.
func (c *Collector) Invalidate() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.volsOK, c.baseOK = false, false
}

// Gather returns the current metric families, in name order (it
// implements prometheus.Gatherer): the protobuf exposition decoded, so
// exactly what a scrape gets.
func (c *Collector) Gather() ([]*dto.MetricFamily, error) {
	c.mu.Lock()
	c.refresh()
	body, err := c.body(bodyKey{protobuf: true})
	c.mu.Unlock()
	if err != nil {
		return nil, err
	}
	var out []*dto.MetricFamily
	r := bufio.NewReader(bytes.NewReader(body))
	for {
		mf := &dto.MetricFamily{}
		if err := protodelim.UnmarshalFrom(r, mf); err == io.EOF {
			return out, nil
		} else if err != nil {
			return nil, fmt.Errorf("decode exposition: %w", err)
		}
		out = append(out, mf)
	}
}

// ServeHTTP serves the exposition: delimited protobuf when the scraper
// asks for it (Prometheus does to ingest native histograms), text
// otherwise; gzip when accepted.
func (c *Collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	format := expfmt.Negotiate(r.Header)
	key := bodyKey{protobuf: format.FormatType() == expfmt.TypeProtoDelim, gzip: acceptsGzip(r.Header.Get("Accept-Encoding"))}
	if !key.protobuf {
		format = expfmt.NewFormat(expfmt.TypeTextPlain)
	}
	c.mu.Lock()
	c.refresh()
	body, err := c.body(key)
	c.mu.Unlock()
	if err != nil {
		c.opts.Logger.Error("encode metrics", "err", err)
		http.Error(w, "encode metrics: "+err.Error(), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", string(format))
	h.Set("Content-Length", strconv.Itoa(len(body)))
	if key.gzip {
		h.Set("Content-Encoding", "gzip")
	}
	h.Add("Vary", "Accept-Encoding")
	w.Write(body)
}

func acceptsGzip(header string) bool {
	for part := range strings.SplitSeq(header, ",") {
		coding, params, _ := strings.Cut(part, ";")
		if strings.TrimSpace(coding) != "gzip" {
			continue
		}
		if q, ok := strings.CutPrefix(strings.TrimSpace(params), "q="); ok {
			if v, err := strconv.ParseFloat(strings.TrimSpace(q), 64); err == nil && v == 0 {
				return false
			}
		}
		return true
	}
	return false
}

// body returns the whole body of the current version in one format,
// building it on first use. Bodies are never modified once built.
func (c *Collector) body(key bodyKey) ([]byte, error) {
	if b, ok := c.bodies[key]; ok {
		return b, nil
	}
	n := 0
	for i := range c.out {
		size, _ := c.out[i].size(&c.fams[i], key.protobuf)
		n += size
	}
	raw := make([]byte, 0, n)
	for i := range c.out {
		raw = c.out[i].appendTo(raw, &c.fams[i], key.protobuf)
	}
	b := raw
	if key.gzip {
		var buf bytes.Buffer
		buf.Grow(len(raw) / 8)
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
		zw.Write(raw)
		if err := zw.Close(); err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		b = buf.Bytes()
	}
	if c.bodies == nil {
		c.bodies = map[bodyKey][]byte{}
	}
	c.bodies[key] = b
	return b, nil
}

// refresh brings c.out up to date with the store; c.mu is held. A failed
// read leaves only the evaluator's families and
// plumbline_exporter_store_success 0, and the next scrape reads all again.
func (c *Collector) refresh() {
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.Timeout)
	defer cancel()
	now := c.opts.Now()
	c.gen++
	var ev EvaluatorStatus
	var last, runs, failures []*series
	if f := c.opts.Evaluator; f != nil {
		ev = f()
		if !ev.LastSuccess.IsZero() {
			last = append(last, c.series(famEvalLast, seconds(ev.LastSuccess)))
		}
		runs = append(runs, c.series(famEvalRuns, float64(ev.Runs)))
		failures = append(failures, c.series(famEvalFailures, float64(ev.Failures)))
	}
	c.set(famEvalLast, last)
	c.set(famEvalRuns, runs)
	c.set(famEvalFailures, failures)
	rebuildVol, rebuildBase, err := c.read(ctx, now, ev)
	if err != nil {
		c.opts.Logger.Error("metrics snapshot", "err", err)
		c.hosts, c.seqs, c.vols, c.volsOK, c.baseOK, c.present = nil, nil, nil, false, false, nil
		c.baselines, c.stops, c.failing, c.cohorts = nil, nil, nil, nil
		c.volParts, c.baseParts = map[volKey]*volPart{}, map[volKey]*basePart{}
		for i := range c.out {
			switch i {
			case famEvalLast, famEvalRuns, famEvalFailures:
			default:
				c.out[i].reset() // absent
			}
		}
		c.set(famStoreSuccess, []*series{c.series(famStoreSuccess, 0)})
		c.publish()
		return
	}
	c.set(famStoreSuccess, []*series{c.series(famStoreSuccess, 1)})
	c.buildAgents(now)
	if rebuildVol {
		c.buildVolumes()
	}
	if rebuildVol || rebuildBase {
		c.buildBaselines()
	}
	c.publish()
}

// read reads the store: the agents and (when due) the record counts every
// time; the volumes' sequences when an agent wrote since the last read,
// and the volumes themselves when one moved; the baselines when the
// evaluator finished a pass since; both at least every MaxAge.
func (c *Collector) read(ctx context.Context, now time.Time, ev EvaluatorStatus) (rebuildVol, rebuildBase bool, err error) {
	hosts, err := c.st.ListHosts(ctx)
	if err != nil {
		return false, false, err
	}
	if c.counts == nil || now.Sub(c.countedAt) >= c.opts.RecordCountsEvery || now.Before(c.countedAt) {
		counts, err := c.st.RecordCounts(ctx)
		if err != nil {
			return false, false, err
		}
		c.counts, c.countedAt = counts, now
	}
	expired := now.Sub(c.readAt) >= c.opts.MaxAge || now.Before(c.readAt)
	renamed := !slices.EqualFunc(hosts, c.hosts, func(a, b store.Agent) bool { return a.ID == b.ID && a.Hostname == b.Hostname })
	ingested := renamed || !slices.EqualFunc(hosts, c.hosts, func(a, b store.Agent) bool { return a.LastSeen.Equal(b.LastSeen) })
	c.hosts = hosts
	if !c.volsOK || expired || ingested {
		seqs, err := c.st.ListVolumeSequences(ctx)
		if err != nil {
			return false, false, err
		}
		if !c.volsOK || renamed || !slices.Equal(seqs, c.seqs) {
			vols, err := c.st.ListVolumes(ctx)
			if err != nil {
				return false, false, err
			}
			c.vols, rebuildVol = vols, true
		}
		c.seqs, c.volsOK = seqs, true
	}
	evaluated := c.opts.Evaluator == nil || ev.Passes != c.baseGen.Passes || ev.Failures != c.baseGen.Failures
	if !c.baseOK || expired || evaluated {
		// The stop counts and cohorts while the baselines are read.
		var stops []store.StopCount
		var failing []store.ProbeFailing
		var cohorts []store.Cohort
		var stopsErr error
		var wg sync.WaitGroup
		wg.Go(func() {
			if stops, stopsErr = c.st.ListStopCounts(ctx); stopsErr == nil {
				if failing, stopsErr = c.st.ListProbeFailing(ctx); stopsErr == nil {
					cohorts, stopsErr = c.st.ListCohorts(ctx)
				}
			}
		})
		var baselines []store.MetricsBaseline
		// The runs judged since the last read bound the rows that changed:
		// when they are many, read them all without asking which.
		judged := ev.Runs - min(c.baseGen.Runs, ev.Runs)
		if !c.baseOK || expired || judged > uint64(len(c.baselines)/4) {
			baselines, err = c.readAllBaselines(ctx)
		} else {
			baselines, err = c.readChangedBaselines(ctx)
		}
		wg.Wait()
		if err == nil {
			err = stopsErr
		}
		if err != nil {
			return false, false, err
		}
		c.baselines, c.stops, c.failing, c.cohorts = baselines, stops, failing, cohorts
		c.baseGen, c.baseOK, rebuildBase = ev, true, true
	}
	if expired {
		c.readAt = now
	}
	return rebuildVol, rebuildBase, nil
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
	var upper []store.MetricsBaseline
	var upperErr error
	var wg sync.WaitGroup
	wg.Go(func() { upper, upperErr = c.st.ListMetricsBaselinesBetween(ctx, mid, "") })
	lower, err := c.st.ListMetricsBaselinesBetween(ctx, "", mid)
	wg.Wait()
	if err == nil {
		err = upperErr
	}
	if err != nil {
		return nil, err
	}
	return append(lower, upper...), nil
}

// readChangedBaselines returns the baselines as ListMetricsBaselines
// would, reading again only the rows of volumes an evaluator pass changed:
// the evaluator writes a state only with a newly judged run, so each
// volume's count of states and sum of runs tell which (a change behind its back shows within MaxAge, when
// everything is read again). When many volumes changed, it reads all.
func (c *Collector) readChangedBaselines(ctx context.Context) ([]store.MetricsBaseline, error) {
	runs, err := c.st.ListBaselineRuns(ctx)
	if err != nil {
		return nil, err
	}
	old := make(map[volKey][]store.MetricsBaseline, len(c.baselines)/3+1)
	for rows := range volumeGroups(c.baselines, func(b *store.MetricsBaseline) volKey { return volKey{b.AgentID, b.MountPoint} }) {
		old[volKey{rows[0].AgentID, rows[0].MountPoint}] = rows
	}
	var changed []store.VolumeKey
	for _, r := range runs {
		rows := old[volKey{r.AgentID, r.MountPoint}]
		sum := uint64(0)
		for _, b := range rows {
			sum += b.Runs
		}
		if len(rows) != r.States || sum != r.Runs {
			changed = append(changed, store.VolumeKey{AgentID: r.AgentID, MountPoint: r.MountPoint})
		}
	}
	if len(changed) == 0 {
		return c.baselines, nil
	}
	if len(changed) > len(runs)/4 {
		return c.readAllBaselines(ctx)
	}
	fetched, err := c.st.ListMetricsBaselinesOf(ctx, changed)
	if err != nil {
		return nil, err
	}
	for rows := range volumeGroups(fetched, func(b *store.MetricsBaseline) volKey { return volKey{b.AgentID, b.MountPoint} }) {
		old[volKey{rows[0].AgentID, rows[0].MountPoint}] = rows
	}
	for _, k := range changed {
		if _, ok := old[volKey{k.AgentID, k.MountPoint}]; !ok {
			old[volKey{k.AgentID, k.MountPoint}] = nil // gone since the run counts were read
		}
	}
	out := make([]store.MetricsBaseline, 0, len(c.baselines)+len(fetched))
	for _, r := range runs {
		out = append(out, old[volKey{r.AgentID, r.MountPoint}]...)
	}
	return out, nil
}

// volumeGroups yields the runs of consecutive elements of one volume.
func volumeGroups[T any](s []T, key func(*T) volKey) iter.Seq[[]T] {
	return func(yield func([]T) bool) {
		for i := 0; i < len(s); {
			k := key(&s[i])
			j := i + 1
			for j < len(s) && key(&s[j]) == k {
				j++
			}
			if !yield(s[i:j:j]) {
				return
			}
			i = j
		}
	}
}

// sameVolume: the same row of a present volume as far as the exposition
// goes (a volume's row changes only with its sequence).
func sameVolume(a, b store.Volume) bool {
	return a.AgentID == b.AgentID && a.Hostname == b.Hostname && a.MountPoint == b.MountPoint && a.Sequence == b.Sequence
}

// publish puts the families' series in order and, when any family
// changed, drops the cached bodies.
func (c *Collector) publish() {
	for i := range c.out {
		if c.out[i].update() {
			c.bodies = nil
		}
	}
}

// series encodes one gauge or counter of family fam with value v; values
// are in the family's declared label order.
func (c *Collector) series(fam int, v float64, values ...string) *series {
	return c.fams[fam].encodeSeries(fam, values, v)
}

// set makes ss the only series of a family-wide family.
func (c *Collector) set(fam int, ss []*series) { c.out[fam].replace(ss, c.gen) }

// rebuild makes ss the series part p contributes, dropping those it no
// longer does.
func (c *Collector) rebuild(p *part, ss []*series) {
	for i, s := range ss {
		if i < len(p.series) {
			// Most often the same series as last time, at the same place:
			// no need to look it up.
			if old := p.series[i]; !old.dead && old.owner == p && old.fam == s.fam && old.key == s.key {
				c.out[s.fam].replaceBytes(old, s)
				old.gen, ss[i] = c.gen, old
				continue
			}
		}
		ss[i] = c.out[s.fam].put(s, p, c.gen)
	}
	c.sweep(p)
	p.series = ss
}

// sweep drops p's series that it did not emit in this refresh.
func (c *Collector) sweep(p *part) {
	for _, s := range p.series {
		if !s.dead && s.owner == p && s.gen != c.gen {
			c.out[s.fam].drop(s)
		}
	}
}

func (c *Collector) buildAgents(now time.Time) {
	last := make([]*series, 0, len(c.hosts))
	up := make([]*series, 0, len(c.hosts))
	var conflicts []*series
	for _, a := range c.hosts {
		if a.IdentityConflicts > 0 {
			conflicts = append(conflicts, c.series(famAgentConflicts, float64(a.IdentityConflicts), a.ID, a.Hostname))
		}
		v := 0.0
		if !a.LastSeen.IsZero() && now.Sub(a.LastSeen) <= c.opts.AgentStaleAfter {
			v = 1
		}
		last = append(last, c.series(famAgentLast, seconds(a.LastSeen), a.ID, a.Hostname))
		up = append(up, c.series(famAgentUp, v, a.ID, a.Hostname))
	}
	c.set(famAgentConflicts, conflicts)
	c.set(famAgentLast, last)
	c.set(famAgentUp, up)
	var ingest []*series
	for _, k := range []store.RecordKind{store.KindGeometry, store.KindProbe, store.KindRejected} {
		ingest = append(ingest, c.series(famIngestRecords, float64(c.counts[k]), string(k)))
	}
	c.set(famIngestRecords, ingest)
}

// buildVolumes: identity, geometry, verdict, findings of the volumes
// whose row changed; the fleet counts.
func (c *Collector) buildVolumes() {
	type fleetKey struct{ verdict, profile string }
	fleet := map[fleetKey]int{}
	seen := make(map[[2]string]bool, len(c.vols))
	c.present = make(map[volKey]string, len(c.vols))
	for _, v := range c.vols {
		id := [2]string{v.Hostname, v.MountPoint}
		if seen[id] {
			continue // two agents with one hostname: the first (by agent id) is shown
		}
		seen[id] = true
		k := volKey{v.AgentID, v.MountPoint}
		c.present[k] = v.Hostname
		p := c.volParts[k]
		if p == nil {
			p = &volPart{}
			c.volParts[k] = p
		}
		if p.gen == 0 || !sameVolume(p.vol, v) {
			if p.gen == 0 || p.facts.seq != v.Sequence {
				p.facts = factsOf(v)
			}
			p.vol = v
			c.rebuild(&p.part, c.volumeSeries(v, &p.facts))
		}
		p.gen = c.gen
		fleet[fleetKey{v.Verdict, p.facts.profile}]++
	}
	for k, p := range c.volParts {
		if p.gen != c.gen {
			c.sweep(&p.part)
			delete(c.volParts, k)
		}
	}
	volumes := make([]*series, 0, len(fleet))
	for k, n := range fleet {
		volumes = append(volumes, c.series(famVolumes, float64(n), k.verdict, k.profile))
	}
	c.set(famVolumes, volumes)
}

func (c *Collector) volumeSeries(v store.Volume, f *volumeFacts) []*series {
	host, mount := v.Hostname, v.MountPoint
	ss := []*series{c.series(famVolInfo, 1, host, mount, v.Device, v.FSType, f.raidLevel,
		strconv.FormatUint(v.StripeUnitBytes, 10), optUint(v.DataOffsetBytes), f.cluster, f.media, f.profile, v.Verdict)}
	if v.SplitFraction8K != nil {
		ss = append(ss, c.series(famVolSplit, *v.SplitFraction8K, host, mount, "8192"))
	}
	if v.SplitFraction64K != nil {
		ss = append(ss, c.series(famVolSplit, *v.SplitFraction64K, host, mount, "65536"))
	}
	for _, size := range []uint32{8 << 10, 64 << 10} {
		if g, ok := f.granularity[size]; ok {
			ss = append(ss, c.series(famVolGranSplit, g, host, mount, strconv.FormatUint(uint64(size), 10)))
		}
	}
	for _, fd := range f.findings {
		ss = append(ss, c.series(famVolFinding, 1, host, mount, fd[0], fd[1]))
	}
	for _, r := range f.raids {
		ss = append(ss, c.series(famVolRAIDMissing, float64(r.missing), host, mount, r.device))
	}
	return ss
}

// buildBaselines: baselines, probe statistics and stop counts of the
// present volumes whose rows changed; the cohorts.
func (c *Collector) buildBaselines() {
	stops := make(map[volKey][]store.StopCount)
	for i := 0; i < len(c.stops); {
		k := volKey{c.stops[i].AgentID, c.stops[i].MountPoint}
		j := i + 1
		for j < len(c.stops) && c.stops[j].AgentID == k.agent && c.stops[j].MountPoint == k.mount {
			j++
		}
		stops[k] = c.stops[i:j:j]
		i = j
	}
	failing := make(map[volKey][]store.ProbeFailing)
	for i := 0; i < len(c.failing); {
		k := volKey{c.failing[i].AgentID, c.failing[i].MountPoint}
		j := i + 1
		for j < len(c.failing) && c.failing[j].AgentID == k.agent && c.failing[j].MountPoint == k.mount {
			j++
		}
		failing[k] = c.failing[i:j:j]
		i = j
	}
	// Which volumes' rows to compare (serially: the maps), then compare
	// and encode on every CPU (each job touches only its own part), then
	// put the series of those that changed (serially: the families).
	type job struct {
		k       volKey
		p       *basePart
		host    string
		rows    []store.MetricsBaseline
		stops   []store.StopCount
		failing []store.ProbeFailing
		rebuilt bool
		series  []*series
	}
	jobs := make([]job, 0, len(c.present))
	visit := func(k volKey, rows []store.MetricsBaseline) {
		host, ok := c.present[k]
		if !ok {
			return
		}
		st, fl := stops[k], failing[k]
		delete(stops, k)
		delete(failing, k)
		p := c.baseParts[k]
		if p == nil {
			p = &basePart{hists: map[string]*histFacts{}}
			c.baseParts[k] = p
		}
		p.gen = c.gen
		jobs = append(jobs, job{k: k, p: p, host: host, rows: rows, stops: st, failing: fl})
	}
	for i := 0; i < len(c.baselines); {
		k := volKey{c.baselines[i].AgentID, c.baselines[i].MountPoint}
		j := i + 1
		for j < len(c.baselines) && c.baselines[j].AgentID == k.agent && c.baselines[j].MountPoint == k.mount {
			j++
		}
		visit(k, c.baselines[i:j:j])
		i = j
	}
	for k := range stops { // stop counts of volumes without a baseline
		visit(k, nil)
	}
	for k := range failing { // failing volumes without a baseline or a stop count
		visit(k, nil)
	}
	do := func(jobs []job) {
		for i := range jobs {
			j := &jobs[i]
			p := j.p
			same := p.built && p.host == j.host && slices.EqualFunc(p.rows, j.rows, sameBaseline) && slices.Equal(p.stops, j.stops) &&
				slices.EqualFunc(p.failing, j.failing, sameFailing)
			p.rows, p.stops, p.failing = j.rows, j.stops, j.failing // the latest read's, so older reads can be freed
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
	for k, p := range c.baseParts {
		if p.gen != c.gen {
			c.sweep(&p.part)
			delete(c.baseParts, k)
		}
	}
	var cohortVolumes, cohortMedian []*series
	for _, co := range c.cohorts {
		cohortVolumes = append(cohortVolumes, c.series(famCohortVolumes, float64(co.Volumes), co.Profile, co.Kind))
		cohortMedian = append(cohortMedian, c.series(famCohortMedian, co.Median, co.Profile, co.Kind))
	}
	c.set(famCohortVolumes, cohortVolumes)
	c.set(famCohortMedian, cohortMedian)
}

func sameBaseline(a, b store.MetricsBaseline) bool {
	return a.AgentID == b.AgentID && a.MountPoint == b.MountPoint && a.Kind == b.Kind && a.Status == b.Status &&
		a.Reference == b.Reference && a.Since.Equal(b.Since) && a.HistoryRatio == b.HistoryRatio && a.CohortRatio == b.CohortRatio &&
		a.CohortReference == b.CohortReference && a.LastRun.Equal(b.LastRun) && a.Runs == b.Runs && bytes.Equal(a.Histogram, b.Histogram)
}

func (c *Collector) baselineSeries(k volKey, p *basePart) []*series {
	host, mount := p.host, k.mount
	var ss []*series
	var lastRun time.Time
	kinds := make(map[string]bool, len(p.rows))
	for _, b := range p.rows {
		if b.LastRun.After(lastRun) {
			lastRun = b.LastRun
		}
		if b.HistoryRatio > 0 {
			ss = append(ss, c.series(famRatio, b.HistoryRatio, host, mount, b.Kind, string(baseline.History)))
		}
		if b.CohortRatio > 0 && b.CohortReference != "" {
			ss = append(ss, c.series(famRatio, b.CohortRatio, host, mount, b.Kind, b.CohortReference))
		}
		if b.Status == string(baseline.Degraded) {
			ss = append(ss, c.series(famDegradedSince, seconds(b.Since), host, mount, b.Kind, b.Reference))
		}
		kinds[b.Kind] = true
		h := p.hists[b.Kind]
		if h == nil || h.runs != b.Runs || !bytes.Equal(h.raw, b.Histogram) {
			h = c.histFactsOf(b)
			p.hists[b.Kind] = h
		}
		if h.ok {
			ss = append(ss, c.fams[famLatency].encodeHistogram(famLatency, []string{host, mount, b.Kind}, c.classic, &h.nativeHist))
		}
	}
	for kind := range p.hists {
		if !kinds[kind] {
			delete(p.hists, kind)
		}
	}
	if !lastRun.IsZero() {
		ss = append(ss, c.series(famVolLastProbe, seconds(lastRun), host, mount))
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
		ss = append(ss, c.series(famStops, float64(sums[r]), host, mount, r))
	}
	for _, f := range p.failing {
		ss = append(ss, c.series(famFailingSince, seconds(f.Since), host, mount, f.Kind, f.Reason))
	}
	return ss
}

// sameFailing: the same failing streak as far as the exposition goes.
func sameFailing(a, b store.ProbeFailing) bool {
	return a.AgentID == b.AgentID && a.MountPoint == b.MountPoint && a.Kind == b.Kind && a.Reason == b.Reason && a.Since.Equal(b.Since)
}

// volumeFacts is what the exporter derives from a volume's geometry.
type volumeFacts struct {
	seq                                uint64
	raidLevel, cluster, media, profile string
	findings                           [][2]string // rule, severity
	raids                              []raidFacts
	// granularity is the split at any offset by I/O size (the volumes
	// table keeps only the offset-caused split).
	granularity map[uint32]float64
}

type raidFacts struct {
	device  string
	missing int
}

func factsOf(v store.Volume) volumeFacts {
	f := volumeFacts{seq: v.Sequence, raidLevel: baseline.NoRAID, cluster: "", media: string(baseline.UnknownMedia), profile: ""}
	var pv plumblinev1.Volume
	if err := proto.Unmarshal(v.Geometry, &pv); err != nil {
		return f
	}
	p := baseline.ProfileOf(&pv)
	f.raidLevel, f.media, f.profile = p.RAIDLevel, string(p.Media), p.Key()
	if p.AllocationUnit > 0 {
		f.cluster = strconv.FormatUint(uint64(p.AllocationUnit), 10)
	}
	f.granularity = pv.GetAlignment().GetGranularitySplitFraction()
	seen := map[[2]string]bool{}
	for _, fd := range pv.GetAlignment().GetFindings() {
		k := [2]string{fd.GetRule(), fd.GetSeverity()}
		if !seen[k] {
			seen[k] = true
			f.findings = append(f.findings, k)
		}
	}
	for _, l := range pv.GetLayers() {
		// md arrays: the kernel's raid_disks against the member devices
		// sysfs lists below the array. (md's own degraded count and member
		// states are not in the geometry; see docs/runbooks.)
		if l.GetKind() != "raid" || l.GetSources()["raid_disks"] != "sysfs" || l.GetRaidDisks() == 0 {
			continue
		}
		missing := int(l.GetRaidDisks()) - len(l.GetBelow())
		f.raids = append(f.raids, raidFacts{device: l.GetDevice(), missing: max(missing, 0)})
	}
	return f
}

// histFacts is a probe latency histogram ready to expose (ok false: the
// stored histogram did not decode), built once per stored histogram.
type histFacts struct {
	runs uint64
	raw  []byte
	ok   bool
	nativeHist
}

func (c *Collector) histFactsOf(b store.MetricsBaseline) *histFacts {
	f := &histFacts{runs: b.Runs, raw: b.Histogram}
	if len(b.Histogram) == 0 {
		return f
	}
	var p plumblinev1.Histogram
	if err := proto.Unmarshal(b.Histogram, &p); err != nil {
		return f
	}
	h, err := wire.HistogramFromProto(&p)
	if err != nil {
		return f
	}
	f.ok = true
	f.count, f.sum, f.zero = h.Count(), h.Sum().Seconds(), h.ZeroCount()
	f.spans, f.deltas = h.Spans()
	// The classic counts from the native buckets: each span starts its
	// offset past the end of the one before (the first, at its offset).
	// Buckets ascend, so each one's count goes to the first classic bound
	// at or above it (none: only +Inf), then the counts accumulate.
	limits := make([]int32, len(c.opts.ClassicBuckets))
	for i, bound := range c.opts.ClassicBuckets {
		limits[i] = histogram.Index(bound)
	}
	f.classic = make([]uint64, len(limits))
	var idx int32
	var count int64
	k, li := 0, 0
	for si, sp := range f.spans {
		if si == 0 {
			idx = sp.Offset
		} else {
			idx += sp.Offset
		}
		for range sp.Length {
			count += f.deltas[k]
			k++
			for li < len(limits) && idx > limits[li] {
				li++
			}
			if li < len(limits) {
				f.classic[li] += uint64(count)
			}
			idx++
		}
	}
	cum := h.ZeroCount()
	for i := range f.classic {
		cum += f.classic[i]
		f.classic[i] = cum
	}
	if len(f.spans) == 0 {
		// An empty native histogram still says it is one.
		f.spans = []histogram.Span{{Offset: 0, Length: 0}}
	}
	return f
}

func seconds(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return float64(t.UnixNano()) / 1e9
}

func optUint(p *uint64) string {
	if p == nil {
		return ""
	}
	return strconv.FormatUint(*p, 10)
}

func cmpString(a, b string) int { return strings.Compare(a, b) }
