package replay

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/plumbline/plumbline/internal/histogram"
	"github.com/plumbline/plumbline/internal/server/baseline"
	"github.com/plumbline/plumbline/internal/server/evaluator"
	"github.com/plumbline/plumbline/internal/server/ingest"
	"github.com/plumbline/plumbline/internal/server/store"
	"github.com/plumbline/plumbline/internal/vocab"
	"github.com/plumbline/plumbline/internal/wire"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// Schedule is a probe schedule as agent.yaml states it: every kind runs
// every Every with Ops operations (at 8 KiB each).
type Schedule struct {
	Every time.Duration
	Ops   int
}

// Volume is one simulated volume: its agent (host), its geometry (which
// sets its profile, hence its cohort) and the recording its runs are
// drawn from.
type Volume struct {
	Agent    string
	Geometry *plumblinev1.Volume
	Noise    *Recording
	// Offset is where the volume's walk through the recording starts (an
	// atom index; volumes drawn from one recording start apart).
	Offset int
	// Phase delays the volume's schedule within Every (agents start at
	// different times).
	Phase time.Duration
}

// Fault slows one volume's every operation by Factor from From until To
// (To zero: to the end). The factor is applied to the recorded histogram
// by moving every observation up 8·log2(Factor) buckets (schema 3 has 8
// buckets per doubling), so it is rounded to a power of 2^(1/8): exact for
// ×2 and ×4.
type Fault struct {
	Volume   int
	From, To time.Time
	Factor   float64
}

// Rules are the alert rules the replay applies to the evaluator's states,
// as deploy/prometheus/plumbline.rules.yml states them.
type Rules struct {
	// DegradedFor is PlumblineVolumeDegraded's `for:`; it fires while a
	// volume is degraded against its own history.
	DegradedFor time.Duration
	// CohortRatio and CohortFor are PlumblineVolumeCohortOutlier's: the
	// last run's ratio to the cohort at least CohortRatio, for CohortFor.
	CohortRatio float64
	CohortFor   time.Duration
}

// Alert names.
const (
	VolumeDegraded     = "PlumblineVolumeDegraded"
	VolumeCohortOutler = "PlumblineVolumeCohortOutlier"
)

// Options describe one replay.
type Options struct {
	// Store is where the runs go; the replay owns its contents (use a new
	// database).
	Store    *store.Store
	Start    time.Time
	Duration time.Duration
	Schedule Schedule
	Kinds    []string
	Volumes  []Volume
	Faults   []Fault
	// Config is the detectors' configuration (zero: the defaults).
	Config baseline.Config
	// PassEvery is the evaluator's interval in simulated time (default
	// 30s, the server's --baseline.interval); runs reach the store
	// immediately (an agent reports every 10s).
	PassEvery time.Duration
	Rules     Rules
	// Seed varies where the walks through the recordings jump (0 is a
	// seed like any other).
	Seed uint64
}

// Transition is a change of a volume's degradation status for one kind.
type Transition struct {
	At       time.Time
	Volume   int
	Kind     string
	From, To baseline.Status
	// Reference, Signal, Detail and Ratio are the new state's.
	Reference, Signal, Detail string
	Ratio                     float64
}

// Alert is one firing of an alert rule.
type Alert struct {
	Name   string
	Volume int
	Kind   string
	// Active is when the condition became true, Fired when it had held for
	// the rule's `for:`, Resolved when it became false (zero: still
	// firing at the end).
	Active, Fired, Resolved time.Time
	// Ratio is the ratio the state reported when the alert fired.
	Ratio float64
}

// Outcome is what a replay saw.
type Outcome struct {
	Days        float64
	Runs        int // probe runs judged
	Transitions []Transition
	Alerts      []Alert
}

// Degraded counts transitions into the degraded status.
func (o Outcome) Degraded() int {
	n := 0
	for _, t := range o.Transitions {
		if t.To == baseline.Degraded {
			n++
		}
	}
	return n
}

// Fired returns the alerts with that name for that volume (-1: any).
func (o Outcome) Fired(name string, volume int) []Alert {
	var out []Alert
	for _, a := range o.Alerts {
		if a.Name == name && (volume < 0 || a.Volume == volume) {
			out = append(out, a)
		}
	}
	return out
}

