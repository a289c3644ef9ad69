package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"path"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/plumbline/plumbline/internal/config"
	"github.com/plumbline/plumbline/internal/ctxtime"
	"github.com/plumbline/plumbline/internal/geometry"
	"github.com/plumbline/plumbline/internal/mounts"
	"github.com/plumbline/plumbline/internal/probe"
	"github.com/plumbline/plumbline/internal/stripescan"
	"github.com/plumbline/plumbline/internal/vocab"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// target is one (volume, kind) probe timer.
type target struct {
	mount      string
	device     string
	lockKeys   []string
	kind       probe.Kind
	sched      config.ProbeSchedule
	schedIndex int // in Config.Probes
	// placement is where the volume's file system lies on the device a
	// stripe-scan measures (probe.PlacementFor the discovered volume);
	// zero for the other kinds, which do not place their reads.
	placement probe.Placement
}

// key identifies a target's timer: a schedule whose settings changed
// (central policy) is a new timer, and so is a stripe-scan whose placement
// changed (new geometry: a partition moved, a layer appeared).
func (t target) key() string {
	settings, _ := json.Marshal(t.sched)      // plain data: cannot fail
	placement, _ := json.Marshal(t.placement) // plain data: cannot fail
	return t.mount + "\x00" + string(t.kind) + "\x00" + fmt.Sprint(t.lockKeys) + "\x00" + string(settings) + "\x00" + string(placement)
}

// sameSchedule compares two schedules by value (pointers followed).
func sameSchedule(a, b config.ProbeSchedule) bool { return reflect.DeepEqual(a, b) }

// scheduler owns one goroutine per target, cloudprober style.
type scheduler struct {
	a       *Agent
	wg      sync.WaitGroup
	mu      sync.Mutex
	running map[string]context.CancelFunc
}

// targetsFor maps volumes to probe targets: the first schedule whose
// mount_point glob matches a volume's mount point (mounts.MatchGlob)
// wins for each kind. A stripe-scan target carries its placement from the
// volume's discovered geometry.
func targetsFor(vols []*plumblinev1.Volume, scheds []config.ProbeSchedule) []target {
	var out []target
	for _, v := range vols {
		done := map[probe.Kind]bool{}
		for i, s := range scheds {
			if !mounts.MatchGlob(s.MountPoint, v.GetMountPoint()) {
				continue
			}
			for _, k := range s.Kinds {
				if done[k] {
					continue
				}
				done[k] = true
				t := target{mount: v.GetMountPoint(), device: v.GetDevice(), lockKeys: lockKeys(v), kind: k, sched: s, schedIndex: i}
				if k == probe.StripeScan {
					t.placement = probe.PlacementFor(v)
				}
				out = append(out, t)
			}
		}
	}
	return out
}

// lockKeys are the devices a probe on v loads: its disks, or the volume's
// device when the disks are unknown.
func lockKeys(v *plumblinev1.Volume) []string {
	var keys []string
	for _, l := range v.GetLayers() {
		if l.GetKind() == geometry.KindDisk && l.GetDevice() != "" && !slices.Contains(keys, l.GetDevice()) {
			keys = append(keys, l.GetDevice())
		}
	}
	if len(keys) == 0 {
		keys = []string{v.GetDevice()}
		if v.GetDevice() == "" {
			keys = []string{v.GetMountPoint()}
		}
	}
	slices.Sort(keys)
	return keys
}

// update starts timers for new targets and stops those that are gone.
func (s *scheduler) update(ctx context.Context, vols []*plumblinev1.Volume) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ctx.Err() != nil {
		return
	}
	want := map[string]target{}
	for _, t := range targetsFor(vols, s.a.eff.Load().cfg.Probes) {
		want[t.key()] = t
	}
	for k, cancel := range s.running {
		if _, ok := want[k]; !ok {
			cancel()
			delete(s.running, k)
		}
	}
	for k, t := range want {
		if _, ok := s.running[k]; ok {
			continue
		}
		tctx, cancel := context.WithCancel(ctx)
		s.running[k] = cancel
		s.wg.Go(func() { s.a.probeLoop(tctx, t) })
		s.a.logScheduled(t)
	}
}

