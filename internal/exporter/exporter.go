// Package exporter is the server's Prometheus exposition over a store
// snapshot. Families are described once; metrics are built from what the
// store holds (the volumes' geometry and verdicts, the evaluator's
// baselines, the agents' last reports), so the exposition is the same on
// every server replica.
//
// A scrape of 10,000 volumes is ~280,000 series, so the exposition is
// built and encoded once per change, not per scrape: every scrape reads
// the agents (cheap); the volumes are read again when an agent wrote since
// (ingest moves its last-seen time in the same transaction), the
// baselines when the evaluator finished a pass; both at least every
// MaxAge. A family is re-encoded only when its inputs changed, and a
// scrape that finds nothing changed is a copy of the cached body (text or,
// when Prometheus asks for it, delimited protobuf with the native
// histogram buckets; gzip when accepted). Consistency that the client
// library's registry checks on every scrape is checked once, by tests.
//
// Every per-volume metric carries host and mount_point. With default
// settings a volume costs at most 30 series: see README's metrics reference
// and TestSeriesPerVolume.
package exporter

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"log/slog"
	"math"
	"net/http"
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

// DefaultClassicBuckets are the classic bucket bounds of the probe latency
// histograms (seconds): 2^-10 ≈ 0.98 ms (flash answers below it) and 2^-6 ≈
// 15.6 ms (a rotating disk's random I/O stays below it; beyond is queueing or
// a sick device). They are bounds of the schema-3 native buckets, so each
// classic count is exact. Two bounds keep a volume within its series budget;
// the native buckets (~9% wide) carry the full distribution, and _sum/_count
// the exact mean.
var DefaultClassicBuckets = []float64{0x1p-10, 0x1p-6}

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
	// DefaultClassicBuckets.
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
	st   *store.Store
	opts Options
	fams [numFamilies]family

	mu sync.Mutex // held by the scrape that refreshes; the others wait and share its result

	// Inputs of the last build.
	hosts     []store.Agent
	vols      []store.Volume
	volsOK    bool
	base      store.MetricsSnapshot // Baselines, StopCounts, Cohorts
	baseOK    bool
	baseGen   EvaluatorStatus
	readAt    time.Time // when the volumes and baselines were both last read
	present   map[volKey]bool
	geometry  map[volKey]volumeFacts // by volume; reused while the sequence is unchanged
	hists     map[histKey]*histFacts // by volume and kind; reused while the run count is unchanged
	counts    map[store.RecordKind]uint64
	countedAt time.Time

	// Outputs: each family's metrics and text encoding (nil: absent), and
	// the whole bodies of the current version by format.
	out    [numFamilies]*encoded
	bodies map[bodyKey][]byte
}

// encoded is one family's metrics, encoded once.
type encoded struct {
	mf   *dto.MetricFamily
	text []byte
	pb   []byte // delimited protobuf, encoded on first use
}

type bodyKey struct{ protobuf, gzip bool }

type volKey struct{ agent, mount string }

type histKey struct {
	volKey
	kind string
}

