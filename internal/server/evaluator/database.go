package evaluator

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/plumbline/plumbline/internal/server/attribution"
	"github.com/plumbline/plumbline/internal/server/baseline"
	"github.com/plumbline/plumbline/internal/server/store"
	"github.com/plumbline/plumbline/internal/vocab"
)

// The database side of a pass: each database interval (Δtime/Δops of each
// operation, the counter sets of one volume added up) goes to the
// baseline.Detector of its volume, source and operation — the same robust
// history the probe's median has (median/MAD, sustain, hysteresis) — and
// each volume with database operations gets a state and, while one is
// degraded, the attribution of its regression from the probe's states of
// the same volume (package attribution).

// DatabaseOptions configure the database judge. Zero fields take their
// defaults.
type DatabaseOptions struct {
	// Config is the detectors' configuration for database latency
	// (default: a window of 60 intervals, trusted after 10, 3 intervals
	// beyond to degrade — three minutes at the agent's one-minute
	// sampling — and 3 normal to recover; the probe's ratios).
	Config baseline.Config
	// MinOps is the least operations an interval needs for its latency to
	// be judged (default 20): a handful of fsyncs' mean is noise.
	MinOps uint64
	// Attribution is the attribution's configuration.
	Attribution attribution.Config
}

func (o DatabaseOptions) withDefaults() DatabaseOptions {
	if o.Config == (baseline.Config{}) {
		o.Config = baseline.Config{Window: 60, MinHistory: 10, Sustain: 3, Recover: 3}
	}
	if o.MinOps == 0 {
		o.MinOps = 20
	}
	return o
}

// DatabaseStore is what the database judge reads and writes.
type DatabaseStore interface {
	PendingDatabaseRuns(ctx context.Context, limit int) ([]store.DatabaseRun, error)
	ListDatabaseStates(ctx context.Context) ([]store.DatabaseState, error)
	ListDatabaseVolumes(ctx context.Context) ([]store.DatabaseVolume, error)
	SaveDatabaseStates(ctx context.Context, u store.DatabaseUpdate) error
}

var _ DatabaseStore = (*store.Store)(nil)

type dbKey struct {
	volKey
	source, op string
}

type dbEntry struct {
	det   *baseline.Detector
	rates rateHistory
	row   store.DatabaseState
	dirty bool
}

// databases is the database judge's state, held by the Evaluator.
type databases struct {
	loaded  bool
	entries map[dbKey]*dbEntry
	volumes map[volKey]store.DatabaseVolume // as last written
}

func (e *Evaluator) loadDatabases(ctx context.Context, st DatabaseStore) error {
	cfg := e.opts.Database.withDefaults()
	rows, err := st.ListDatabaseStates(ctx)
	if err != nil {
		return err
	}
	db := databases{entries: map[dbKey]*dbEntry{}, volumes: map[volKey]store.DatabaseVolume{}}
	for _, r := range rows {
		d, _ := baseline.NewDetector(cfg.Config)
		if err := d.UnmarshalBinary(r.Detector); err != nil {
			e.opts.Logger.Warn("database baseline unreadable; starting over", "agent", r.AgentID, "mount_point", r.MountPoint, "source", r.Source, "op", r.Op, "err", err)
			d, _ = baseline.NewDetector(cfg.Config)
		}
		en := &dbEntry{det: d, row: r}
		if err := en.rates.UnmarshalBinary(r.RateHistory); err != nil {
			e.opts.Logger.Warn("database rate history unreadable; starting over", "agent", r.AgentID, "mount_point", r.MountPoint, "source", r.Source, "op", r.Op, "err", err)
		}
		db.entries[dbKey{volKey{r.AgentID, r.MountPoint}, r.Source, r.Op}] = en
	}
	vols, err := st.ListDatabaseVolumes(ctx)
	if err != nil {
		return err
	}
	for _, v := range vols {
		db.volumes[volKey{v.AgentID, v.MountPoint}] = v
	}
	db.loaded = true
	e.db = db
	return nil
}

