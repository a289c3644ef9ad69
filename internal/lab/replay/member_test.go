package replay

import (
	"testing"

	"github.com/plumbline/plumbline/internal/server/baseline"
)

// memberRecording is a lab RAID 1 of two sas15k members recorded while
// member 0 served every op 3× slower (raidlab fault DEV slow --member 0
// --factor 3), memberHealthy the same array just before (both at load
// ~11-13 on this shared box: bench/RESULTS-degrade.md, third pass).
const (
	memberRecording = "testdata/faults/lab-sas15k-raid1-member-slow3x.txt.gz"
	memberHealthy   = "testdata/faults/lab-sas15k-raid1-before-slow3x.txt.gz"
)

// TestMemberSlowDetection replays a mirror whose member turned 3× slower
// through the shipped detector, as TestStallRecordingDetection does the
// stall: 260 healthy runs of the same array, then the slowed runs from 8
// places, per kind, at 3m × 50 ops. Every write waits for the slow member,
// so the writes' median moves ×2–3 and the volume (its first kind) turns
// degraded within 5 faulted runs — 17.5 minutes to firing with the 30 s
// evaluator pass and `for: 2m` — from every place; the reads, half of
// which the healthy member serves, alternate around the median's
// threshold on this loaded box and are logged.
func TestMemberSlowDetection(t *testing.T) {
	t.Parallel()
	got := stallDetection(t, readRecording(t, memberHealthy), readRecording(t, memberRecording), baseline.Config{})
	for _, k := range kinds {
		t.Logf("%s: faulted runs to degraded from %d places: %v (named by %v)", k, len(got.runs[k]), got.runs[k], got.named[k])
	}
	for s, n := range got.volume {
		if n < 0 || n > 5 {
			t.Errorf("place %d: the volume degraded after %d faulted runs, want within 5 (per kind: %v)", s, n, got.runs)
		}
	}
	t.Logf("the volume (its first kind): %v", got.volume)
}