// New returns a Collector over st.
func New(st *store.Store, opts Options) (*Collector, error) {
	if opts.ClassicBuckets == nil {
		opts.ClassicBuckets = DefaultClassicBuckets
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
	return &Collector{st: st, opts: opts, fams: newFamilies(), geometry: map[volKey]volumeFacts{}, hists: map[histKey]*histFacts{}}, nil
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
// implements prometheus.Gatherer). They are shared with the cache: callers
// must not modify them.
func (c *Collector) Gather() ([]*dto.MetricFamily, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refresh()
	var out []*dto.MetricFamily
	for _, e := range c.out {
		if e != nil {
			out = append(out, e.mf)
		}
	}
	return out, nil
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
	for _, e := range c.out {
		if e == nil {
			continue
		}
		if key.protobuf && e.pb == nil {
			var buf bytes.Buffer
			if _, err := protodelim.MarshalTo(&buf, e.mf); err != nil {
				return nil, fmt.Errorf("%s: %w", e.mf.GetName(), err)
			}
			e.pb = buf.Bytes()
		}
		n += len(e.text)
		if key.protobuf {
			n += len(e.pb) - len(e.text)
		}
	}
	raw := make([]byte, 0, n)
	for _, e := range c.out {
		switch {
		case e == nil:
		case key.protobuf:
			raw = append(raw, e.pb...)
		default:
			raw = append(raw, e.text...)
		}
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
	var next [numFamilies]*dto.MetricFamily
	var rebuilt [numFamilies]bool // families whose inputs were considered this time
	for _, i := range []int{famEvalFailures, famEvalLast, famEvalRuns, famStoreSuccess, famIngestRecords, famAgentLast, famAgentUp} {
		rebuilt[i] = true
	}
	var ev EvaluatorStatus
	if f := c.opts.Evaluator; f != nil {
		ev = f()
		if !ev.LastSuccess.IsZero() {
			next[famEvalLast] = c.single(famEvalLast, gaugeOf(seconds(ev.LastSuccess)))
		}
		next[famEvalRuns] = c.single(famEvalRuns, counterOf(float64(ev.Runs)))
		next[famEvalFailures] = c.single(famEvalFailures, counterOf(float64(ev.Failures)))
	}
	rebuildVol, rebuildBase, err := c.read(ctx, now, ev)
	if err != nil {
		c.opts.Logger.Error("metrics snapshot", "err", err)
		c.hosts, c.volsOK, c.baseOK, c.present = nil, false, false, nil
		next[famStoreSuccess] = c.single(famStoreSuccess, gaugeOf(0))
		for i := range rebuilt {
			rebuilt[i] = true // everything else: absent
		}
		c.publish(&next, &rebuilt)
		return
	}
	next[famStoreSuccess] = c.single(famStoreSuccess, gaugeOf(1))
	c.buildAgents(&next, now)
	if rebuildVol {
		c.buildVolumes(&next)
		for _, i := range []int{famVolInfo, famVolSplit, famVolFinding, famVolRAIDMissing, famVolumes} {
			rebuilt[i] = true
		}
	}
	if rebuildVol || rebuildBase {
		c.buildBaselines(&next)
		for _, i := range []int{famRatio, famDegradedSince, famLatency, famVolLastProbe, famStops, famCohortVolumes, famCohortMedian} {
			rebuilt[i] = true
		}
	}
	c.publish(&next, &rebuilt)
}

// read reads the store: the agents and (when due) the record counts every
// time, the volumes when an agent wrote since the last read, the baselines
// when the evaluator finished a pass since; both at least every MaxAge.
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
	ingested := !slices.EqualFunc(hosts, c.hosts, func(a, b store.Agent) bool {
		return a.ID == b.ID && a.Hostname == b.Hostname && a.LastSeen.Equal(b.LastSeen)
	})
	c.hosts = hosts
	if !c.volsOK || expired || ingested {
		vols, err := c.st.ListVolumes(ctx)
		if err != nil {
			return false, false, err
		}
		if !c.volsOK || !slices.EqualFunc(vols, c.vols, sameVolume) {
			rebuildVol = true
		}
		c.vols, c.volsOK = vols, true
	}
	evaluated := c.opts.Evaluator == nil || ev.Passes != c.baseGen.Passes || ev.Failures != c.baseGen.Failures
	if !c.baseOK || expired || evaluated {
		var b store.MetricsSnapshot
		if b.Baselines, err = c.st.ListProbeBaselines(ctx); err != nil {
			return false, false, err
		}
		if b.StopCounts, err = c.st.ListStopCounts(ctx); err != nil {
			return false, false, err
		}
		if b.Cohorts, err = c.st.ListCohorts(ctx); err != nil {
			return false, false, err
		}
		c.base, c.baseGen, c.baseOK, rebuildBase = b, ev, true, true
	}
	if expired {
		c.readAt = now
	}
	return rebuildVol, rebuildBase, nil
}

// sameVolume: the same row of a present volume as far as the exposition
// goes (a volume's row changes only with its sequence).
func sameVolume(a, b store.Volume) bool {
	return a.AgentID == b.AgentID && a.Hostname == b.Hostname && a.MountPoint == b.MountPoint && a.Sequence == b.Sequence
}

// publish re-encodes the families that were rebuilt and, when any of them
// changed, drops the cached bodies.
func (c *Collector) publish(next *[numFamilies]*dto.MetricFamily, rebuilt *[numFamilies]bool) {
	changed := false
	for i, mf := range next {
		if !rebuilt[i] {
			continue
		}
		old := c.out[i]
		if mf == nil || len(mf.Metric) == 0 {
			if old != nil {
				c.out[i], changed = nil, true
			}
			continue
		}
		text := appendFamilyText(nil, mf)
		if old != nil && bytes.Equal(old.text, text) && sameHistograms(old.mf, mf) {
			continue // same exposition: keep the old encodings
		}
		c.out[i], changed = &encoded{mf: mf, text: text}, true
	}
	if changed {
		c.bodies = nil
	}
}

// sameHistograms: the text encoding does not show native buckets, so for a
// histogram family the text alone cannot tell that nothing changed; the
// histograms themselves are built once per run count and shared.
func sameHistograms(a, b *dto.MetricFamily) bool {
	if len(a.Metric) != len(b.Metric) {
		return false
	}
	for i, m := range a.Metric {
		if m.Histogram != b.Metric[i].Histogram {
			return false
		}
	}
	return true
}

func (c *Collector) single(fam int, m *dto.Metric) *dto.MetricFamily {
	return c.newFamily(fam, []*dto.Metric{m})
}

func (c *Collector) newFamily(fam int, ms []*dto.Metric) *dto.MetricFamily {
	f := &c.fams[fam]
	typ := f.typ
	return &dto.MetricFamily{Name: proto.String(f.name), Help: proto.String(f.help), Type: &typ, Metric: ms}
}

func gaugeOf(v float64) *dto.Metric { return &dto.Metric{Gauge: &dto.Gauge{Value: proto.Float64(v)}} }
func counterOf(v float64) *dto.Metric {
	return &dto.Metric{Counter: &dto.Counter{Value: proto.Float64(v)}}
}

// metric is a gauge or counter with labels in the family's declared order.
func (c *Collector) metric(fam int, v float64, labels ...*string) *dto.Metric {
	f := &c.fams[fam]
	m := &dto.Metric{Label: f.labelPairs(labels...)}
	if f.typ == dto.MetricType_COUNTER {
		m.Counter = &dto.Counter{Value: proto.Float64(v)}
	} else {
		m.Gauge = &dto.Gauge{Value: proto.Float64(v)}
	}
	return m
}

// sorted puts a family's metrics in label-value order, as the client
// library's registry does, and returns it.
func sorted(mf *dto.MetricFamily) *dto.MetricFamily {
	slices.SortStableFunc(mf.Metric, func(a, b *dto.Metric) int {
		for i := range min(len(a.Label), len(b.Label)) {
			if c := cmpString(a.Label[i].GetValue(), b.Label[i].GetValue()); c != 0 {
				return c
			}
		}
		return len(a.Label) - len(b.Label)
	})
	return mf
}

func (c *Collector) buildAgents(next *[numFamilies]*dto.MetricFamily, now time.Time) {
	var last, up []*dto.Metric
	for _, a := range c.hosts {
		id, host := proto.String(a.ID), proto.String(a.Hostname)
		v := 0.0
		if !a.LastSeen.IsZero() && now.Sub(a.LastSeen) <= c.opts.AgentStaleAfter {
			v = 1
		}
		last = append(last, c.metric(famAgentLast, seconds(a.LastSeen), id, host))
		up = append(up, c.metric(famAgentUp, v, id, host))
	}
	next[famAgentLast] = sorted(c.newFamily(famAgentLast, last))
	next[famAgentUp] = sorted(c.newFamily(famAgentUp, up))
	var ingest []*dto.Metric
	for _, k := range []store.RecordKind{store.KindGeometry, store.KindProbe, store.KindRejected} {
		ingest = append(ingest, c.metric(famIngestRecords, float64(c.counts[k]), proto.String(string(k))))
	}
	next[famIngestRecords] = c.newFamily(famIngestRecords, ingest)
}

// buildVolumes: identity, geometry, verdict, findings; the fleet counts.
func (c *Collector) buildVolumes(next *[numFamilies]*dto.MetricFamily) {
	type fleetKey struct{ verdict, profile string }
	fleet := map[fleetKey]int{}
	seen := make(map[[2]string]bool, len(c.vols))
	c.present = make(map[volKey]bool, len(c.vols))
	var info, split, finding, raid []*dto.Metric
	s8k, s64k := proto.String("8192"), proto.String("65536")
	for _, v := range c.vols {
		id := [2]string{v.Hostname, v.MountPoint}
		if seen[id] {
			continue // two agents with one hostname: the first (by agent id) is shown
		}
		seen[id] = true
		k := volKey{v.AgentID, v.MountPoint}
		c.present[k] = true
		f, ok := c.geometry[k]
		if !ok || f.seq != v.Sequence {
			f = factsOf(v)
			c.geometry[k] = f
		}
		fleet[fleetKey{v.Verdict, f.profile}]++
		host, mount := proto.String(v.Hostname), proto.String(v.MountPoint)
		info = append(info, c.metric(famVolInfo, 1, host, mount, proto.String(v.Device), proto.String(v.FSType), proto.String(f.raidLevel),
			proto.String(strconv.FormatUint(v.StripeUnitBytes, 10)), proto.String(optUint(v.DataOffsetBytes)), proto.String(f.cluster),
			proto.String(f.media), proto.String(f.profile), proto.String(v.Verdict)))
		if v.SplitFraction8K != nil {
			split = append(split, c.metric(famVolSplit, *v.SplitFraction8K, host, mount, s8k))
		}
		if v.SplitFraction64K != nil {
			split = append(split, c.metric(famVolSplit, *v.SplitFraction64K, host, mount, s64k))
		}
		for _, fd := range f.findings {
			finding = append(finding, c.metric(famVolFinding, 1, host, mount, proto.String(fd[0]), proto.String(fd[1])))
		}
		for _, r := range f.raids {
			raid = append(raid, c.metric(famVolRAIDMissing, float64(r.missing), host, mount, proto.String(r.device)))
		}
	}
	for k := range c.geometry {
		if !c.present[k] {
			delete(c.geometry, k)
		}
	}
	var volumes []*dto.Metric
	for k, n := range fleet {
		volumes = append(volumes, c.metric(famVolumes, float64(n), proto.String(k.verdict), proto.String(k.profile)))
	}
	next[famVolInfo] = sorted(c.newFamily(famVolInfo, info))
	next[famVolSplit] = sorted(c.newFamily(famVolSplit, split))
	next[famVolFinding] = sorted(c.newFamily(famVolFinding, finding))
	next[famVolRAIDMissing] = sorted(c.newFamily(famVolRAIDMissing, raid))
	next[famVolumes] = sorted(c.newFamily(famVolumes, volumes))
}

// buildBaselines: baselines and probe statistics of present volumes; the cohorts.
func (c *Collector) buildBaselines(next *[numFamilies]*dto.MetricFamily) {
	hostOf := make(map[string]*string, len(c.hosts))
	for _, a := range c.hosts {
		hostOf[a.ID] = proto.String(a.Hostname)
	}
	var ratio, degraded, latency, lastProbe, stops []*dto.Metric
	lastRun := map[volKey]time.Time{}
	mounts := map[volKey]*string{}
	usedHists := make(map[histKey]bool, len(c.base.Baselines))
	refHistory := proto.String(string(baseline.History))
	kinds := map[string]*string{}
	str := func(m map[string]*string, s string) *string {
		p, ok := m[s]
		if !ok {
			p = proto.String(s)
			m[s] = p
		}
		return p
	}
	for _, b := range c.base.Baselines {
		k := volKey{b.AgentID, b.MountPoint}
		if !c.present[k] {
			continue
		}
		host, kind := hostOf[b.AgentID], str(kinds, b.Kind)
		mount, ok := mounts[k]
		if !ok {
			mount = proto.String(b.MountPoint)
			mounts[k] = mount
		}
		if b.LastRun.After(lastRun[k]) {
			lastRun[k] = b.LastRun
		}
		if b.HistoryRatio > 0 {
			ratio = append(ratio, c.metric(famRatio, b.HistoryRatio, host, mount, kind, refHistory))
		}
		if b.CohortRatio > 0 && b.CohortReference != "" {
			ratio = append(ratio, c.metric(famRatio, b.CohortRatio, host, mount, kind, str(kinds, b.CohortReference)))
		}
		if b.Status == string(baseline.Degraded) {
			degraded = append(degraded, c.metric(famDegradedSince, seconds(b.Since), host, mount, kind, str(kinds, b.Reference)))
		}
		hk := histKey{k, b.Kind}
		usedHists[hk] = true
		h, ok := c.hists[hk]
		if !ok || h.runs != b.Runs {
			h = c.histFactsOf(b)
			c.hists[hk] = h
		}
		if h.h != nil {
			latency = append(latency, &dto.Metric{Label: c.fams[famLatency].labelPairs(host, mount, kind), Histogram: h.h})
		}
	}
	for k := range c.hists {
		if !usedHists[k] {
			delete(c.hists, k)
		}
	}
	for k, t := range lastRun {
		if !t.IsZero() {
			lastProbe = append(lastProbe, c.metric(famVolLastProbe, seconds(t), hostOf[k.agent], mounts[k]))
		}
	}
	// Stop counts by volume and reason (kinds summed: the budget).
	type stopKey struct {
		volKey
		reason string
	}
	var stopKeys []stopKey
	sums := map[stopKey]uint64{}
	for _, s := range c.base.StopCounts {
		k := stopKey{volKey{s.AgentID, s.MountPoint}, s.Reason}
		if !c.present[k.volKey] {
			continue
		}
		if _, ok := sums[k]; !ok {
			stopKeys = append(stopKeys, k)
		}
		sums[k] += s.Runs
	}
	for _, k := range stopKeys {
		stops = append(stops, c.metric(famStops, float64(sums[k]), hostOf[k.agent], proto.String(k.mount), str(kinds, k.reason)))
	}
	var cohortVolumes, cohortMedian []*dto.Metric
	for _, co := range c.base.Cohorts {
		profile, kind := proto.String(co.Profile), str(kinds, co.Kind)
		cohortVolumes = append(cohortVolumes, c.metric(famCohortVolumes, float64(co.Volumes), profile, kind))
		cohortMedian = append(cohortMedian, c.metric(famCohortMedian, co.Median, profile, kind))
	}
	next[famRatio] = sorted(c.newFamily(famRatio, ratio))
	next[famDegradedSince] = sorted(c.newFamily(famDegradedSince, degraded))
	next[famLatency] = sorted(c.newFamily(famLatency, latency))
	next[famVolLastProbe] = sorted(c.newFamily(famVolLastProbe, lastProbe))
	next[famStops] = sorted(c.newFamily(famStops, stops))
	next[famCohortVolumes] = sorted(c.newFamily(famCohortVolumes, cohortVolumes))
	next[famCohortMedian] = sorted(c.newFamily(famCohortMedian, cohortMedian))
}

// volumeFacts is what the exporter derives from a volume's geometry.
type volumeFacts struct {
	seq                                uint64
	raidLevel, cluster, media, profile string
	findings                           [][2]string // rule, severity
	raids                              []raidFacts
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

// histFacts is a probe latency histogram ready to expose (h nil: the
// stored histogram did not decode), built once per run count.
type histFacts struct {
	runs uint64
	h    *dto.Histogram
}

func (c *Collector) histFactsOf(b store.ProbeBaseline) *histFacts {
	f := &histFacts{runs: b.Runs}
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
	out := &dto.Histogram{
		SampleCount:   proto.Uint64(h.Count()),
		SampleSum:     proto.Float64(h.Sum().Seconds()),
		Schema:        proto.Int32(histogram.Schema),
		ZeroThreshold: proto.Float64(histogram.ZeroThreshold),
		ZeroCount:     proto.Uint64(h.ZeroCount()),
	}
	buckets := h.Buckets()
	for _, bound := range c.opts.ClassicBuckets {
		n, limit := h.ZeroCount(), histogram.Index(bound)
		for _, bk := range buckets {
			if bk.Index > limit {
				break
			}
			n += bk.Count
		}
		out.Bucket = append(out.Bucket, &dto.Bucket{UpperBound: proto.Float64(bound), CumulativeCount: proto.Uint64(n)})
	}
	spans, deltas := h.Spans()
	for _, s := range spans {
		out.PositiveSpan = append(out.PositiveSpan, &dto.BucketSpan{Offset: proto.Int32(s.Offset), Length: proto.Uint32(s.Length)})
	}
	out.PositiveDelta = deltas
	if len(out.PositiveSpan) == 0 {
		// An empty native histogram still says it is one.
		out.PositiveSpan = []*dto.BucketSpan{{Offset: proto.Int32(0), Length: proto.Uint32(0)}}
	}
	f.h = out
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