// passDatabases judges every pending database interval and writes the
// states that changed, the volumes' attributions and the watermarks.
func (e *Evaluator) passDatabases(ctx context.Context) error {
	st, ok := e.st.(DatabaseStore)
	if !ok {
		return nil
	}
	if !e.db.loaded {
		if err := e.loadDatabases(ctx, st); err != nil {
			return err
		}
	}
	for {
		runs, err := st.PendingDatabaseRuns(ctx, e.opts.BatchSize)
		if err != nil {
			return err
		}
		u := store.DatabaseUpdate{Watermarks: map[string]uint64{}}
		for i := range runs {
			r := &runs[i]
			u.Watermarks[r.AgentID] = max(u.Watermarks[r.AgentID], r.Sequence)
			e.observeDatabase(r)
		}
		for _, en := range e.db.entries {
			if en.dirty {
				b, err := en.det.MarshalBinary()
				if err != nil {
					return err
				}
				en.row.Detector = b
				if en.row.RateHistory, err = en.rates.MarshalBinary(); err != nil {
					return err
				}
				u.States = append(u.States, en.row)
			}
		}
		slices.SortFunc(u.States, func(a, b store.DatabaseState) int {
			return strings.Compare(a.AgentID+"\x00"+a.MountPoint+"\x00"+a.Source+"\x00"+a.Op, b.AgentID+"\x00"+b.MountPoint+"\x00"+b.Source+"\x00"+b.Op)
		})
		u.Volumes = e.databaseVolumes()
		if len(u.States) == 0 && len(u.Volumes) == 0 && len(u.Watermarks) == 0 {
			return nil
		}
		if err := st.SaveDatabaseStates(ctx, u); err != nil {
			e.db = databases{}
			return err
		}
		for _, en := range e.db.entries {
			en.dirty = false
		}
		for _, v := range u.Volumes {
			e.db.volumes[volKey{v.AgentID, v.MountPoint}] = v
		}
		if len(runs) < e.opts.BatchSize {
			return nil
		}
	}
}

// opTotal is one operation of one interval on one volume, its counter
// sets added up.
type opTotal struct {
	count, bytes uint64
	time         time.Duration
	notMeasured  string // set when a set with operations did not time them
	engine       string
}

// observeDatabase feeds one interval to its volumes' detectors.
func (e *Evaluator) observeDatabase(r *store.DatabaseRun) {
	cfg := e.opts.Database.withDefaults()
	totals := map[dbKey]*opTotal{}
	var keys []dbKey
	for _, o := range r.Ops {
		if o.MountPoint == "" {
			continue // not attributed to a volume: stored, not judged
		}
		k := dbKey{volKey{r.AgentID, o.MountPoint}, r.Source, o.Op}
		t := totals[k]
		if t == nil {
			t = &opTotal{engine: r.Engine}
			totals[k] = t
			keys = append(keys, k)
		}
		t.count += o.Count
		t.bytes += o.Bytes
		t.time += o.Time
		if !o.Measured && (o.Count > 0 || t.notMeasured == "") {
			t.notMeasured = o.NotMeasured
		}
	}
	end := r.StartedAt.Add(r.Interval)
	secs := r.Interval.Seconds()
	for _, k := range keys {
		t := totals[k]
		en := e.db.entries[k]
		if en == nil {
			d, _ := baseline.NewDetector(cfg.Config)
			en = &dbEntry{det: d, row: store.DatabaseState{AgentID: k.agent, MountPoint: k.mount, Source: k.source, Op: k.op}}
			e.db.entries[k] = en
		}
		if !en.row.Last.IsZero() && !end.After(en.row.Last) {
			continue // an interval not later than the last judged: nothing new
		}
		row := &en.row
		row.Engine, row.Last, row.NotMeasured = t.engine, end, t.notMeasured
		row.OpsRate, row.BytesRate, row.Latency = float64(t.count)/secs, float64(t.bytes)/secs, 0
		row.Intervals++
		en.dirty = true
		if t.notMeasured != "" {
			row.Status, row.Ratio = vocab.DatabaseNotMeasured, 0
			continue
		}
		if t.count > 0 {
			row.Latency = t.time.Seconds() / float64(t.count)
		}
		if t.count >= cfg.MinOps {
			en.det.Observe(end, row.Latency, baseline.Refs{})
		}
		s := en.det.State()
		if s.Status == "" { // nothing judged yet: too few operations so far
			s.Status = baseline.Learning
		}
		row.Status, row.Since, row.Ratio = string(s.Status), s.Since, s.History.Ratio
		if s.Status == baseline.Degraded {
			row.Ratio = s.Ratio
		} else {
			en.rates.observe(row.OpsRate) // the usual rate: learnt while the latency is not degraded
		}
		row.HistoryMedian = en.det.History().Median
	}
}