// logScheduled says what a scheduled probe will do: its kind, period and
// budget, and for a stripe-scan where its reads go and whether its budget
// lets it infer a stripe unit (a warning when it cannot).
func (a *Agent) logScheduled(t target) {
	sc := t.sched
	attrs := []any{"mount_point", t.mount, "kind", t.kind, "every", sc.Every, "ops", sc.Ops, "max_duration", sc.MaxDuration}
	if sc.IOPS != nil {
		attrs = append(attrs, "iops", *sc.IOPS)
	}
	if t.kind != probe.StripeScan {
		a.log.Info("probe scheduled", attrs...)
		return
	}
	pl := t.placement
	need := stripescan.MinOps()
	attrs = append(attrs, "placement_device", pl.Device, "placement_basis", pl.Basis, "placement_offset_known", pl.Known, "placement_why", pl.Why,
		"infers_stripe_unit", sc.Ops >= need)
	if sc.Ops < need {
		a.log.Warn(fmt.Sprintf("probe scheduled, but a stripe-scan of %d ops cannot infer a stripe unit: it needs at least %d (omit ops for the kind's default, %d)",
			sc.Ops, need, vocab.StripeScanMaxOps), attrs...)
		return
	}
	a.log.Info("probe scheduled", attrs...)
}

// stop cancels every timer and waits for the running probes to end.
func (s *scheduler) stop() {
	s.mu.Lock()
	for k, cancel := range s.running {
		cancel()
		delete(s.running, k)
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// jittered returns d plus a uniform draw from [0, j).
func jittered(d, j time.Duration) time.Duration {
	if j <= 0 {
		return d
	}
	return d + rand.N(j)
}

// probeLoop runs t's probe: first after a random delay in [0, jitter), then
// every `every` plus a fresh draw in [0, jitter).
func (a *Agent) probeLoop(ctx context.Context, t target) {
	wait := jittered(0, t.sched.Jitter)
	for ctxtime.Sleep(ctx, wait) == nil {
		a.probeOnce(ctx, t)
		wait = jittered(t.sched.Every, t.sched.Jitter)
	}
}

// runTimeout bounds one run: the measured phase, the busy sampling, a
// first fill of the probe file at the fill rate, and slack.
func runTimeout(o probe.Options) time.Duration {
	d := o.MaxDuration + o.BusyWindow + 30*time.Second
	if o.FillRate > 0 {
		d += time.Duration(float64(o.FileSize) / float64(o.FillRate) * float64(time.Second))
	}
	return d
}

// errMaintenance cancels a run whose maintenance window started.
var errMaintenance = errors.New(vocab.StopMaintenance)

func (a *Agent) probeOnce(ctx context.Context, t target) {
	o := ProbeOptions(t.sched, t.kind)
	o.Placement = t.placement
	o.ProcRoot = a.o.ProcRoot
	if a.o.Geometry.SysfsRoot != "" {
		o.SysRoot = a.o.Geometry.SysfsRoot
	}
	// No run starts inside a maintenance window; a run stops at the start
	// of the next one.
	windows, now := a.eff.Load().windows, a.o.Now()
	if name, end := windows.Active(now); name != "" {
		a.maintenanceSkip(t, o, probe.Result{}, "maintenance window "+name+" until "+end.Format(time.RFC3339))
		return
	}
	wctx, stopForWindow := context.WithCancelCause(ctx)
	defer stopForWindow(nil)
	if next, name := windows.NextStart(now); !next.IsZero() && next.Sub(now) < runTimeout(o) {
		timer := time.AfterFunc(next.Sub(now), func() { stopForWindow(fmt.Errorf("%w: window %s started", errMaintenance, name)) })
		defer timer.Stop()
	}
	rctx, cancel := context.WithTimeout(wctx, runTimeout(o))
	defer cancel()
	inWindow := func() bool { return ctx.Err() == nil && errors.Is(context.Cause(wctx), errMaintenance) }
	kind := string(t.kind)
	release, err := a.locks.acquire(rctx, t.lockKeys)
	if err != nil {
		if inWindow() {
			a.maintenanceSkip(t, o, probe.Result{}, context.Cause(wctx).Error())
			return
		}
		if ctx.Err() != nil {
			return // shutting down
		}
		a.metrics.probeRuns.WithLabelValues(kind, "skipped").Inc()
		a.metrics.probeSkips.WithLabelValues(kind, vocab.StopLockTimeout).Inc()
		err = fmt.Errorf("another probe held %v for the whole run timeout of %s", t.lockKeys, runTimeout(o))
		a.log.Warn("probe skipped", "mount_point", t.mount, "kind", kind, "reason", vocab.StopLockTimeout, "err", err)
		a.spoolProbe(t, notRun(o, probe.Result{}, vocab.StopLockTimeout, err))
		return
	}
	res, err := a.o.Probe(rctx, o)
	release()
	switch {
	case inWindow() && (err != nil || res.Skipped):
		a.maintenanceSkip(t, o, res, context.Cause(wctx).Error()) // stopped before its first I/O
		return
	case inWindow() && res.StoppedReason == vocab.StopInterrupted:
		res.StoppedReason = vocab.StopMaintenance // stopped at the window's start
		a.log.Info("probe stopped: a maintenance window started", "mount_point", t.mount, "kind", kind, "ops", res.Ops, "why", context.Cause(wctx))
	case err != nil:
		if ctx.Err() != nil {
			return // shutting down: says nothing about the volume
		}
		// A refused or failed run is reported like any other, so the
		// server sees a volume whose probes never run.
		reason := probe.FailureReason(err)
		a.metrics.probeRuns.WithLabelValues(kind, "error").Inc()
		a.metrics.probeSkips.WithLabelValues(kind, reason).Inc()
		a.log.Error("probe", "mount_point", t.mount, "kind", kind, "reason", reason, "err", err)
		a.spoolProbe(t, notRun(o, res, reason, err))
		return
	}
	a.countRun(t, res)
	if res.StoppedReason == vocab.StopInterrupted && ctx.Err() != nil {
		return // shutting down: an interrupted run says nothing about the volume
	}
	a.spoolProbe(t, res)
}

// countRun counts a run by result and stop reason.
func (a *Agent) countRun(t target, res probe.Result) {
	kind := string(t.kind)
	if res.FileRewrittenFrom > 0 {
		a.log.Warn("probe file rewritten: its size changed", "mount_point", t.mount, "file", res.File,
			"old_size_bytes", res.FileRewrittenFrom, "new_size_bytes", res.FileSize, "fill_seconds", res.FillSeconds)
	}
	switch {
	case res.Skipped:
		a.metrics.probeRuns.WithLabelValues(kind, "skipped").Inc()
		a.metrics.probeSkips.WithLabelValues(kind, res.StoppedReason).Inc()
	case res.StoppedReason != "":
		a.metrics.probeRuns.WithLabelValues(kind, "stopped").Inc()
		a.metrics.probeSkips.WithLabelValues(kind, res.StoppedReason).Inc()
	default:
		a.metrics.probeRuns.WithLabelValues(kind, "completed").Inc()
	}
}

// maintenanceSkip reports a run a maintenance window held back: skipped,
// no operations, stop reason maintenance (no failure text: it is not a
// failure).
func (a *Agent) maintenanceSkip(t target, o probe.Options, partial probe.Result, why string) {
	r := notRun(o, partial, vocab.StopMaintenance, errors.New(why))
	r.Failure = ""
	a.metrics.probeRuns.WithLabelValues(string(t.kind), "skipped").Inc()
	a.metrics.probeSkips.WithLabelValues(string(t.kind), vocab.StopMaintenance).Inc()
	a.log.Debug("probe skipped", "mount_point", t.mount, "kind", t.kind, "reason", vocab.StopMaintenance, "why", why)
	a.spoolProbe(t, r)
}

// spoolProbe spools one run of t.
func (a *Agent) spoolProbe(t target, res probe.Result) {
	pr := ProbeResultToProto(t.mount, res)
	if pr.Device == "" {
		pr.Device = path.Base(t.device)
	}
	a.append(&plumblinev1.Record{Payload: &plumblinev1.Record_Probe{Probe: pr}})
}