// walker strings a recording's atoms into runs the way time would: a run
// is n consecutive atoms (recorded seconds apart), and the next run starts
// where the recording was one schedule interval later — so consecutive
// runs are as alike as the recording's own runs that far apart were.
// Where the recording ends (it is minutes long; a simulated week is not),
// the walk jumps to a random place in it: runs farther apart than the
// recording is long are independent draws from it. Replaying atoms back to
// back instead would stretch a 20-second burst over several runs and
// report it as a sustained shift.
type walker struct {
	atoms []Atom
	every time.Duration
	rng   *rand.Rand
	pos   int // the next run's first atom
}

func newWalker(atoms []Atom, every time.Duration, seed uint64, start int) *walker {
	return &walker{atoms: atoms, every: every, rng: rand.New(rand.NewPCG(seed, 0x5eed)), pos: start % len(atoms)}
}

func (w *walker) next(n int) *histogram.Histogram {
	h := &histogram.Histogram{}
	if n >= len(w.atoms) {
		for i := range n {
			h.Merge(w.atoms[i%len(w.atoms)].Hist)
		}
		return h
	}
	if w.pos+n > len(w.atoms) {
		w.pos = w.rng.IntN(len(w.atoms) - n + 1)
	}
	for _, a := range w.atoms[w.pos : w.pos+n] {
		h.Merge(a.Hist)
	}
	at := w.atoms[w.pos].At.Add(w.every)
	w.pos, _ = slices.BinarySearchFunc(w.atoms, at, func(a Atom, t time.Time) int { return a.At.Compare(t) })
	return h
}

// scale moves every observation of h up by shift buckets: ×2^(shift/8).
func scale(h *histogram.Histogram, shift int32) (*histogram.Histogram, error) {
	if shift == 0 {
		return h, nil
	}
	f := math.Exp2(float64(shift) / bucketsPerDoubling)
	s := h.Snapshot()
	for i := range s.Buckets {
		s.Buckets[i].Index += shift
	}
	s.SumNanos = int64(float64(s.SumNanos) * f)
	s.MinNanos = int64(float64(s.MinNanos) * f)
	s.MaxNanos = int64(float64(s.MaxNanos) * f)
	return histogram.FromSnapshot(s)
}

// bucketsPerDoubling is the histogram's resolution: 2^Schema buckets per
// power of two.
const bucketsPerDoubling = 1 << histogram.Schema

// Shift is the bucket shift Fault applies for a factor.
func Shift(factor float64) int32 {
	return int32(math.Round(bucketsPerDoubling * math.Log2(factor)))
}

type volKind struct {
	vol  int
	kind string
}

type event struct {
	at   time.Time
	vol  int
	kind string
}

type ruleState struct {
	active time.Time // zero: condition false
	fired  bool
	ratio  float64
}

func (o *Options) check() error {
	var errs []error
	if o.Store == nil {
		errs = append(errs, errors.New("no store"))
	}
	if o.Duration <= 0 || o.Schedule.Every <= 0 || o.Schedule.Ops < 1 {
		errs = append(errs, errors.New("want a positive duration, schedule interval and op count"))
	}
	if len(o.Kinds) == 0 || len(o.Volumes) == 0 {
		errs = append(errs, errors.New("want at least one kind and one volume"))
	}
	for i, v := range o.Volumes {
		if v.Agent == "" || v.Geometry == nil || v.Noise == nil {
			errs = append(errs, fmt.Errorf("volume %d: want an agent, a geometry and a recording", i))
			continue
		}
		for _, k := range o.Kinds {
			if len(v.Noise.Atoms[k]) == 0 {
				errs = append(errs, fmt.Errorf("volume %d: recording %q has no %s atoms", i, v.Noise.Source, k))
			}
		}
	}
	for i, f := range o.Faults {
		if f.Volume < 0 || f.Volume >= len(o.Volumes) || !(f.Factor > 0) {
			errs = append(errs, fmt.Errorf("fault %d: want a volume index and a positive factor", i))
		}
	}
	if o.PassEvery <= 0 {
		o.PassEvery = 30 * time.Second
	}
	return errors.Join(errs...)
}

