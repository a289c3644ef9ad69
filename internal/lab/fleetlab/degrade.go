//go:build linux

package fleetlab

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/plumbline/plumbline/internal/ctxtime"
)

// Alert names the scenario watches.
const (
	VolumeDegraded      = "PlumblineVolumeDegraded"
	VolumeCohortOutlier = "PlumblineVolumeCohortOutlier"
)

// Scenario is the degradation experiment on a running stack: wait until
// every cohort volume's history is trusted, slow one member of the
// Faulted array by Factor, wait for PlumblineVolumeDegraded to fire for
// it, restore, wait for the alert to resolve; the always-slow Outliers
// must reach PlumblineVolumeCohortOutlier (when WaitOutlier), and no other
// volume may ever fire a degradation alert.
type Scenario struct {
	Cohort      []int // arrays of one profile (the Faulted one among them)
	Faulted     int
	Outliers    []int // arrays slow from the start (Array.SlowFromStart)
	Factor      float64
	Member      int
	WaitOutlier bool
	Poll        time.Duration
	// Timeouts of the phases.
	Warmup, Detect, Clear time.Duration
}

// Figures are what the scenario measured.
type Figures struct {
	FaultAt, FiredAt, RestoredAt, ResolvedAt time.Time
	Detect, Clear                            time.Duration
	// FiredKinds are the probe kinds PlumblineVolumeDegraded fired for.
	FiredKinds []string
	// OutlierFired is when the first outlier's cohort alert fired.
	OutlierFired time.Time
	// Unexpected are degradation alerts that fired for any other volume
	// (or a cohort outlier for a volume that is not an outlier).
	Unexpected []PromAlert
}

func (f Figures) String() string {
	return fmt.Sprintf("detect %s (kinds %v), clear %s, unexpected alerts %d", f.Detect.Round(time.Second), f.FiredKinds, f.Clear.Round(time.Second), len(f.Unexpected))
}

// Run runs the scenario. Its error says which phase timed out; the
// figures so far are returned with it.
func (sc Scenario) Run(ctx context.Context, s *Stack) (Figures, error) {
	r := &scenarioRun{sc: sc, s: s, faulted: s.Mounts[sc.Faulted], seen: map[string]bool{}}
	// Warm-up: every cohort volume has a trusted history for every kind
	// (a history ratio for three kinds), and the outliers a cohort ratio.
	err := r.watch(ctx, "warm-up", sc.Warmup, func([]PromAlert, time.Time) bool {
		return r.atLeast(ctx, "history", sc.Cohort, 3) && r.atLeast(ctx, "cohort", sc.Outliers, 1)
	})
	if err != nil {
		return r.fig, err
	}
	s.logf("warm-up done: cohort histories trusted")
	if err := s.Fault(ctx, sc.Faulted, "slow", "--member", fmt.Sprint(sc.Member), "--factor", fmt.Sprint(sc.Factor)); err != nil {
		return r.fig, err
	}
	r.fig.FaultAt = time.Now()
	if err := r.watch(ctx, "detect", sc.Detect, r.fired); err != nil {
		return r.fig, err
	}
	if err := s.Fault(ctx, sc.Faulted, "restore"); err != nil {
		return r.fig, err
	}
	r.fig.RestoredAt = time.Now()
	if err := r.watch(ctx, "clear", sc.Clear, r.resolved); err != nil {
		return r.fig, err
	}
	if sc.WaitOutlier && len(sc.Outliers) > 0 && r.fig.OutlierFired.IsZero() {
		err = r.watch(ctx, "outlier", sc.Detect, func(alerts []PromAlert, now time.Time) bool {
			r.outlier(alerts, now)
			return !r.fig.OutlierFired.IsZero()
		})
	}
	return r.fig, err
}

// scenarioRun is one run of a Scenario: what it has seen so far.
type scenarioRun struct {
	sc      Scenario
	s       *Stack
	faulted string // the faulted array's mount point
	fig     Figures
	seen    map[string]bool // unexpected alerts already noted
}

// expected reports an alert the scenario allows: the degradation of the
// faulted volume, the cohort alert of an outlier.
func (r *scenarioRun) expected(a PromAlert) bool {
	mp := a.Labels["mount_point"]
	switch a.Labels["alertname"] {
	case VolumeDegraded:
		return mp == r.faulted
	case VolumeCohortOutlier:
		for _, i := range r.sc.Outliers {
			if r.s.Mounts[i] == mp {
				return true
			}
		}
	}
	return false
}