// databaseVolumes folds each volume's operations into its state and
// attribution, and returns those that changed since last written.
func (e *Evaluator) databaseVolumes() []store.DatabaseVolume {
	byVol := map[volKey][]*dbEntry{}
	for k, en := range e.db.entries {
		byVol[k.volKey] = append(byVol[k.volKey], en)
	}
	var out []store.DatabaseVolume
	for vk, ens := range byVol {
		v := e.databaseVolume(vk, ens)
		old, ok := e.db.volumes[vk]
		if ok && old.State == v.State && old.Attribution == v.Attribution && old.Reason == v.Reason {
			continue
		}
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b store.DatabaseVolume) int {
		return strings.Compare(a.AgentID+"\x00"+a.MountPoint, b.AgentID+"\x00"+b.MountPoint)
	})
	return out
}

// databaseVolume is one volume's database state: degraded when an
// operation is (with the attribution), else ok, learning, or not measured
// when no operation is timed (the reasons said).
func (e *Evaluator) databaseVolume(vk volKey, ens []*dbEntry) store.DatabaseVolume {
	v := store.DatabaseVolume{AgentID: vk.agent, MountPoint: vk.mount, State: vocab.DatabaseNotMeasured, UpdatedAt: time.Now()}
	rank := map[string]int{vocab.DatabaseNotMeasured: 0, string(baseline.Learning): 1, string(baseline.OK): 2, string(baseline.Degraded): 3}
	var ops []attribution.Op
	var at time.Time
	var unmeasured []string
	for _, en := range ens {
		r := en.row
		if rank[r.Status] > rank[v.State] {
			v.State = r.Status
		}
		if r.Status == vocab.DatabaseNotMeasured {
			unmeasured = append(unmeasured, r.Source+" "+r.Op+": "+r.NotMeasured)
		}
		if r.Last.After(at) {
			at = r.Last
		}
		ops = append(ops, attribution.Op{Source: r.Source, Op: r.Op, Status: baseline.Status(r.Status), Latency: r.Latency,
			HistoryMedian: r.HistoryMedian, Ratio: r.Ratio, Since: r.Since, Rate: r.OpsRate, HistoryRate: en.rates.median()})
	}
	slices.SortFunc(ops, func(a, b attribution.Op) int { return strings.Compare(a.Source+" "+a.Op, b.Source+" "+b.Op) })
	slices.Sort(unmeasured)
	res := attribution.Attribute(at, ops, e.probesOf(vk), e.deviceOf(vk), e.opts.Database.Attribution)
	v.Attribution, v.Reason = string(res.Attribution), res.Reason
	if len(unmeasured) > 0 {
		v.Reason = strings.TrimPrefix(v.Reason+"; not measured: "+strings.Join(unmeasured, "; "), "; ")
	}
	return v
}

// probesOf is the probe's judgement of each kind on the volume.
func (e *Evaluator) probesOf(vk volKey) []attribution.Probe {
	var out []attribution.Probe
	for _, kind := range baseline.Kinds() {
		en := e.entries[key{vk, string(kind)}]
		if en == nil {
			continue
		}
		out = append(out, attribution.Probe{Kind: string(kind), State: en.det.State(), LastRun: en.row.LastRun,
			Trusted: en.row.Trusted, HistoryRatio: en.row.HistoryRatio, MeanRatio: en.row.MeanRatio, RateRatio: en.row.RateRatio,
			LastBusy: e.busy[key{vk, string(kind)}]})
	}
	return out
}

// databaseNote is what a probe-degraded volume's reason adds of its
// database: the attribution when its database regressed too.
func (e *Evaluator) databaseNote(vk volKey) string {
	v, ok := e.db.volumes[vk]
	if !ok || v.Attribution == "" {
		return ""
	}
	return "; database " + v.Reason
}