// Run replays opts.Duration of simulated time: every volume's runs on the
// schedule, drawn from its recording (slowed where a fault says), sent
// through ingest validation into the store, judged by the evaluator every
// PassEvery, and the alert rules applied to the states it leaves.
func Run(ctx context.Context, opts Options) (Outcome, error) {
	if err := opts.check(); err != nil {
		return Outcome{}, fmt.Errorf("replay: %w", err)
	}
	sm, err := newSim(ctx, opts)
	if err != nil {
		return Outcome{}, err
	}
	out := Outcome{Days: opts.Duration.Hours() / 24}
	end := opts.Start.Add(opts.Duration)
	for t := opts.Start.Add(opts.PassEvery); !t.After(end.Add(opts.PassEvery)); t = t.Add(opts.PassEvery) {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		n, err := sm.produce(t)
		if err != nil {
			return out, err
		}
		if err := sm.report(ctx); err != nil {
			return out, err
		}
		if n == 0 && sm.ei < len(sm.events) {
			continue
		}
		if err := sm.judge(ctx, t, &out); err != nil {
			return out, err
		}
		if sm.ei >= len(sm.events) {
			break
		}
	}
	sm.finish(&out, end)
	slices.SortStableFunc(out.Alerts, func(a, b Alert) int { return a.Fired.Compare(b.Fired) })
	return out, nil
}

// sim is one replay under way: the agents' pending records, the runs to
// come in time order, each volume and kind's walk through its recording,
// and the evaluator and alert rules' states.
type sim struct {
	opts    Options
	ev      *evaluator.Evaluator
	agents  []string
	seq     map[string]uint64
	pending map[string][]*plumblinev1.Record
	events  []event
	ei      int // the next event
	walkers map[volKind]*walker
	last    map[volKind]baseline.Status
	rules   map[string]map[volKind]*ruleState
	mounts  map[[2]string]int
}

// newSim registers the agents with a first record each (a geometry
// snapshot of their volumes) and lays out the runs: kinds of one volume a
// second apart, each volume from its own phase.
func newSim(ctx context.Context, opts Options) (*sim, error) {
	ev, err := evaluator.New(opts.Store, evaluator.Options{Config: opts.Config, Interval: opts.PassEvery})
	if err != nil {
		return nil, err
	}
	sm := &sim{opts: opts, ev: ev, seq: map[string]uint64{}, pending: map[string][]*plumblinev1.Record{}, walkers: map[volKind]*walker{},
		last: map[volKind]baseline.Status{}, rules: map[string]map[volKind]*ruleState{VolumeDegraded: {}, VolumeCohortOutler: {}}, mounts: map[[2]string]int{}}
	agentVols := map[string][]int{}
	for i, v := range opts.Volumes {
		if _, ok := agentVols[v.Agent]; !ok {
			sm.agents = append(sm.agents, v.Agent)
		}
		agentVols[v.Agent] = append(agentVols[v.Agent], i)
		sm.mounts[[2]string{v.Agent, v.Geometry.GetMountPoint()}] = i
	}
	for _, a := range sm.agents {
		if err := opts.Store.UpsertAgent(ctx, store.Agent{ID: a, Hostname: a, OS: "linux", AgentVersion: "replay"}); err != nil {
			return nil, err
		}
		inv := &plumblinev1.Inventory{Host: &plumblinev1.Host{Hostname: a, Os: "linux", CollectedAt: timestamppb.New(opts.Start)}}
		for _, i := range agentVols[a] {
			inv.Volumes = append(inv.Volumes, opts.Volumes[i].Geometry)
		}
		sm.seq[a]++
		sm.pending[a] = append(sm.pending[a], &plumblinev1.Record{Sequence: sm.seq[a], ProducedAt: timestamppb.New(opts.Start),
			Payload: &plumblinev1.Record_Geometry{Geometry: &plumblinev1.GeometrySnapshot{Inventory: inv, Trigger: string(vocab.TriggerStart)}}})
	}
	end := opts.Start.Add(opts.Duration)
	for vi, v := range opts.Volumes {
		for ki, k := range opts.Kinds {
			for t := opts.Start.Add(v.Phase + time.Duration(ki)*time.Second); t.Before(end); t = t.Add(opts.Schedule.Every) {
				sm.events = append(sm.events, event{at: t, vol: vi, kind: k})
			}
			atoms := v.Noise.Atoms[k]
			// Kinds of one volume start at different places too, so that
			// the kinds of a volume do not replay one moment together.
			sm.walkers[volKind{vi, k}] = newWalker(atoms, opts.Schedule.Every, opts.Seed<<16+uint64(vi*len(opts.Kinds)+ki+1), v.Offset+ki*len(atoms)/7)
		}
	}
	sort.SliceStable(sm.events, func(a, b int) bool { return sm.events[a].at.Before(sm.events[b].at) })
	return sm, nil
}

