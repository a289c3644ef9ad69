package agent

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/plumbline/plumbline/internal/agent/probe"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// TestScheduledStripeScanRealEngine runs a scheduled stripe-scan with the
// real probe engine on a file in t.TempDir() (page cache allowed where
// O_DIRECT is refused) and checks its wire form at the server: the
// ordinary fields of a probe run beside the geometry answer, placed where
// discovery says the volume lies.
func TestScheduledStripeScanRealEngine(t *testing.T) {
	p := newPKI(t, "db1")
	srv := newTestServer(t, p)
	defer srv.stop()
	dir := t.TempDir()
	c := testConfig(srv.addr, p, dir)
	s := &c.Probes[0]
	s.Kinds, s.Every, s.Ops, s.FileSize, s.AllowCached = []probe.Kind{probe.StripeScan}, time.Hour, 200, 16<<20, true
	discover := func(context.Context) (Discovery, error) {
		return Discovery{Inventory: &plumblinev1.Inventory{Host: &plumblinev1.Host{Hostname: "db1", Os: "linux"},
			Volumes: []*plumblinev1.Volume{scanVolume("/data1", proto.Uint64(1<<20))}}}, nil
	}
	a := newTestAgent(t, c, p, probe.Run, discover)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var got *plumblinev1.ProbeResult
	waitFor(t, "a real stripe-scan result", func() bool {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		for _, r := range srv.stored {
			if pr := r.GetProbe(); pr != nil {
				got = pr
			}
		}
		return got != nil
	})
	cancel()
	<-done
	if got.GetKind() != string(probe.StripeScan) || got.GetSkipped() || got.GetFailure() != "" || got.GetOps() != 200 ||
		got.GetLatency().GetCount() != 200 || got.GetBlockSizeBytes() != 8192 || got.GetQueueDepth() != 1 || got.GetProbeFileSizeBytes() != 16<<20 {
		t.Fatalf("probe result = %v", got)
	}
	sc := got.GetStripeScan()
	if sc.GetPlaced() != 200 || sc.GetExtents() == 0 || sc.GetPlacementDevice() != "sdb" || sc.GetPlacementBasis() != "disk" ||
		sc.GetPlacementOffsetBytes() != 1<<20 || !sc.GetPlacementOffsetKnown() || len(sc.GetCandidates()) == 0 || sc.GetReason() == "" {
		t.Errorf("stripe_scan = %v", sc)
	}
}
