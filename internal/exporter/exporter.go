// Package exporter is the server's Prometheus exposition: a
// prometheus.Collector over a store snapshot. Descriptors are described
// once; metrics are built at scrape time from what the store holds (the
// volumes' geometry and verdicts, the evaluator's baselines, the agents'
// last reports), so the exposition is the same on every server replica.
//
// Every per-volume metric carries host and mount_point. With default
// settings a volume costs at most 30 series: see README's metrics reference
// and TestSeriesPerVolume.
package exporter

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
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
type EvaluatorStatus struct {
	LastSuccess time.Time
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
	// Evaluator, when set, is asked for the evaluator's status on every scrape.
	Evaluator func() EvaluatorStatus
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Timeout bounds the store reads of one scrape (default 20s).
	Timeout time.Duration
	Logger  *slog.Logger
}

// Collector is the prometheus.Collector of the whole server.
type Collector struct {
	st   *store.Store
	opts Options
	d    descs

	mu        sync.Mutex
	geometry  map[volKey]volumeFacts // by volume; reused while the sequence is unchanged
	hists     map[histKey]histFacts  // by volume and kind; reused while the run count is unchanged
	counts    map[store.RecordKind]uint64
	countedAt time.Time
}

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
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 20 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Collector{st: st, opts: opts, d: newDescs(), geometry: map[volKey]volumeFacts{}, hists: map[histKey]histFacts{}}, nil
}

// Handler serves the exposition of a pedantic registry holding only c.
func Handler(c *Collector) (http.Handler, error) {
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		return nil, err
	}
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError, Registry: reg}), nil
}

// Describe sends every descriptor.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.d.all() {
		ch <- d
	}
}

// Collect reads a store snapshot and sends every metric. A failed read
// sends plumbline_exporter_store_success 0 and nothing from the store.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.Timeout)
	defer cancel()
	now := c.opts.Now()
	if f := c.opts.Evaluator; f != nil {
		s := f()
		if !s.LastSuccess.IsZero() {
			ch <- prometheus.MustNewConstMetric(c.d.evalLast, prometheus.GaugeValue, seconds(s.LastSuccess))
		}
		ch <- prometheus.MustNewConstMetric(c.d.evalRuns, prometheus.CounterValue, float64(s.Runs))
		ch <- prometheus.MustNewConstMetric(c.d.evalFailures, prometheus.CounterValue, float64(s.Failures))
	}
	snap, err := c.st.MetricsSnapshot(ctx)
	if err == nil {
		err = c.collectCounts(ctx, ch, now)
	}
	if err != nil {
		c.opts.Logger.Error("metrics snapshot", "err", err)
		ch <- prometheus.MustNewConstMetric(c.d.storeSuccess, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.d.storeSuccess, prometheus.GaugeValue, 1)
	c.collect(ch, snap, now)
}

func (c *Collector) collectCounts(ctx context.Context, ch chan<- prometheus.Metric, now time.Time) error {
	c.mu.Lock()
	if c.counts == nil || now.Sub(c.countedAt) >= c.opts.RecordCountsEvery || now.Before(c.countedAt) {
		c.mu.Unlock()
		counts, err := c.st.RecordCounts(ctx)
		if err != nil {
			return err
		}
		c.mu.Lock()
		c.counts, c.countedAt = counts, now
	}
	counts := c.counts
	c.mu.Unlock()
	for _, k := range []store.RecordKind{store.KindGeometry, store.KindProbe, store.KindRejected} {
		ch <- prometheus.MustNewConstMetric(c.d.ingestRecords, prometheus.CounterValue, float64(counts[k]), string(k))
	}
	return nil
}