// produce turns the runs due by t into pending probe records and returns
// how many.
func (sm *sim) produce(t time.Time) (int, error) {
	n := 0
	for ; sm.ei < len(sm.events) && !sm.events[sm.ei].at.After(t); sm.ei++ {
		e := sm.events[sm.ei]
		v := sm.opts.Volumes[e.vol]
		h := sm.walkers[volKind{e.vol, e.kind}].next(max(1, (sm.opts.Schedule.Ops+v.Noise.AtomOps/2)/v.Noise.AtomOps))
		for _, f := range sm.opts.Faults {
			if f.Volume == e.vol && !e.at.Before(f.From) && (f.To.IsZero() || e.at.Before(f.To)) {
				var err error
				if h, err = scale(h, Shift(f.Factor)); err != nil {
					return n, err
				}
			}
		}
		sm.seq[v.Agent]++
		sm.pending[v.Agent] = append(sm.pending[v.Agent], probeRecord(sm.seq[v.Agent], e, v, h))
		n++
	}
	return n, nil
}

// report sends each agent's pending records through ingest validation
// into the store.
func (sm *sim) report(ctx context.Context) error {
	for _, a := range sm.agents {
		if len(sm.pending[a]) == 0 {
			continue
		}
		b, err := ingest.ValidateReport(&plumblinev1.ReportRequest{AgentId: a, Records: sm.pending[a]}, ingest.Limits{}, time.Now())
		if err != nil {
			return err
		}
		if len(b.Rejections) > 0 {
			return fmt.Errorf("replay: agent %s: record %d rejected: %s", a, b.Rejections[0].GetSequence(), b.Rejections[0].GetReason())
		}
		if _, err := sm.opts.Store.AppendBatch(ctx, a, b.Records); err != nil {
			return err
		}
		sm.pending[a] = sm.pending[a][:0]
	}
	return nil
}

// judge runs an evaluator pass at t and applies the alert rules to the
// states it leaves.
func (sm *sim) judge(ctx context.Context, t time.Time, out *Outcome) error {
	judged, err := sm.ev.Pass(ctx)
	if err != nil {
		return err
	}
	out.Runs += judged
	states, err := sm.opts.Store.ListProbeBaselines(ctx)
	if err != nil {
		return err
	}
	for _, s := range states {
		vi, ok := sm.mounts[[2]string{s.AgentID, s.MountPoint}]
		if !ok {
			continue
		}
		k := volKind{vi, s.Kind}
		if now := baseline.Status(s.Status); now != sm.last[k] {
			if sm.last[k] != "" || now == baseline.Degraded {
				out.Transitions = append(out.Transitions, Transition{At: t, Volume: vi, Kind: s.Kind, From: sm.last[k], To: now, Reference: s.Reference, Signal: s.Signal, Detail: s.Detail, Ratio: s.Ratio})
			}
			sm.last[k] = now
		}
		r := sm.opts.Rules
		degraded := baseline.Status(s.Status) == baseline.Degraded && s.Reference == string(baseline.History)
		outlier := s.CohortReference == string(baseline.Cohort) && s.CohortRatio >= r.CohortRatio && r.CohortRatio > 0
		out.Alerts = step(out.Alerts, sm.rules[VolumeDegraded], VolumeDegraded, k, t, degraded, r.DegradedFor, s.Ratio)
		out.Alerts = step(out.Alerts, sm.rules[VolumeCohortOutler], VolumeCohortOutler, k, t, outlier, r.CohortFor, s.CohortRatio)
	}
	return nil
}

// finish fires the conditions still true at the end that held long enough.
func (sm *sim) finish(out *Outcome, end time.Time) {
	for name, m := range sm.rules {
		for k, rs := range m {
			forDur := sm.opts.Rules.DegradedFor
			if name == VolumeCohortOutler {
				forDur = sm.opts.Rules.CohortFor
			}
			if !rs.active.IsZero() && !rs.fired && !end.Before(rs.active.Add(forDur)) {
				out.Alerts = append(out.Alerts, Alert{Name: name, Volume: k.vol, Kind: k.kind, Active: rs.active, Fired: rs.active.Add(forDur), Ratio: rs.ratio})
			}
		}
	}
}

