package agent

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"strconv"

	"github.com/plumbline/plumbline/internal/agent/config"
	"github.com/plumbline/plumbline/internal/agent/geometry"
	"github.com/plumbline/plumbline/internal/mounts"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// coverage says what the agent does not watch: the mounts discovery left
// out and the probe schedules whose glob matches no volume. It logs each
// at start and when it changes (not at every discovery) and keeps the
// agent's gauges plumbline_agent_volumes_filtered and
// plumbline_agent_schedule_unmatched. It belongs to the geometry loop.
type coverage struct {
	log       *slog.Logger
	m         *metrics
	scheds    []config.ProbeSchedule
	filtered  map[string]geometry.Filtered // by mount point, as last logged
	unmatched map[int]bool                 // schedule index → unmatched, as last logged
	shadowed  map[int]bool                 // schedule index → matches volumes but probes none, as last logged
}

func newCoverage(log *slog.Logger, m *metrics) *coverage {
	return &coverage{log: log, m: m, filtered: map[string]geometry.Filtered{}, unmatched: map[int]bool{}, shadowed: map[int]bool{}}
}

// setSchedules takes the effective schedules; when they changed (central
// policy), what was logged and exposed of the old ones is forgotten.
func (c *coverage) setSchedules(scheds []config.ProbeSchedule) {
	if slices.EqualFunc(scheds, c.scheds, sameSchedule) {
		return
	}
	c.scheds = scheds
	c.unmatched, c.shadowed = map[int]bool{}, map[int]bool{}
	c.m.unmatched.Reset()
}

// quietFilter says which filtered mounts are logged at debug level only:
// tmpfs, bind mounts and overlays are never a database volume of their own,
// and containers make them come and go.
func quietFilter(f geometry.Filtered) bool {
	return f.Reason == geometry.FilterInMemory || f.Reason == geometry.FilterDuplicate || f.FSType == "overlay"
}

// filterHint explains each filter reason in the log.
var filterHint = map[string]string{
	geometry.FilterExcluded:      "the config's include/exclude settings leave it out",
	geometry.FilterInMemory:      "it lives in memory",
	geometry.FilterNoBlockDevice: "no local block device under it (network, FUSE, overlay, or an anonymous device such as btrfs or ZFS): geometry and probes need one",
	geometry.FilterUnknownDevice: "its device number is not in sysfs",
	geometry.FilterDuplicate:     "another mount of the same device is the volume (a bind mount)",
}

func (c *coverage) update(ctx context.Context, scheds []config.ProbeSchedule, vols []*plumblinev1.Volume, filtered []geometry.Filtered) {
	c.setSchedules(scheds)
	// Filtered mounts: log the new ones and those gone, count by reason.
	now := make(map[string]geometry.Filtered, len(filtered))
	counts := map[string]int{}
	for _, f := range filtered {
		now[f.MountPoint] = f
		counts[f.Reason]++
	}
	for _, mp := range slices.Sorted(maps.Keys(now)) {
		f := now[mp]
		if old, ok := c.filtered[mp]; ok && old == f {
			continue
		}
		level := slog.LevelInfo
		if quietFilter(f) {
			level = slog.LevelDebug
		}
		c.log.Log(ctx, level, "mount filtered out by discovery: not a volume, never probed", "mount_point", f.MountPoint,
			"fs_type", f.FSType, "source", f.Source, "reason", f.Reason, "why", filterHint[f.Reason])
	}
	for _, mp := range slices.Sorted(maps.Keys(c.filtered)) {
		if _, ok := now[mp]; !ok {
			c.log.Log(ctx, slog.LevelDebug, "mount no longer filtered out (unmounted, or now a volume)", "mount_point", mp)
		}
	}
	c.filtered = now
	for _, r := range geometry.FilterReasons {
		c.m.filtered.WithLabelValues(r).Set(float64(counts[r]))
	}

	// Schedules: unmatched when the glob matches no volume; shadowed when
	// it does, but earlier schedules take every kind on those volumes.
	probed := map[int]bool{}
	for _, t := range targetsFor(vols, c.scheds) {
		probed[t.schedIndex] = true
	}
	for i, s := range c.scheds {
		var matched []string
		for _, v := range vols {
			if mounts.MatchGlob(s.MountPoint, v.GetMountPoint()) {
				matched = append(matched, v.GetMountPoint())
			}
		}
		unmatched, shadowed := len(matched) == 0, len(matched) > 0 && !probed[i]
		name := "probes[" + strconv.Itoa(i) + "]"
		switch {
		case unmatched && !c.unmatched[i]:
			var near []string
			for _, f := range filtered {
				if mounts.MatchGlob(s.MountPoint, f.MountPoint) {
					near = append(near, f.MountPoint+" ("+f.FSType+": "+f.Reason+")")
				}
			}
			args := []any{"schedule", name, "mount_point", s.MountPoint}
			if len(near) > 0 {
				args = append(args, "filtered_out", near)
			}
			c.log.Warn("probe schedule matches no volume: nothing is probed for it", args...)
		case !unmatched && c.unmatched[i]:
			c.log.Info("probe schedule matches volumes again", "schedule", name, "mount_point", s.MountPoint, "volumes", matched)
		}
		if shadowed && !c.shadowed[i] {
			c.log.Warn("probe schedule probes nothing: earlier schedules take every kind on the volumes it matches", "schedule", name, "mount_point", s.MountPoint, "volumes", matched)
		}
		c.unmatched[i], c.shadowed[i] = unmatched, shadowed
		v := 0.0
		if unmatched {
			v = 1
		}
		c.m.unmatched.WithLabelValues(strconv.Itoa(i), s.MountPoint).Set(v)
	}
}
