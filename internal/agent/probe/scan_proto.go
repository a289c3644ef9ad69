package probe

import (
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// Proto is the answer as the report carries it (ProbeResult.stripe_scan).
func (s *StripeScanResult) Proto() *plumblinev1.StripeScan {
	if s == nil {
		return nil
	}
	out := &plumblinev1.StripeScan{
		InferredStripeUnitBytes: uint64(max(s.Unit, 0)),
		Confidence:              s.Confidence,
		Alpha:                   s.Alpha,
		Reason:                  s.Reason,
		StraddleCostSeconds:     s.StraddleCost,
		StraddleCostLowSeconds:  s.StraddleCostLow,
		StraddleCostHighSeconds: s.StraddleCostHigh,
		PlacementDevice:         s.Placement.Device,
		PlacementBasis:          s.Placement.Basis,
		PlacementOffsetBytes:    uint64(max(s.Placement.Offset, 0)),
		PlacementOffsetKnown:    s.Placement.Known,
		Extents:                 uint32(min(max(s.Extents, 0), MaxExtents)),
		Placed:                  uint32(max(s.Placed, 0)),
	}
	for _, c := range s.Candidates {
		out.Candidates = append(out.Candidates, &plumblinev1.StripeScanCandidate{
			UnitBytes:        uint64(c.Unit),
			Straddles:        uint32(c.Straddles),
			Inside:           uint32(c.Inside),
			ShiftSeconds:     c.Shift,
			ShiftLowSeconds:  c.ShiftLow,
			ShiftHighSeconds: c.ShiftHigh,
			Superiority:      c.Superiority,
			PValue:           c.P,
			AdjustedP:        c.AdjustedP,
			Significant:      c.Significant,
			StepAdjustedP:    c.StepAdjustedP,
			StepSignificant:  c.StepSignificant,
		})
	}
	return out
}