func (c *Collector) collect(ch chan<- prometheus.Metric, snap store.MetricsSnapshot, now time.Time) {
	hostOf := make(map[string]string, len(snap.Hosts))
	for _, a := range snap.Hosts {
		hostOf[a.ID] = a.Hostname
		up := 0.0
		if !a.LastSeen.IsZero() && now.Sub(a.LastSeen) <= c.opts.AgentStaleAfter {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(c.d.agentLast, prometheus.GaugeValue, seconds(a.LastSeen), a.ID, a.Hostname)
		ch <- prometheus.MustNewConstMetric(c.d.agentUp, prometheus.GaugeValue, up, a.ID, a.Hostname)
	}

	c.mu.Lock()
	defer c.mu.Unlock()

	// Volumes: identity, geometry, verdict, findings.
	type fleetKey struct{ verdict, profile string }
	fleet := map[fleetKey]int{}
	seen := make(map[[2]string]bool, len(snap.Volumes))
	present := make(map[volKey]bool, len(snap.Volumes))
	for _, v := range snap.Volumes {
		id := [2]string{v.Hostname, v.MountPoint}
		if seen[id] {
			continue // two agents with one hostname: the first (by agent id) is shown
		}
		seen[id] = true
		k := volKey{v.AgentID, v.MountPoint}
		present[k] = true
		f, ok := c.geometry[k]
		if !ok || f.seq != v.Sequence {
			f = factsOf(v)
			c.geometry[k] = f
		}
		fleet[fleetKey{v.Verdict, f.profile}]++
		ch <- prometheus.MustNewConstMetric(c.d.volInfo, prometheus.GaugeValue, 1,
			v.Hostname, v.MountPoint, v.Device, v.FSType, f.raidLevel, strconv.FormatUint(v.StripeUnitBytes, 10),
			optUint(v.DataOffsetBytes), f.cluster, f.media, f.profile, v.Verdict)
		if v.SplitFraction8K != nil {
			ch <- prometheus.MustNewConstMetric(c.d.volSplit, prometheus.GaugeValue, *v.SplitFraction8K, v.Hostname, v.MountPoint, "8192")
		}
		if v.SplitFraction64K != nil {
			ch <- prometheus.MustNewConstMetric(c.d.volSplit, prometheus.GaugeValue, *v.SplitFraction64K, v.Hostname, v.MountPoint, "65536")
		}
		for _, fd := range f.findings {
			ch <- prometheus.MustNewConstMetric(c.d.volFinding, prometheus.GaugeValue, 1, v.Hostname, v.MountPoint, fd[0], fd[1])
		}
		for _, r := range f.raids {
			ch <- prometheus.MustNewConstMetric(c.d.volRAIDMissing, prometheus.GaugeValue, float64(r.missing), v.Hostname, v.MountPoint, r.device)
		}
	}
	for k := range c.geometry {
		if !present[k] {
			delete(c.geometry, k)
		}
	}
	fleetKeys := make([]fleetKey, 0, len(fleet))
	for k := range fleet {
		fleetKeys = append(fleetKeys, k)
	}
	slices.SortFunc(fleetKeys, func(a, b fleetKey) int {
		if a.verdict != b.verdict {
			return cmpString(a.verdict, b.verdict)
		}
		return cmpString(a.profile, b.profile)
	})
	for _, k := range fleetKeys {
		ch <- prometheus.MustNewConstMetric(c.d.volumes, prometheus.GaugeValue, float64(fleet[k]), k.verdict, k.profile)
	}

	// Baselines and probe statistics of present volumes.
	lastProbe := map[volKey]time.Time{}
	usedHists := make(map[histKey]bool, len(snap.Baselines))
	for _, b := range snap.Baselines {
		k := volKey{b.AgentID, b.MountPoint}
		if !present[k] {
			continue
		}
		host := hostOf[b.AgentID]
		if b.LastRun.After(lastProbe[k]) {
			lastProbe[k] = b.LastRun
		}
		if b.HistoryRatio > 0 {
			ch <- prometheus.MustNewConstMetric(c.d.ratio, prometheus.GaugeValue, b.HistoryRatio, host, b.MountPoint, b.Kind, string(baseline.History))
		}
		if b.CohortRatio > 0 && b.CohortReference != "" {
			ch <- prometheus.MustNewConstMetric(c.d.ratio, prometheus.GaugeValue, b.CohortRatio, host, b.MountPoint, b.Kind, b.CohortReference)
		}
		if b.Status == string(baseline.Degraded) {
			ch <- prometheus.MustNewConstMetric(c.d.degradedSince, prometheus.GaugeValue, seconds(b.Since), host, b.MountPoint, b.Kind, b.Reference)
		}
		hk := histKey{k, b.Kind}
		usedHists[hk] = true
		h, ok := c.hists[hk]
		if !ok || h.runs != b.Runs {
			h = c.histFactsOf(b)
			c.hists[hk] = h
		}
		if h.ok {
			ch <- &nativeHistogram{desc: c.d.latency, labels: prometheus.MakeLabelPairs(c.d.latency, []string{host, b.MountPoint, b.Kind}), facts: &h}
		}
	}
	for k := range c.hists {
		if !usedHists[k] {
			delete(c.hists, k)
		}
	}
	keys := make([]volKey, 0, len(lastProbe))
	for k := range lastProbe {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b volKey) int { return cmpString(a.agent+"\x00"+a.mount, b.agent+"\x00"+b.mount) })
	for _, k := range keys {
		if t := lastProbe[k]; !t.IsZero() {
			ch <- prometheus.MustNewConstMetric(c.d.lastProbe, prometheus.GaugeValue, seconds(t), hostOf[k.agent], k.mount)
		}
	}
	// Stop counts by volume and reason (kinds summed: the budget).
	type stopKey struct {
		volKey
		reason string
	}
	var stopKeys []stopKey
	stops := map[stopKey]uint64{}
	for _, s := range snap.StopCounts {
		k := stopKey{volKey{s.AgentID, s.MountPoint}, s.Reason}
		if !present[k.volKey] {
			continue
		}
		if _, ok := stops[k]; !ok {
			stopKeys = append(stopKeys, k)
		}
		stops[k] += s.Runs
	}
	for _, k := range stopKeys { // snapshot order: agent, mount point, kind, reason
		if n, ok := stops[k]; ok {
			ch <- prometheus.MustNewConstMetric(c.d.stops, prometheus.CounterValue, float64(n), hostOf[k.agent], k.mount, k.reason)
			delete(stops, k)
		}
	}
	for _, co := range snap.Cohorts {
		ch <- prometheus.MustNewConstMetric(c.d.cohortVolumes, prometheus.GaugeValue, float64(co.Volumes), co.Profile, co.Kind)
		ch <- prometheus.MustNewConstMetric(c.d.cohortMedian, prometheus.GaugeValue, co.Median, co.Profile, co.Kind)
	}
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

// histFacts is a probe latency histogram ready to expose.
type histFacts struct {
	ok        bool
	runs      uint64
	count     uint64
	sum       float64
	classic   []uint64 // cumulative, per bound
	bounds    []float64
	zeroCount uint64
	spans     []*dto.BucketSpan
	deltas    []int64
}

func (c *Collector) histFactsOf(b store.ProbeBaseline) histFacts {
	f := histFacts{runs: b.Runs, bounds: c.opts.ClassicBuckets}
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
	f.ok, f.count, f.sum, f.zeroCount = true, h.Count(), h.Sum().Seconds(), h.ZeroCount()
	f.classic = make([]uint64, len(f.bounds))
	buckets := h.Buckets()
	for i, bound := range f.bounds {
		n, limit := h.ZeroCount(), histogram.Index(bound)
		for _, bk := range buckets {
			if bk.Index > limit {
				break
			}
			n += bk.Count
		}
		f.classic[i] = n
	}
	spans, deltas := h.Spans()
	for _, s := range spans {
		f.spans = append(f.spans, &dto.BucketSpan{Offset: proto.Int32(s.Offset), Length: proto.Uint32(s.Length)})
	}
	f.deltas = deltas
	if len(f.spans) == 0 {
		// An empty native histogram still says it is one.
		f.spans = []*dto.BucketSpan{{Offset: proto.Int32(0), Length: proto.Uint32(0)}}
	}
	return f
}

// nativeHistogram is a const histogram with classic and native buckets.
type nativeHistogram struct {
	desc   *prometheus.Desc
	labels []*dto.LabelPair
	facts  *histFacts
}

func (m *nativeHistogram) Desc() *prometheus.Desc { return m.desc }

func (m *nativeHistogram) Write(out *dto.Metric) error {
	f := m.facts
	h := &dto.Histogram{
		SampleCount:   proto.Uint64(f.count),
		SampleSum:     proto.Float64(f.sum),
		Schema:        proto.Int32(histogram.Schema),
		ZeroThreshold: proto.Float64(histogram.ZeroThreshold),
		ZeroCount:     proto.Uint64(f.zeroCount),
		PositiveSpan:  f.spans,
		PositiveDelta: f.deltas,
	}
	for i, b := range f.bounds {
		h.Bucket = append(h.Bucket, &dto.Bucket{UpperBound: proto.Float64(b), CumulativeCount: proto.Uint64(f.classic[i])})
	}
	out.Label = m.labels
	out.Histogram = h
	return nil
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

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
