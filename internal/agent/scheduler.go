package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/plumbline/plumbline/internal/agent/config"
	"github.com/plumbline/plumbline/internal/agent/geometry"
	"github.com/plumbline/plumbline/internal/agent/probe"
	"github.com/plumbline/plumbline/internal/ctxtime"
	"github.com/plumbline/plumbline/internal/mounts"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// target is one (volume, kind) probe timer.
type target struct {
	mount    string
	device   string
	lockKeys []string
	// arrays are the md arrays under the volume (geometry.MDArrays),
	// whose sync action each run records.
	arrays     []string
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
	return t.mount + "\x00" + string(t.kind) + "\x00" + fmt.Sprint(t.lockKeys) + "\x00" + fmt.Sprint(t.arrays) + "\x00" + string(settings) + "\x00" + string(placement)
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
				t := target{mount: v.GetMountPoint(), device: v.GetDevice(), lockKeys: lockKeys(v), arrays: geometry.MDArrays(v), kind: k, sched: s, schedIndex: i}
				if k.Spec().Geometry {
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
// budget, and what its kind's runner adds (a stripe-scan: where its reads
// go and whether its budget lets it infer a stripe unit, a warning when it
// cannot).
func (a *Agent) logScheduled(t target) {
	sc := t.sched
	attrs := []any{"mount_point", t.mount, "kind", t.kind, "every", sc.Every, "ops", sc.Ops, "max_duration", sc.MaxDuration}
	if sc.IOPS != nil {
		attrs = append(attrs, "iops", *sc.IOPS)
	}
	more, warning := probe.Preview(t.kind, sc.Ops, t.placement)
	attrs = append(attrs, more...)
	if warning != "" {
		a.log.Warn("probe scheduled, but "+warning, attrs...)
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
