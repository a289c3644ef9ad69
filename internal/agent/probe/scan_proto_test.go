package probe

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/plumbline/plumbline/internal/stripescan"
)

// TestStripeScanProto builds a result from placed reads with an effect at
// 128 KiB and checks the report carries the answer and every candidate.
func TestStripeScanProto(t *testing.T) {
	reads, err := stripescan.Place(stripescan.Layout{
		Extents: []stripescan.Extent{{Logical: 0, Physical: 1 << 30, Length: 64 << 20}},
		Base:    1 << 20, DataStart: HeaderSize, DataEnd: 64 << 20, Align: 4096,
	}, stripescan.MaxOps, 3)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	lat := make([]time.Duration, len(reads))
	for i, r := range reads {
		lat[i] = 5*time.Millisecond + time.Duration(rng.Int64N(int64(4*time.Millisecond)))
		if r.Class >= 3 { // 128 KiB and up split
			lat[i] += time.Millisecond
		}
	}
	lat[0] = -1 // one read did not complete
	s := scanResult(Placement{Offset: 1 << 20, Known: true, Device: "sdb", Basis: "disk"}, 1, reads, lat)
	p := s.Proto()
	if s.Unit != 128<<10 || p.GetInferredStripeUnitBytes() != 128<<10 || p.GetConfidence() != s.Confidence || p.GetConfidence() < 0.99 {
		t.Fatalf("inferred %d, proto %d, confidence %g", s.Unit, p.GetInferredStripeUnitBytes(), p.GetConfidence())
	}
	var measured int
	for _, n := range s.Measured {
		measured += n
	}
	if measured != len(reads)-1 || len(p.GetCandidates()) != len(stripescan.Candidates()) || !p.GetPlacementOffsetKnown() || p.GetPlacementDevice() != "sdb" {
		t.Fatalf("measured %d of %d, proto %v", measured, len(reads), p)
	}
	if c := p.GetCandidates()[3]; c.GetUnitBytes() != 128<<10 || !c.GetSignificant() || c.GetShiftSeconds() < 0.5e-3 {
		t.Errorf("128 KiB candidate %v", c)
	}
	if (*StripeScanResult)(nil).Proto() != nil {
		t.Error("nil result gave a message")
	}
}
