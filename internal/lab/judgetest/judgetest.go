// Package judgetest stores volumes in tests the way the server does: each
// volume judged once by ingest's judge, its judged record (the inventory
// tables the exporter and the evaluator read) written with the volume.
// Tests that need a volume's judged record go through here, so that how
// the server writes it is one place to follow.
//
// Test support only: no non-test code may import it.
package judgetest

import (
	"context"
	"testing"

	"github.com/plumbline/plumbline/internal/server/ingest"
	"github.com/plumbline/plumbline/internal/server/store"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// Volume is what ingest stores for a volume of a geometry snapshot under
// the shipped rules: the volume with its judged record, which AppendBatch
// writes with it. A stripe measurement in v stands for the server's
// stripe-scan runs of the volume.
func Volume(tb testing.TB, v *plumblinev1.Volume) store.Volume {
	tb.Helper()
	sv, err := ingest.JudgeVolume(v, v.GetMeasuredStripe(), ingest.Rules{})
	if err != nil {
		tb.Fatalf("judge volume %s: %v", v.GetMountPoint(), err)
	}
	return sv
}

// Rejudge judges a stored volume again under rules r, as the server does
// when its rules change: the volume keeps its sequence; its judged record
// follows.
func Rejudge(tb testing.TB, st *store.Store, agentID, mountPoint string, r ingest.Rules) {
	tb.Helper()
	j, err := ingest.NewJudge(st, ingest.JudgeOptions{Rules: r})
	if err != nil {
		tb.Fatal(err)
	}
	changed, err := j.Volume(context.Background(), agentID, mountPoint)
	if err != nil || !changed {
		tb.Fatalf("rejudge %s:%s = %v, %v; want a rewritten record", agentID, mountPoint, changed, err)
	}
}
