package raidlab

import (
	"fmt"
	"math"
	"time"
)

// FaultKind names a fault.
type FaultKind string

// The faults the emulator can inject at run time.
const (
	FaultSlow    FaultKind = "slow"    // multiply one member's service time by Factor
	FaultLatency FaultKind = "latency" // add Add to every request (or, with Member set, to every op of that member)
	FaultFail    FaultKind = "fail"    // fail one member: the array runs degraded, or errors where it cannot
	FaultRestore FaultKind = "restore" // clear every fault
	// FaultThrottle puts a token bucket in front of the array: IOPS
	// requests a second after a burst of Burst (a cloud volume's
	// provisioned IOPS and burst credits). IOPS 0 removes it.
	FaultThrottle FaultKind = "throttle"
	// FaultStall makes Fraction of one member's operations take Add
	// longer, holding its queue (a disk retrying bad sectors).
	FaultStall FaultKind = "stall"
	// FaultRebuild loads every member with background 64 KiB operations
	// taking Load of its time (default 0.5): the member rebuilt is
	// written, the others read, as an md resync does.
	FaultRebuild FaultKind = "rebuild"
)

// Fault is one fault to apply. Members are numbered from 0.
type Fault struct {
	Kind   FaultKind     `json:"kind"`
	Member *int          `json:"member,omitempty"`
	Factor float64       `json:"factor,omitempty"`
	Add    time.Duration `json:"add,omitempty"`
	// Throttle: the rate and the burst.
	IOPS  float64 `json:"iops,omitempty"`
	Burst int     `json:"burst,omitempty"`
	// Stall: the share of the member's operations that stall (0 to 1).
	Fraction float64 `json:"fraction,omitempty"`
	// Rebuild: the share of each member's time the background takes.
	Load float64 `json:"load,omitempty"`
}

// Apply injects a fault. Faults add up: a member can be slow and carry
// added latency at once; restore clears them all.
func (a *Array) Apply(f Fault) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch f.Kind {
	case FaultLatency:
		if f.Add < 0 || f.Add > time.Minute {
			return fmt.Errorf("raidlab: added latency %v: want 0 to 1m", f.Add)
		}
		if f.Member == nil {
			a.addLatency = f.Add
			return nil
		}
	case FaultThrottle:
		return a.applyThrottle(f)
	case FaultRestore:
		a.restore()
		return nil
	case FaultSlow, FaultFail, FaultStall, FaultRebuild:
	default:
		return fmt.Errorf("raidlab: unknown fault %q (want slow, latency, fail, throttle, stall, rebuild or restore)", f.Kind)
	}
	m, err := a.faultMember(f)
	if err != nil {
		return err
	}
	return a.applyToMember(m, f)
}

// faultMember is the member a fault names, checked against the array.
func (a *Array) faultMember(f Fault) (int, error) {
	if f.Member == nil {
		return 0, fmt.Errorf("raidlab: %s fault needs a member", f.Kind)
	}
	if *f.Member < 0 || *f.Member >= len(a.members) {
		return 0, fmt.Errorf("raidlab: member %d out of range (the array has members 0..%d)", *f.Member, len(a.members)-1)
	}
	return *f.Member, nil
}

// applyToMember injects a fault of one member (slow, latency, fail,
// stall, rebuild); a.mu is held.
func (a *Array) applyToMember(m int, f Fault) error {
	switch f.Kind {
	case FaultSlow:
		if !(f.Factor >= 1) || math.IsInf(f.Factor, 0) || f.Factor > 1000 {
			return fmt.Errorf("raidlab: slow factor %v: want 1 to 1000", f.Factor)
		}
		a.members[m].factor = f.Factor
	case FaultLatency:
		a.members[m].addLatency = f.Add
	case FaultFail:
		a.members[m].failed = true
	case FaultStall:
		if !(f.Fraction >= 0 && f.Fraction <= 1) {
			return fmt.Errorf("raidlab: stall fraction %v: want 0 to 1", f.Fraction)
		}
		if f.Add <= 0 && f.Fraction > 0 || f.Add > time.Minute {
			return fmt.Errorf("raidlab: stall latency %v: want more than 0, at most 1m", f.Add)
		}
		a.members[m].stallFrac, a.members[m].stallFor = f.Fraction, f.Add
	case FaultRebuild:
		return a.applyRebuild(m, f.Load)
	}
	return nil
}

// applyThrottle puts the token bucket in front of the array (IOPS 0: off),
// keeping its counters; a.mu is held.
func (a *Array) applyThrottle(f Fault) error {
	if !(f.IOPS >= 0) || math.IsInf(f.IOPS, 0) || f.IOPS > 1e6 || f.IOPS > 0 && f.IOPS < 0.1 {
		return fmt.Errorf("raidlab: throttle iops %v: want 0 (off) or 0.1 to 1e6", f.IOPS)
	}
	if f.Burst < 1 && f.IOPS > 0 || f.Burst > 1e6 {
		return fmt.Errorf("raidlab: throttle burst %d: want 1 to 1e6", f.Burst)
	}
	a.throttle = throttle{iops: f.IOPS, burst: f.Burst, throttled: a.throttle.throttled, waited: a.throttle.waited}
	return nil
}

