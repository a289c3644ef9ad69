//go:build linux || windows

package probe

import (
	"fmt"
	"strings"
	"testing"

	"github.com/plumbline/plumbline/internal/stripescan"
	"github.com/plumbline/plumbline/internal/vocab"
)

// Every geometry kind runs through its own runner, every other kind through
// the latency runner: the spec and the runners agree.
func TestRunnerPerKind(t *testing.T) {
	t.Parallel()
	for _, k := range vocab.ListedProbeKinds() {
		spec := k.Spec()
		_, latency := runnerFor(spec).(latencyRunner)
		if spec.Geometry == latency {
			t.Errorf("runnerFor(%s) = %T: Geometry %v wants %s", k, runnerFor(spec), spec.Geometry, map[bool]string{true: "its own runner", false: "the latency runner"}[spec.Geometry])
		}
	}
	for k := range geometryRunners {
		if !k.Spec().Geometry {
			t.Errorf("geometryRunners has %s, whose spec is not Geometry", k)
		}
	}
}

// A schedule's log line learns from the kind's runner: a stripe-scan whose
// budget is too small to infer a unit is warned about, a latency kind adds
// nothing.
func TestPreview(t *testing.T) {
	t.Parallel()
	pl := Placement{Device: "md0", Basis: "striped device", Known: true}
	if attrs, warning := Preview(RandomRead, 10, pl); attrs != nil || warning != "" {
		t.Errorf("Preview(random-read) = %v, %q: want nothing", attrs, warning)
	}
	need := stripescan.MinOps()
	if _, warning := Preview(StripeScan, need-1, pl); !strings.Contains(warning, fmt.Sprintf("a stripe-scan of %d ops cannot infer a stripe unit: it needs at least %d", need-1, need)) {
		t.Errorf("Preview(stripe-scan, %d ops) warning = %q", need-1, warning)
	}
	attrs, warning := Preview(StripeScan, need, pl)
	if warning != "" || len(attrs) != 10 || attrs[1] != "md0" || attrs[9] != true {
		t.Errorf("Preview(stripe-scan, %d ops) = %v, %q: want the placement, infers_stripe_unit true, no warning", need, attrs, warning)
	}
}

// The engine's plan takes a kind's I/O from its entry: reads or writes,
// sequential or not, a sync after each write only for a synced kind in
// fdatasync mode.
func TestPlanFromSpec(t *testing.T) {
	t.Parallel()
	for _, k := range vocab.ProbedKinds() {
		spec := k.Spec()
		for _, sync := range []SyncMode{"", SyncDsync, SyncFdatasync} {
			p := newPlan(Options{Kind: k, Sync: sync, BlockSize: 8192, FileSize: 4 << 20, QueueDepth: 1}, spec, 1, 4096)
			if p.read != !spec.Writes || p.sequential != (spec.Access == vocab.AccessSequential) ||
				p.syncEach != (spec.Synced && sync == SyncFdatasync) {
				t.Errorf("newPlan(%s, sync %q): read %v, sequential %v, syncEach %v; want %v, %v, %v", k, sync,
					p.read, p.sequential, p.syncEach, !spec.Writes, spec.Access == vocab.AccessSequential, spec.Synced && sync == SyncFdatasync)
			}
		}
	}
	if p := newPlan(Options{Kind: LogWrite, Sync: SyncFdatasync, BlockSize: 8192, FileSize: 4 << 20}, LogWrite.Spec(), 1, 4096); !p.sequential || p.read || !p.syncEach {
		t.Errorf("log-write plan = %+v: want sequential synced writes", p)
	}
}
