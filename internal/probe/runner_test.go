//go:build linux || windows

package probe

import (
	"testing"

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
