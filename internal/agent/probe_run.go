package agent

import (
	"context"
	"errors"
	"fmt"
	"path"
	"time"

	"github.com/plumbline/plumbline/internal/agent/probe"
	"github.com/plumbline/plumbline/internal/maintenance"
	"github.com/plumbline/plumbline/internal/vocab"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// One scheduled run of a target, in the order probeOnce takes its steps:
// the run's options (runOptions), the maintenance windows (guardWindows,
// windowCause), the disk lock (runLocked), and the report — metrics, log
// and spool (runReport). Each step does one thing; probeOnce only decides
// which report a run gets.

// probeOnce runs t's probe once and reports it.
func (a *Agent) probeOnce(ctx context.Context, t target) {
	o := a.runOptions(t)
	rep := runReport{a: a, t: t, o: o}
	wctx, stop, held := guardWindows(ctx, a.eff.Load().windows, a.o.Now(), runTimeout(o))
	if held != "" {
		rep.maintenance(probe.Result{}, held)
		return
	}
	defer stop()
	rctx, cancel := context.WithTimeout(wctx, runTimeout(o))
	defer cancel()
	before := a.mdSyncs(t)
	res, err := a.runLocked(rctx, t.lockKeys, o)
	rep.arrays = arrayActivity(before, a.mdSyncs(t))
	why, inWindow := windowCause(ctx, wctx)
	switch {
	case inWindow && (err != nil || res.Skipped):
		rep.maintenance(res, why) // stopped before its first I/O
	case inWindow && res.StoppedReason == vocab.StopInterrupted:
		res.StoppedReason = vocab.StopMaintenance // stopped at the window's start
		a.log.Info("probe stopped: a maintenance window started", "mount_point", t.mount, "kind", string(t.kind), "ops", res.Ops, "why", why)
		rep.ran(ctx, res)
	case err != nil && ctx.Err() != nil:
		// Shutting down: says nothing about the volume.
	case err != nil:
		rep.notRun(res, err)
	default:
		rep.ran(ctx, res)
	}
}

// runOptions are the options of one run of t.
func (a *Agent) runOptions(t target) probe.Options {
	o := ProbeOptions(t.sched, t.kind)
	o.Placement = t.placement
	o.ProcRoot = a.o.ProcRoot
	if a.o.Geometry.SysfsRoot != "" {
		o.SysRoot = a.o.Geometry.SysfsRoot
	}
	return o
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

// guardWindows keeps a run of at most timeout out of the maintenance
// windows: no run starts inside one (held says which, until when), and the
// context returned is cancelled with errMaintenance at the start of the
// next one. stop releases the guard.
func guardWindows(ctx context.Context, windows maintenance.Set, now time.Time, timeout time.Duration) (wctx context.Context, stop func(), held string) {
	if name, end := windows.Active(now); name != "" {
		return ctx, func() {}, "maintenance window " + name + " until " + end.Format(time.RFC3339)
	}
	wctx, stopForWindow := context.WithCancelCause(ctx)
	next, name := windows.NextStart(now)
	if next.IsZero() || next.Sub(now) >= timeout {
		return wctx, func() { stopForWindow(nil) }, ""
	}
	timer := time.AfterFunc(next.Sub(now), func() { stopForWindow(fmt.Errorf("%w: window %s started", errMaintenance, name)) })
	return wctx, func() { timer.Stop(); stopForWindow(nil) }, ""
}

// windowCause says whether a maintenance window stopped the run under
// wctx (and which), rather than a shutdown of ctx.
func windowCause(ctx, wctx context.Context) (string, bool) {
	if ctx.Err() != nil || !errors.Is(context.Cause(wctx), errMaintenance) {
		return "", false
	}
	return context.Cause(wctx).Error(), true
}

// lockTimeout is a run that never got its disks: another probe held them
// for the whole run timeout.
type lockTimeout struct {
	keys    []string
	timeout time.Duration
}

func (e *lockTimeout) Error() string {
	return fmt.Sprintf("another probe held %v for the whole run timeout of %s", e.keys, e.timeout)
}

// runLocked runs the probe with o while it holds keys, the disks it loads,
// so that no two probes load one disk at once.
func (a *Agent) runLocked(ctx context.Context, keys []string, o probe.Options) (probe.Result, error) {
	release, err := a.locks.acquire(ctx, keys)
	if err != nil {
		return probe.Result{}, &lockTimeout{keys, runTimeout(o)}
	}
	defer release()
	return a.o.Probe(ctx, o)
}

// runReport reports one run of t with options o: it counts it, logs it
// and spools it.
type runReport struct {
	a *Agent
	t target
	o probe.Options
	// arrays are the md arrays under the volume that ran a sync action
	// at the run's start or end (the run's mark).
	arrays []*plumblinev1.ArrayActivity
}

// ran reports a run the engine carried out (completed, stopped or skipped
// by its own guards); an interrupted run while shutting down is counted
// but not spooled: it says nothing about the volume.
func (r runReport) ran(ctx context.Context, res probe.Result) {
	r.a.countRun(r.t, res)
	if res.StoppedReason == vocab.StopInterrupted && ctx.Err() != nil {
		return
	}
	pr := r.proto(res)
	pr.ArrayActivity = r.arrays
	r.a.append(&plumblinev1.Record{Payload: &plumblinev1.Record_Probe{Probe: pr}})
}

// notRun reports a run that never started its I/O: no disk lock, or the
// engine refused or failed. It is reported like any other, so the server
// sees a volume whose probes never run.
func (r runReport) notRun(partial probe.Result, err error) {
	kind := string(r.t.kind)
	if lt := (*lockTimeout)(nil); errors.As(err, &lt) {
		r.a.metrics.countRun(kind, "skipped", vocab.StopLockTimeout)
		r.a.log.Warn("probe skipped", "mount_point", r.t.mount, "kind", kind, "reason", vocab.StopLockTimeout, "err", err)
		r.spool(notRun(r.o, partial, vocab.StopLockTimeout, err))
		return
	}
	reason := probe.FailureReason(err)
	r.a.metrics.countRun(kind, "error", reason)
	r.a.log.Error("probe", "mount_point", r.t.mount, "kind", kind, "reason", reason, "err", err)
	r.spool(notRun(r.o, partial, reason, err))
}

// maintenance reports a run a maintenance window held back: skipped, no
// operations, stop reason maintenance (no failure text: it is not a
// failure).
func (r runReport) maintenance(partial probe.Result, why string) {
	res := notRun(r.o, partial, vocab.StopMaintenance, errors.New(why))
	res.Failure = ""
	r.a.metrics.countRun(string(r.t.kind), "skipped", vocab.StopMaintenance)
	r.a.log.Debug("probe skipped", "mount_point", r.t.mount, "kind", r.t.kind, "reason", vocab.StopMaintenance, "why", why)
	r.spool(res)
}

// spool appends one run of t to the spool.
func (r runReport) spool(res probe.Result) {
	r.a.append(&plumblinev1.Record{Payload: &plumblinev1.Record_Probe{Probe: r.proto(res)}})
}

// proto is one run of t on the wire.
func (r runReport) proto(res probe.Result) *plumblinev1.ProbeResult {
	pr := ProbeResultToProto(r.t.mount, res)
	if pr.Device == "" {
		pr.Device = path.Base(r.t.device)
	}
	return pr
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
		a.metrics.countRun(kind, "skipped", res.StoppedReason)
	case res.StoppedReason != "":
		a.metrics.countRun(kind, "stopped", res.StoppedReason)
	default:
		a.metrics.countRun(kind, "completed", "")
	}
}
