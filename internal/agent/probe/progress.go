package probe

import (
	"sync/atomic"
	"time"
)

// Phase is what a run is doing, for progress display.
type Phase int32

// The phases of a run, in order.
const (
	PhaseStarting Phase = iota // jitter, busy sampling, opening the file
	PhaseFill                  // writing the probe file in full (first use, or a changed size)
	PhaseMeasure               // the measured I/O
)

// Progress lets a caller watch a run from another goroutine: Run (given it
// in Options.Progress) updates it, Snapshot reads it. Updates are atomic
// counters, cheap on the I/O path. The zero value is ready to use.
type Progress struct {
	phase       atomic.Int32
	phaseStart  atomic.Int64 // Unix nanoseconds
	fillDone    atomic.Int64
	fillTotal   atomic.Int64
	rewriteFrom atomic.Int64
	ops         atomic.Int64
	opsBudget   atomic.Int64
}

// ProgressSnapshot is a Progress read at one moment.
type ProgressSnapshot struct {
	Phase        Phase
	PhaseStarted time.Time
	// FillDone and FillTotal are the bytes of the data region written and
	// to write; RewriteFrom is the old size of a probe file that is being
	// rewritten because its size changed (0: a new file).
	FillDone, FillTotal, RewriteFrom int64
	// Ops counts the operations done (completed or failed) of OpsBudget.
	Ops, OpsBudget int64
}

// Snapshot reads the counters. A nil Progress reads as zero.
func (p *Progress) Snapshot() ProgressSnapshot {
	if p == nil {
		return ProgressSnapshot{}
	}
	s := ProgressSnapshot{
		Phase:       Phase(p.phase.Load()),
		FillDone:    p.fillDone.Load(),
		FillTotal:   p.fillTotal.Load(),
		RewriteFrom: p.rewriteFrom.Load(),
		Ops:         p.ops.Load(),
		OpsBudget:   p.opsBudget.Load(),
	}
	if ns := p.phaseStart.Load(); ns != 0 {
		s.PhaseStarted = time.Unix(0, ns)
	}
	return s
}

func (p *Progress) startFill(total, rewriteFrom int64) {
	if p == nil {
		return
	}
	p.fillDone.Store(0)
	p.fillTotal.Store(total)
	p.rewriteFrom.Store(rewriteFrom)
	p.phaseStart.Store(time.Now().UnixNano())
	p.phase.Store(int32(PhaseFill))
}

func (p *Progress) filled(n int64) {
	if p != nil {
		p.fillDone.Add(n)
	}
}

func (p *Progress) startMeasure(budget int) {
	if p == nil {
		return
	}
	p.ops.Store(0)
	p.opsBudget.Store(int64(budget))
	p.phaseStart.Store(time.Now().UnixNano())
	p.phase.Store(int32(PhaseMeasure))
}

func (p *Progress) opDone() {
	if p != nil {
		p.ops.Add(1)
	}
}