// step advances one alert rule's state at a pass at t, where the
// condition holds (cond) until the next pass: the states change only at
// passes, so a condition true at t stayed true since the pass it turned
// true. It returns alerts with any firing or resolution recorded.
func step(alerts []Alert, m map[volKind]*ruleState, name string, k volKind, t time.Time, cond bool, forDur time.Duration, ratio float64) []Alert {
	rs := m[k]
	if rs == nil {
		rs = &ruleState{}
		m[k] = rs
	}
	switch {
	case cond && rs.active.IsZero():
		rs.active, rs.ratio = t, ratio
	case cond && !rs.fired && !t.Before(rs.active.Add(forDur)):
		rs.fired = true
		alerts = append(alerts, Alert{Name: name, Volume: k.vol, Kind: k.kind, Active: rs.active, Fired: rs.active.Add(forDur), Ratio: ratio})
	case !cond && !rs.active.IsZero():
		fired := rs.fired
		if !fired && !t.Before(rs.active.Add(forDur)) {
			// It held through the `for:` between two passes.
			alerts = append(alerts, Alert{Name: name, Volume: k.vol, Kind: k.kind, Active: rs.active, Fired: rs.active.Add(forDur), Ratio: rs.ratio})
			fired = true
		}
		if fired {
			for i := len(alerts) - 1; i >= 0; i-- {
				if alerts[i].Name == name && alerts[i].Volume == k.vol && alerts[i].Kind == k.kind && alerts[i].Resolved.IsZero() {
					alerts[i].Resolved = t
					break
				}
			}
		}
		*rs = ruleState{}
	}
	return alerts
}

// replayIOPSCap is the IOPS cap of every replayed run (the agent's default).
const replayIOPSCap = 100

func probeRecord(seq uint64, e event, v Volume, h *histogram.Histogram) *plumblinev1.Record {
	ops := h.Count()
	return &plumblinev1.Record{Sequence: seq, ProducedAt: timestamppb.New(e.at), Payload: &plumblinev1.Record_Probe{Probe: &plumblinev1.ProbeResult{
		MountPoint: v.Geometry.GetMountPoint(), Kind: e.kind, BlockSizeBytes: 8192, QueueDepth: 1,
		Ops: ops, Bytes: ops * 8192, Duration: durationpb.New(pacedDuration(h, replayIOPSCap)), StartedAt: timestamppb.New(e.at),
		CacheBypass: true, Latency: wire.HistogramToProto(h), OpsBudget: ops, IopsCap: replayIOPSCap, Sync: syncOf(e.kind),
	}}}
}

// pacedDuration is how long the agent's probe takes for the operations of
// h at QD 1 under an IOPS cap: its pacer (a token bucket of burst 1) starts
// an operation no sooner than 1/cap after the last one's slot, so each
// operation takes the longer of its latency and 1/cap. The latencies come
// from h's buckets (an operation faster than 1/cap adds the wait up to it,
// at its bucket's midpoint); the sum is exact for operations slower.
func pacedDuration(h *histogram.Histogram, iopsCap float64) time.Duration {
	slot := 1 / iopsCap
	wait := float64(h.ZeroCount()) * slot
	for _, b := range h.Buckets() {
		mid := math.Sqrt(histogram.LowerBound(b.Index) * histogram.UpperBound(b.Index))
		wait += float64(b.Count) * max(0, slot-mid)
	}
	return h.Sum() + time.Duration(wait*float64(time.Second))
}

func syncOf(kind string) string {
	if vocab.ProbeKind(kind).Spec().Synced {
		return "dsync"
	}
	return ""
}

// Summary is a one-line account of an outcome.
func (o Outcome) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "days=%.1f runs=%d degraded_transitions=%d alerts=%d", o.Days, o.Runs, o.Degraded(), len(o.Alerts))
	for _, name := range []string{VolumeDegraded, VolumeCohortOutler} {
		fmt.Fprintf(&b, " %s=%d", name, len(o.Fired(name, -1)))
	}
	return b.String()
}
