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
)

// Fault is one fault to apply. Members are numbered from 0.
type Fault struct {
	Kind   FaultKind     `json:"kind"`
	Member *int          `json:"member,omitempty"`
	Factor float64       `json:"factor,omitempty"`
	Add    time.Duration `json:"add,omitempty"`
}

// Apply injects a fault. Faults add up: a member can be slow and carry
// added latency at once; restore clears them all.
func (a *Array) Apply(f Fault) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	memberIdx := func() (int, error) {
		if f.Member == nil {
			return 0, fmt.Errorf("raidlab: %s fault needs a member", f.Kind)
		}
		if *f.Member < 0 || *f.Member >= len(a.members) {
			return 0, fmt.Errorf("raidlab: member %d out of range (the array has members 0..%d)", *f.Member, len(a.members)-1)
		}
		return *f.Member, nil
	}
	switch f.Kind {
	case FaultSlow:
		m, err := memberIdx()
		if err != nil {
			return err
		}
		if !(f.Factor >= 1) || math.IsInf(f.Factor, 0) || f.Factor > 1000 {
			return fmt.Errorf("raidlab: slow factor %v: want 1 to 1000", f.Factor)
		}
		a.members[m].factor = f.Factor
	case FaultLatency:
		if f.Add < 0 || f.Add > time.Minute {
			return fmt.Errorf("raidlab: added latency %v: want 0 to 1m", f.Add)
		}
		if f.Member == nil {
			a.addLatency = f.Add
			return nil
		}
		m, err := memberIdx()
		if err != nil {
			return err
		}
		a.members[m].addLatency = f.Add
	case FaultFail:
		m, err := memberIdx()
		if err != nil {
			return err
		}
		a.members[m].failed = true
	case FaultRestore:
		a.addLatency = 0
		for i := range a.members {
			a.members[i].factor = 0
			a.members[i].addLatency = 0
			a.members[i].failed = false
		}
	default:
		return fmt.Errorf("raidlab: unknown fault %q (want slow, latency, fail or restore)", f.Kind)
	}
	return nil
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
	MemberStats   []MemberStats `json:"member_stats"`
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
	}
	for _, m := range a.members {
		s.MemberStats = append(s.MemberStats, MemberStats{
			ReadOps: m.readOps, WriteOps: m.writeOps, ReadBytes: m.readBytes, WriteBytes: m.writeBytes,
			BusySeconds: m.busy.Seconds(), Failed: m.failed, SlowFactor: m.factor, AddLatency: m.addLatency,
		})
	}
	return s
}
