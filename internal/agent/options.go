package agent

import (
	"github.com/plumbline/plumbline/internal/agent/config"
	"github.com/plumbline/plumbline/internal/agent/probe"
)

// ProbeOptions returns the probe engine's options for one kind of a
// schedule: every key maps onto the option of the same name. Dir is the
// schedule's; the start jitter is the scheduler's business (it is not
// passed on, so that waiting holds no device lock).
func ProbeOptions(p config.ProbeSchedule, kind probe.Kind) probe.Options {
	o := probe.DefaultOptions()
	o.Dir = p.Dir
	o.Kind = kind
	o.Ops = p.Ops
	if p.IOPS != nil {
		o.IOPS = *p.IOPS
	}
	o.MaxDuration = p.MaxDuration
	o.FileSize = int64(p.FileSize)
	o.BlockSize = int(p.BlockSize)
	o.QueueDepth = p.QueueDepth
	o.Sync = p.Sync
	if kind.Spec().Synced {
		o.QueueDepth = 1
	}
	if p.BusyThreshold != nil {
		o.BusyThreshold = *p.BusyThreshold
	}
	o.AllowCached = p.AllowCached
	if p.MinFree != nil {
		o.MinFreeBytes = int64(*p.MinFree)
	}
	if p.MinFreePercent != nil {
		o.MinFreePercent = *p.MinFreePercent
	}
	o.Jitter = 0
	return o
}