// watch polls the alerts until done says so (or timeout), collecting
// unexpected firing degradation alerts on the way.
func (r *scenarioRun) watch(ctx context.Context, phase string, timeout time.Duration, done func([]PromAlert, time.Time) bool) error {
	deadline := time.Now().Add(timeout)
	for {
		if name := r.s.Exited(); name != "" {
			return fmt.Errorf("%s: %s exited", phase, name)
		}
		alerts, err := r.s.Alerts(ctx)
		now := time.Now()
		if err == nil {
			r.noteUnexpected(alerts)
			if done(alerts, now) {
				return nil
			}
		}
		if now.After(deadline) {
			return fmt.Errorf("%s: not done within %s (last error %v)", phase, timeout, err)
		}
		if err := ctxtime.Sleep(ctx, r.sc.Poll); err != nil {
			return err
		}
	}
}

func (r *scenarioRun) noteUnexpected(alerts []PromAlert) {
	for _, a := range alerts {
		n := a.Labels["alertname"]
		if a.State != "firing" || n != VolumeDegraded && n != VolumeCohortOutlier || r.expected(a) {
			continue
		}
		key := n + a.Labels["mount_point"] + a.Labels["kind"]
		if !r.seen[key] {
			r.seen[key] = true
			r.fig.Unexpected = append(r.fig.Unexpected, a)
			r.s.logf("UNEXPECTED %s firing: %v", n, a.Labels)
		}
	}
}

// atLeast reports whether each of the arrays has at least n
// plumbline_baseline_ratio series against reference.
func (r *scenarioRun) atLeast(ctx context.Context, reference string, arrays []int, n float64) bool {
	got, err := r.s.Query(ctx, `count by (mount_point) (plumbline_baseline_ratio{reference="`+reference+`"})`, "mount_point")
	if err != nil {
		return false
	}
	for _, i := range arrays {
		if got[r.s.Mounts[i]] < n {
			return false
		}
	}
	return true
}

// outlier notes when an outlier's cohort alert first fires.
func (r *scenarioRun) outlier(alerts []PromAlert, now time.Time) {
	if !r.fig.OutlierFired.IsZero() {
		return
	}
	for _, a := range alerts {
		if a.Labels["alertname"] == VolumeCohortOutlier && a.State == "firing" && r.expected(a) {
			r.fig.OutlierFired = now
			r.s.logf("%s firing for %s %s", VolumeCohortOutlier, a.Labels["mount_point"], a.Labels["kind"])
		}
	}
}

// noteKind adds a kind the faulted volume's alert fired for.
func (r *scenarioRun) noteKind(a PromAlert) {
	if a.State == "firing" && !slices.Contains(r.fig.FiredKinds, a.Labels["kind"]) {
		r.fig.FiredKinds = append(r.fig.FiredKinds, a.Labels["kind"])
	}
}

// fired: the detect phase is done once the faulted volume's
// PlumblineVolumeDegraded fires.
func (r *scenarioRun) fired(alerts []PromAlert, now time.Time) bool {
	r.outlier(alerts, now)
	for _, a := range alerts {
		if a.Labels["alertname"] != VolumeDegraded || a.Labels["mount_point"] != r.faulted || a.State != "firing" {
			continue
		}
		r.noteKind(a)
		if r.fig.FiredAt.IsZero() {
			r.fig.FiredAt, r.fig.Detect = now, now.Sub(r.fig.FaultAt)
			r.s.logf("%s firing for %s %s after %s", VolumeDegraded, r.faulted, a.Labels["kind"], r.fig.Detect.Round(time.Second))
		}
	}
	return !r.fig.FiredAt.IsZero()
}

// resolved: the clear phase is done once the faulted volume has no
// PlumblineVolumeDegraded alert left, firing or pending.
func (r *scenarioRun) resolved(alerts []PromAlert, now time.Time) bool {
	r.outlier(alerts, now)
	for _, a := range alerts {
		if a.Labels["alertname"] == VolumeDegraded && a.Labels["mount_point"] == r.faulted {
			r.noteKind(a)
			return false
		}
	}
	r.fig.ResolvedAt, r.fig.Clear = now, now.Sub(r.fig.RestoredAt)
	r.s.logf("%s resolved for %s after %s", VolumeDegraded, r.faulted, r.fig.Clear.Round(time.Second))
	return true
}
