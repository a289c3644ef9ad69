//go:build linux

package fleetlab

import (
	"context"
	"fmt"
	"slices"
	"time"
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
	var fig Figures
	faultedMount := s.Mounts[sc.Faulted]
	expected := func(a PromAlert) bool {
		mp := a.Labels["mount_point"]
		switch a.Labels["alertname"] {
		case VolumeDegraded:
			return mp == faultedMount
		case VolumeCohortOutlier:
			for _, i := range sc.Outliers {
				if s.Mounts[i] == mp {
					return true
				}
			}
		}
		return false
	}
	seen := map[string]bool{}
	// watch polls the alerts until done says so, collecting unexpected
	// firing degradation alerts on the way.
	watch := func(phase string, timeout time.Duration, done func([]PromAlert, time.Time) bool) error {
		deadline := time.Now().Add(timeout)
		for {
			if name := s.Exited(); name != "" {
				return fmt.Errorf("%s: %s exited", phase, name)
			}
			alerts, err := s.Alerts(ctx)
			now := time.Now()
			if err == nil {
				for _, a := range alerts {
					n := a.Labels["alertname"]
					if a.State != "firing" || n != VolumeDegraded && n != VolumeCohortOutlier || expected(a) {
						continue
					}
					key := n + a.Labels["mount_point"] + a.Labels["kind"]
					if !seen[key] {
						seen[key] = true
						fig.Unexpected = append(fig.Unexpected, a)
						s.logf("UNEXPECTED %s firing: %v", n, a.Labels)
					}
				}
				if done(alerts, now) {
					return nil
				}
			}
			if now.After(deadline) {
				return fmt.Errorf("%s: not done within %s (last error %v)", phase, timeout, err)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(sc.Poll):
			}
		}
	}
	// Warm-up: every cohort volume has a trusted history for every kind
	// (a history ratio for three kinds), and the outliers a cohort ratio.
	err := watch("warm-up", sc.Warmup, func([]PromAlert, time.Time) bool {
		hist, err := s.Query(ctx, `count by (mount_point) (plumbline_baseline_ratio{reference="history"})`, "mount_point")
		if err != nil {
			return false
		}
		for _, i := range sc.Cohort {
			if hist[s.Mounts[i]] < 3 {
				return false
			}
		}
		coh, err := s.Query(ctx, `count by (mount_point) (plumbline_baseline_ratio{reference="cohort"})`, "mount_point")
		if err != nil {
			return false
		}
		for _, i := range sc.Outliers {
			if coh[s.Mounts[i]] < 1 {
				return false
			}
		}
		return true
	})
	if err != nil {
		return fig, err
	}
	s.logf("warm-up done: cohort histories trusted")
	if err := s.Fault(ctx, sc.Faulted, "slow", "--member", fmt.Sprint(sc.Member), "--factor", fmt.Sprint(sc.Factor)); err != nil {
		return fig, err
	}
	fig.FaultAt = time.Now()
	outlierDone := func(alerts []PromAlert, now time.Time) {
		if !fig.OutlierFired.IsZero() {
			return
		}
		for _, a := range alerts {
			if a.Labels["alertname"] == VolumeCohortOutlier && a.State == "firing" && expected(a) {
				fig.OutlierFired = now
				s.logf("%s firing for %s %s", VolumeCohortOutlier, a.Labels["mount_point"], a.Labels["kind"])
			}
		}
	}
	err = watch("detect", sc.Detect, func(alerts []PromAlert, now time.Time) bool {
		outlierDone(alerts, now)
		for _, a := range alerts {
			if a.Labels["alertname"] == VolumeDegraded && a.Labels["mount_point"] == faultedMount && a.State == "firing" {
				if !slices.Contains(fig.FiredKinds, a.Labels["kind"]) {
					fig.FiredKinds = append(fig.FiredKinds, a.Labels["kind"])
				}
				if fig.FiredAt.IsZero() {
					fig.FiredAt = now
					fig.Detect = now.Sub(fig.FaultAt)
					s.logf("%s firing for %s %s after %s", VolumeDegraded, faultedMount, a.Labels["kind"], fig.Detect.Round(time.Second))
				}
			}
		}
		return !fig.FiredAt.IsZero()
	})
	if err != nil {
		return fig, err
	}
	if err := s.Fault(ctx, sc.Faulted, "restore"); err != nil {
		return fig, err
	}
	fig.RestoredAt = time.Now()
	err = watch("clear", sc.Clear, func(alerts []PromAlert, now time.Time) bool {
		outlierDone(alerts, now)
		for _, a := range alerts {
			if a.Labels["alertname"] == VolumeDegraded && a.Labels["mount_point"] == faultedMount {
				if a.State == "firing" && !slices.Contains(fig.FiredKinds, a.Labels["kind"]) {
					fig.FiredKinds = append(fig.FiredKinds, a.Labels["kind"])
				}
				return false
			}
		}
		fig.ResolvedAt = now
		fig.Clear = now.Sub(fig.RestoredAt)
		s.logf("%s resolved for %s after %s", VolumeDegraded, faultedMount, fig.Clear.Round(time.Second))
		return true
	})
	if err != nil {
		return fig, err
	}
	if sc.WaitOutlier && len(sc.Outliers) > 0 && fig.OutlierFired.IsZero() {
		err = watch("outlier", sc.Detect, func(alerts []PromAlert, now time.Time) bool {
			outlierDone(alerts, now)
			return !fig.OutlierFired.IsZero()
		})
	}
	return fig, err
}
