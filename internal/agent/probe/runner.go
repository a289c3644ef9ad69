//go:build linux || windows

package probe

import (
	"time"

	"github.com/plumbline/plumbline/internal/vocab"
)

// runner is the one seam between the latency engine and a kind that
// measures something beyond latency (vocab's ProbeKindSpec.Geometry:
// stripe-scan). Run opens the probe file, asks the kind's runner to place
// the plan's ops, measures, and hands the runner the ops' latencies for
// its answer; the engine knows nothing else of the measurement. A latency
// kind's runner places nothing and answers nothing.
type runner interface {
	// check validates the options the kind fixes (before any I/O).
	check(o *Options) error
	// place sets where the plan's ops go in the open probe file (its
	// schedule; none: the engine's own random or sequential offsets).
	place(o Options, f *probeFile, p *plan) error
	// answer reads the run's answer into res from the latency of each
	// scheduled op (negative: not completed); freshFile says the run
	// wrote its probe file just before measuring.
	answer(res *Result, opLatency []time.Duration, freshFile bool)
	// preview says, before any run, what a run of ops ops on placement pl
	// will do beyond latency: log attributes, and a warning when its
	// budget cannot give an answer ("": it can).
	preview(ops int, pl Placement) (attrs []any, warning string)
}

// Preview is what a scheduled run of kind k with ops ops on placement pl
// will do beyond measuring latency, for the schedule's log line: the
// attributes to add and, when its budget cannot give an answer, a warning.
// Nothing for a latency kind.
func Preview(k Kind, ops int, pl Placement) (attrs []any, warning string) {
	return runnerFor(k.Spec()).preview(ops, pl)
}

// geometryRunners builds the runner of each geometry kind; a kind whose
// spec says Geometry has one (a test checks it).
var geometryRunners = map[Kind]func() runner{
	StripeScan: func() runner { return &scanRunner{} },
}

// runnerFor is the runner of a kind with spec: a fresh one per run.
func runnerFor(spec vocab.ProbeKindSpec) runner {
	if newRunner, ok := geometryRunners[spec.Kind]; ok && spec.Geometry {
		return newRunner()
	}
	return latencyRunner{}
}

// latencyRunner is the runner of a latency kind: the engine's offsets,
// the latency histogram as the whole answer.
type latencyRunner struct{}

func (latencyRunner) check(*Options) error                   { return nil }
func (latencyRunner) place(Options, *probeFile, *plan) error { return nil }
func (latencyRunner) answer(*Result, []time.Duration, bool)  {}
func (latencyRunner) preview(int, Placement) ([]any, string) { return nil, "" }
