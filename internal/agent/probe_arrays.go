package agent

import (
	"github.com/plumbline/plumbline/internal/agent/geometry"
	"github.com/plumbline/plumbline/internal/vocab"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// A probe run on a volume over md arrays records the arrays that were
// running a sync action (resync, recover, reshape, check, repair) at its
// start or its end (ProbeResult.array_activity): the server judges such a
// run in that context, and a rebuild's runs do not teach the volume's
// history a new normal.

// maxArrayActivity bounds the arrays one run records (the server refuses
// more).
const maxArrayActivity = vocab.MaxArrayActivity

// mdSyncs reads the sync state of t's md arrays now; an array whose
// sync_action cannot be read is left out (the geometry snapshot says why).
func (a *Agent) mdSyncs(t target) []geometry.MDSync {
	if len(t.arrays) == 0 {
		return nil
	}
	sys := a.o.Geometry.SysfsRoot
	if sys == "" {
		sys = "/sys"
	}
	out := make([]geometry.MDSync, 0, len(t.arrays))
	for _, dev := range t.arrays {
		s, err := geometry.ReadMDSync(sys, dev)
		if err != nil {
			a.log.Debug("md sync state unreadable", "mount_point", t.mount, "array", dev, "err", err)
			continue
		}
		out = append(out, s)
	}
	return out
}

// arrayActivity is the run's mark from the arrays' state at its start
// (before) and its end (after): each array running an action at either,
// with the action and figures seen at the end, or at the start when the
// action had finished by then.
func arrayActivity(before, after []geometry.MDSync) []*plumblinev1.ArrayActivity {
	var out []*plumblinev1.ArrayActivity
	seen := map[string]bool{}
	for _, s := range after {
		if s.Running() && len(out) < maxArrayActivity {
			out = append(out, s.Proto())
			seen[s.Device] = true
		}
	}
	for _, s := range before {
		if s.Running() && !seen[s.Device] && len(out) < maxArrayActivity {
			out = append(out, s.Proto())
			seen[s.Device] = true
		}
	}
	return out
}
