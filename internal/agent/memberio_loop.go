package agent

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/plumbline/plumbline/internal/agent/geometry"
	"github.com/plumbline/plumbline/internal/ctxtime"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// memberOffPoll is how often a loop whose interval is off (0s) looks
// whether central policy turned it on.
const memberOffPoll = time.Minute

// memberMetrics are the member I/O loop's counters.
type memberMetrics struct {
	groups  prometheus.Gauge
	records prometheus.Counter
	dropped *prometheus.CounterVec // reason
	// lastGroups is the groups last logged (describeGroups); only the
	// geometry loop touches it.
	lastGroups string
}

func newMemberMetrics(reg prometheus.Registerer) *memberMetrics {
	const ns = "plumbline_agent_member_io_"
	m := &memberMetrics{
		groups: prometheus.NewGauge(prometheus.GaugeOpts{Name: ns + "groups",
			Help: "Groups of sibling devices (md members, mirror legs, the PVs of a striped LV, multipath paths) under the volumes of the last geometry discovery, whose members' I/O the agent samples."}),
		records: prometheus.NewCounter(prometheus.CounterOpts{Name: ns + "records_total",
			Help: "Member I/O records spooled (one per interval in which a group did I/O)."}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: ns + "dropped_total",
			Help: "Members left out of an interval, by reason: no-previous-sample, device-replaced, counter-backwards; and groups or members over the agent's bounds (over-limit)."}, []string{"reason"}),
	}
	reg.MustRegister(m.groups, m.records, m.dropped)
	return m
}

// setMembers makes the member groups under vols the ones sampled, and
// says so in the log when they changed.
func (a *Agent) setMembers(vols []*plumblinev1.Volume) {
	set, res := newMemberSet(vols, a.o.Geometry)
	a.members.Store(set)
	m := a.memberMetrics
	m.groups.Set(float64(len(set.groups)))
	desc := describeGroups(set.groups)
	if desc == m.lastGroups {
		return
	}
	m.lastGroups = desc
	a.log.Info("member I/O: the groups of sibling devices under the volumes", "groups", len(set.groups), "members", desc)
	if n := res.Dropped + res.Truncated; n > 0 {
		m.dropped.WithLabelValues("over-limit").Add(float64(n))
		a.log.Warn("member I/O: groups over the agent's bounds left out or cut", "groups_dropped", res.Dropped, "groups_cut", res.Truncated,
			"max_groups", geometry.MaxMemberGroups, "max_members", geometry.MaxGroupMembers, "max_members_in_all", geometry.MaxMembers)
	}
}

// describeGroups is the groups in one line: "md0 (md: sdb sdc sdd); dm-4
// (mirror: dm-1 dm-3)".
func describeGroups(groups []geometry.MemberGroup) string {
	var b strings.Builder
	for i, g := range groups {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s (%s:", g.Device, g.Kind)
		for _, m := range g.Members {
			b.WriteString(" " + m.Device)
		}
		b.WriteString(")")
	}
	return b.String()
}

// memberLoop samples the member groups every intervals.member_io (the
// effective configuration's, read at every tick) and spools one
// Record.member_io per interval in which a group did I/O. It ends with ctx;
// it does not start where /proc/diskstats cannot be read (Windows).
func (a *Agent) memberLoop(ctx context.Context) {
	sys := a.o.Geometry.SysfsRoot
	if sys == "" {
		sys = "/sys"
	}
	s, err := newMemberSampler(a.o.ProcRoot, sys)
	if err == nil {
		_, err = s.read()
	}
	if err != nil {
		a.log.Info("member I/O is not sampled on this host", "err", err)
		return
	}
	for {
		iv := a.eff.Load().cfg.Intervals.MemberIO
		if iv <= 0 {
			s.at = time.Time{} // off: the next sample after it is on again starts afresh
			if ctxtime.Sleep(ctx, memberOffPoll) != nil {
				return
			}
			continue
		}
		wait := iv
		switch set := a.members.Load(); {
		case set == nil:
			wait = min(iv, time.Second) // until the first discovery
		case len(set.groups) == 0:
			s.at = time.Time{} // nothing to read; the first group starts afresh
		default:
			a.sampleMembers(s, set)
		}
		if ctxtime.Sleep(ctx, wait) != nil {
			return
		}
	}
}

// sampleMembers takes one sample and spools its record.
func (a *Agent) sampleMembers(s *memberSampler, set *memberSet) {
	out, err := s.sample(time.Now(), set)
	if err != nil {
		a.log.Warn("member I/O", "err", err)
		return
	}
	for why, n := range out.dropped {
		a.memberMetrics.dropped.WithLabelValues(why).Add(float64(n))
	}
	if out.io == nil {
		return
	}
	if _, err := a.append(&plumblinev1.Record{Payload: &plumblinev1.Record_MemberIo{MemberIo: out.io}}); err == nil {
		a.memberMetrics.records.Inc()
	}
}
