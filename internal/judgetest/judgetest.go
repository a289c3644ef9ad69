// Package judgetest stores volumes in tests the way the server does: each
// volume judged once, its judged record (the inventory tables the
// exporter and the evaluator read) written from that judgement. Tests
// that need a volume's judged record go through here, so that how the
// server writes it is one place to follow.
//
// Test support only: no non-test code may import it.
package judgetest

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/plumbline/plumbline/internal/align"
	"github.com/plumbline/plumbline/internal/projection"
	"github.com/plumbline/plumbline/internal/store"
	"github.com/plumbline/plumbline/internal/vocab"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// Volume is what ingest stores for a volume of a geometry snapshot: v with
// the server's alignment in it (v is modified), and the volumes row's
// columns.
func Volume(tb testing.TB, v *plumblinev1.Volume) store.Volume {
	tb.Helper()
	v.Alignment = align.Evaluate(v)
	sv, err := columns(v)
	if err != nil {
		tb.Fatal(err)
	}
	return sv
}

// columns is the volumes row of v, judged (v.Alignment set).
func columns(v *plumblinev1.Volume) (store.Volume, error) {
	a := v.GetAlignment()
	geom, err := proto.MarshalOptions{Deterministic: true}.Marshal(v)
	if err != nil {
		return store.Volume{}, err
	}
	sv := store.Volume{MountPoint: v.GetMountPoint(), Device: v.GetDevice(), FSType: v.GetFilesystem().GetType(), Geometry: geom,
		Verdict: a.GetVerdict(), StripeUnitBytes: a.GetStripeUnitBytes()}
	if a.DataOffsetBytes != nil {
		off := a.GetDataOffsetBytes()
		sv.DataOffsetBytes = &off
	}
	for i := range sv.SplitFraction {
		if f, ok := a.GetSplitFraction()[vocab.IOSize(i)]; ok {
			sv.SplitFraction[i] = &f
		}
	}
	return sv, nil
}

// Rejudge judges a stored volume again as the server does when its rules
// change: change edits the volume's alignment into the new rules'
// judgement. The volume keeps its sequence; its judged record follows.
func Rejudge(tb testing.TB, st *store.Store, agentID, mountPoint string, change func(*plumblinev1.Alignment)) {
	tb.Helper()
	judge := func(geom []byte, _ []store.StripeScanRun) (store.Volume, error) {
		var v plumblinev1.Volume
		if err := proto.Unmarshal(geom, &v); err != nil {
			return store.Volume{}, err
		}
		change(v.GetAlignment())
		return columns(&v)
	}
	changed, err := st.RejudgeVolume(context.Background(), agentID, mountPoint, judge)
	if err != nil || !changed {
		tb.Fatalf("rejudge %s:%s = %v, %v; want a changed volume", agentID, mountPoint, changed, err)
	}
	Judge(tb, st)
}

// Judge writes the judged record of every volume stored since the last
// call (and removes those of volumes gone), as the server does before
// the exporter or the evaluator reads it: the inventory sync over
// projection.Derive.
func Judge(tb testing.TB, st *store.Store) {
	tb.Helper()
	if _, err := st.SyncInventory(context.Background(), projection.Derive, time.Time{}); err != nil {
		tb.Fatalf("judge stored volumes: %v", err)
	}
}