// applyRebuild loads every member with background operations taking load
// of its time (0: the default 0.5), member m written, the others read;
// a.mu is held.
func (a *Array) applyRebuild(m int, load float64) error {
	if load == 0 {
		load = 0.5
	}
	if !(load > 0 && load < 1) {
		return fmt.Errorf("raidlab: rebuild load %v: want between 0 and 1", load)
	}
	// The mean service time of one background operation over load:
	// the interval that keeps the member busy that share of the time.
	p := a.preset
	svc := p.Fixed + p.AvgRotation + time.Duration(float64(p.PerKiB)*rebuildLen/1024)
	every := max(time.Duration(float64(svc)/load), time.Microsecond)
	for i := range a.members {
		a.members[i].rebuildEvery, a.members[i].rebuildWrite, a.members[i].rebuildNext = every, i == m, time.Time{}
	}
	return nil
}

// restore clears every fault, keeping the counters; a.mu is held.
func (a *Array) restore() {
	a.addLatency = 0
	a.throttle = throttle{throttled: a.throttle.throttled, waited: a.throttle.waited}
	for i := range a.members {
		a.members[i].factor = 0
		a.members[i].addLatency = 0
		a.members[i].failed = false
		a.members[i].stallFrac, a.members[i].stallFor = 0, 0
		a.members[i].rebuildEvery, a.members[i].rebuildWrite = 0, false
	}
}

// Stats is a snapshot of an array's counters and faults.
type Stats struct {
	Level         Level         `json:"level"`
	Members       int           `json:"members"`
	StripeUnit    int64         `json:"stripe_unit"`
	Size          int64         `json:"size"`
	Preset        string        `json:"preset"`
	ReadRequests  uint64        `json:"read_requests"`
	WriteRequests uint64        `json:"write_requests"`
	SplitReads    uint64        `json:"split_reads"`  // reads that spanned a stripe-unit boundary
	SplitWrites   uint64        `json:"split_writes"` // writes that did
	ReadBytes     uint64        `json:"read_bytes"`
	WriteBytes    uint64        `json:"write_bytes"`
	Failed        uint64        `json:"failed_requests"` // answered with an I/O error
	Flushes       uint64        `json:"flushes"`         // fsyncs reaching the array (free: members have no write cache)
	InFlight      int           `json:"in_flight"`
	MaxInFlight   int           `json:"max_in_flight"` // most requests served at once since start (or ResetPeak)
	AddLatency    time.Duration `json:"add_latency"`
	// The throttle: its rate and burst (0: none), and the requests that
	// waited for a token and how long in all.
	ThrottleIOPS   float64       `json:"throttle_iops,omitempty"`
	ThrottleBurst  int           `json:"throttle_burst,omitempty"`
	Throttled      uint64        `json:"throttled_requests"`
	ThrottleWaited time.Duration `json:"throttle_waited"`
	MemberStats    []MemberStats `json:"member_stats"`
}

// MemberStats is one member's counters and faults.
type MemberStats struct {
	ReadOps     uint64        `json:"read_ops"`
	WriteOps    uint64        `json:"write_ops"`
	ReadBytes   uint64        `json:"read_bytes"`
	WriteBytes  uint64        `json:"write_bytes"`
	BusySeconds float64       `json:"busy_seconds"`
	Failed      bool          `json:"failed"`
	SlowFactor  float64       `json:"slow_factor,omitempty"`
	AddLatency  time.Duration `json:"add_latency,omitempty"`
	// Stall fault: the share and the stall, and the operations stalled.
	StallFraction float64       `json:"stall_fraction,omitempty"`
	StallLatency  time.Duration `json:"stall_latency,omitempty"`
	Stalls        uint64        `json:"stalls"`
	// Rebuild fault: the interval of background operations (0: none),
	// whether they write this member, and how many were served.
	RebuildEvery time.Duration `json:"rebuild_every,omitempty"`
	RebuildWrite bool          `json:"rebuild_write,omitempty"`
	RebuildOps   uint64        `json:"rebuild_ops"`
}

// Ops is the member operations of all members.
func (s Stats) Ops() uint64 {
	var n uint64
	for _, m := range s.MemberStats {
		n += m.ReadOps + m.WriteOps
	}
	return n
}

// ResetPeak restarts MaxInFlight from the requests in flight now, so that
// a caller can see the concurrency of one run.
func (a *Array) ResetPeak() {
	a.mu.Lock()
	a.c.maxInFlight = a.c.inFlight
	a.mu.Unlock()
}

// Stats returns a snapshot of the counters.
func (a *Array) Stats() Stats {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := Stats{
		Level: a.geo.Level, Members: a.geo.Members, StripeUnit: a.geo.StripeUnit, Size: a.geo.Size, Preset: a.preset.Name,
		ReadRequests: a.c.readRequests, WriteRequests: a.c.writeRequests,
		SplitReads: a.c.splitReads, SplitWrites: a.c.splitWrites,
		ReadBytes: a.c.readBytes, WriteBytes: a.c.writeBytes, Failed: a.c.failedRequests, Flushes: a.c.flushes,
		InFlight: a.c.inFlight, MaxInFlight: a.c.maxInFlight, AddLatency: a.addLatency,
		ThrottleIOPS: a.throttle.iops, ThrottleBurst: a.throttle.burst, Throttled: a.throttle.throttled, ThrottleWaited: a.throttle.waited,
	}
	for _, m := range a.members {
		s.MemberStats = append(s.MemberStats, MemberStats{
			ReadOps: m.readOps, WriteOps: m.writeOps, ReadBytes: m.readBytes, WriteBytes: m.writeBytes,
			BusySeconds: m.busy.Seconds(), Failed: m.failed, SlowFactor: m.factor, AddLatency: m.addLatency,
			StallFraction: m.stallFrac, StallLatency: m.stallFor, Stalls: m.stalls,
			RebuildEvery: m.rebuildEvery, RebuildWrite: m.rebuildWrite, RebuildOps: m.rebuildOps,
		})
	}
	return s
}
