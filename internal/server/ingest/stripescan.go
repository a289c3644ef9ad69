package ingest

import (
	"fmt"
	"math/bits"

	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/plumbline/plumbline/internal/align"
	"github.com/plumbline/plumbline/internal/server/store"
	"github.com/plumbline/plumbline/internal/stripescan"
	"github.com/plumbline/plumbline/internal/vocab"
)

// checkStripeScan checks a probe result's stripe-scan answer against its
// kind and counts, and returns it serialised for the store (nil: none).
// Only a stripe-scan run that did I/O carries one.
func checkStripeScan(p *plumblinev1.ProbeResult) ([]byte, error) {
	s := p.GetStripeScan()
	isScan := vocab.ProbeKind(p.GetKind()).Spec().Geometry
	switch {
	case s == nil:
		if isScan && p.GetOps() > 0 {
			return nil, fmt.Errorf("stripe_scan missing: a %s run with ops %d carries its answer", vocab.StripeScan, p.GetOps())
		}
		return nil, nil
	case !isScan:
		return nil, fmt.Errorf("stripe_scan set on a %s run: only %s runs carry one", p.GetKind(), vocab.StripeScan)
	case p.GetSkipped():
		return nil, fmt.Errorf("stripe_scan set on a skipped run")
	case p.GetOps() == 0:
		return nil, fmt.Errorf("stripe_scan set on a run with ops 0: a scan answers from the reads it timed")
	}
	if err := checkScanRun(s, p); err != nil {
		return nil, fmt.Errorf("stripe_scan: %w", err)
	}
	if err := checkScanAnswer(s); err != nil {
		return nil, fmt.Errorf("stripe_scan: %w", err)
	}
	if err := checkScanCandidates(s, p.GetOps()); err != nil {
		return nil, fmt.Errorf("stripe_scan: %w", err)
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("stripe_scan: %w", err)
	}
	return b, nil
}

// checkScanAnswer checks the inference and where the reads were placed.
// (checkGeneric has already refused non-finite numbers and long strings.)
func checkScanAnswer(s *plumblinev1.StripeScan) error {
	u := s.GetInferredStripeUnitBytes()
	if u != 0 && !candidateUnit(u) {
		return fmt.Errorf("inferred_stripe_unit_bytes %d: want 0 or a power of two from %d to %d", u, stripescan.MinUnit, stripescan.MaxUnit)
	}
	c, a := s.GetConfidence(), s.GetAlpha()
	switch {
	case c < 0 || c > 1:
		return fmt.Errorf("confidence %v: want 0 to 1", c)
	case u == 0 && c != 0:
		return fmt.Errorf("confidence %v with no inferred unit: want 0", c)
	case u != 0 && c == 0:
		return fmt.Errorf("inferred_stripe_unit_bytes %d with confidence 0", u)
	case a < 0 || a >= 1:
		return fmt.Errorf("alpha %v: want 0 to below 1", a)
	}
	lo, mid, hi := s.GetStraddleCostLowSeconds(), s.GetStraddleCostSeconds(), s.GetStraddleCostHighSeconds()
	maxCost := maxProbeDuration.Seconds()
	switch {
	case max(-lo, -mid, -hi, lo, mid, hi) > maxCost:
		return fmt.Errorf("straddle cost %v (%v to %v) s: want within ±%v s", mid, lo, hi, maxCost)
	case !(lo <= mid && mid <= hi):
		return fmt.Errorf("straddle cost %v s outside its interval %v to %v", mid, lo, hi)
	case u == 0 && (lo != 0 || mid != 0 || hi != 0):
		return fmt.Errorf("straddle cost %v s with no inferred unit: want 0", mid)
	}
	if d := s.GetPlacementDevice(); !deviceName(d) {
		return fmt.Errorf("placement_device %q: want a device name (sdb, md0, PhysicalDrive1)", d)
	}
	return checkScanPlacement(s)
}

// checkScanRun checks the scan's counts against its run: no more reads
// placed than the run's budget (or, without one, a stripe-scan's most).
// The candidates' counts are checked against the completed ops by
// checkScanCandidates.
func checkScanRun(s *plumblinev1.StripeScan, p *plumblinev1.ProbeResult) error {
	limit := uint64(vocab.StripeScanMaxOps)
	if b := p.GetOpsBudget(); b > 0 {
		limit = min(limit, b)
	}
	if placed := uint64(s.GetPlaced()); placed > limit {
		return fmt.Errorf("placed %d: more reads than the run's budget of %d", placed, limit)
	}
	if s.GetPlaced() == 0 {
		return fmt.Errorf("placed 0 on a run with ops %d: the ops are the placed reads", p.GetOps())
	}
	if p.GetOps() > uint64(s.GetPlaced()) {
		return fmt.Errorf("ops %d: more than the %d reads placed", p.GetOps(), s.GetPlaced())
	}
	return nil
}

// checkScanPlacement checks where the reads were placed: a basis of the
// vocabulary (align.PlacementBases), an offset on a 512-byte sector
// boundary when known and 0 when not.
func checkScanPlacement(s *plumblinev1.StripeScan) error {
	basis, known, off := s.GetPlacementBasis(), s.GetPlacementOffsetKnown(), s.GetPlacementOffsetBytes()
	switch {
	case known && basis != align.BasisStripedDevice && basis != align.BasisDisk:
		return fmt.Errorf("placement_basis %q with a known offset: want %q or %q", truncateUTF8(basis, 80), align.BasisStripedDevice, align.BasisDisk)
	case !known && !align.FileSystemDeviceBasis(basis):
		return fmt.Errorf("placement_basis %q with an unknown offset: want %q", truncateUTF8(basis, 80), align.BasisFileSystemDevice)
	case off > 1<<62:
		return fmt.Errorf("placement_offset_bytes %d: want at most 2^62", off)
	case known && off%512 != 0:
		return fmt.Errorf("placement_offset_bytes %d: want a multiple of 512 (a sector)", off)
	case !known && off != 0:
		return fmt.Errorf("placement_offset_bytes %d with placement_offset_known false: want 0", off)
	}
	return nil
}

// checkScanCandidates checks the per-candidate tests: each a candidate
// unit, ascending, with counts a run of ops could have measured.
func checkScanCandidates(s *plumblinev1.StripeScan, ops uint64) error {
	cands := s.GetCandidates()
	if n := len(stripescan.Candidates()); len(cands) > n {
		return fmt.Errorf("%d candidates: want at most %d", len(cands), n)
	}
	if uint64(s.GetPlaced()) > vocab.StripeScanMaxOps {
		return fmt.Errorf("placed %d: want at most %d", s.GetPlaced(), vocab.StripeScanMaxOps)
	}
	var prev, total, inside uint64
	for i, c := range cands {
		u := c.GetUnitBytes()
		if !candidateUnit(u) || u <= prev {
			return fmt.Errorf("candidates[%d]: unit_bytes %d: want ascending powers of two from %d to %d", i, u, stripescan.MinUnit, stripescan.MaxUnit)
		}
		prev = u
		// Every candidate is judged against the same inside reads: the
		// straddles of all candidates and the inside reads add up to at
		// most the run's reads (each count below 2^32: no overflow).
		total += uint64(c.GetStraddles())
		inside = max(inside, uint64(c.GetInside()))
		if total+inside > ops {
			return fmt.Errorf("candidates[%d]: straddles %d, inside %d: more reads than the run's %d ops", i, c.GetStraddles(), c.GetInside(), ops)
		}
		for _, f := range []struct {
			name string
			v    float64
		}{{"superiority", c.GetSuperiority()}, {"p_value", c.GetPValue()}, {"adjusted_p", c.GetAdjustedP()}, {"step_adjusted_p", c.GetStepAdjustedP()}} {
			if f.v < 0 || f.v > 1 {
				return fmt.Errorf("candidates[%d]: %s %v: want 0 to 1", i, f.name, f.v)
			}
		}
		if lo, mid, hi := c.GetShiftLowSeconds(), c.GetShiftSeconds(), c.GetShiftHighSeconds(); !(lo <= mid && mid <= hi) || max(-lo, hi) > maxProbeDuration.Seconds() {
			return fmt.Errorf("candidates[%d]: shift %v s outside its interval %v to %v, or beyond ±%v s", i, mid, lo, hi, maxProbeDuration.Seconds())
		}
	}
	if u := s.GetInferredStripeUnitBytes(); u != 0 && len(cands) > 0 && !hasCandidate(cands, u) {
		return fmt.Errorf("inferred_stripe_unit_bytes %d is none of the candidates tested", u)
	}
	return nil
}

func candidateUnit(u uint64) bool {
	return bits.OnesCount64(u) == 1 && u >= stripescan.MinUnit && u <= stripescan.MaxUnit
}

func hasCandidate(cands []*plumblinev1.StripeScanCandidate, u uint64) bool {
	for _, c := range cands {
		if c.GetUnitBytes() == u {
			return true
		}
	}
	return false
}

// measuredStripe folds a volume's latest stripe-scan runs (newest first,
// as store.StripeScanRuns gives them) into what the server judges the
// volume with: the latest unit a run inferred, the runs that agreed with
// it since and their best confidence, and the runs that saw none. A run
// that inferred nothing does not erase an inference (noise hides a split
// penalty; it does not fake one); a run that inferred another unit
// replaces it. Runs whose offset on the measured device was unknown, or
// that do not decode, do not count. nil when no run counts.
func measuredStripe(runs []store.StripeScanRun) *plumblinev1.StripeMeasurement {
	var m *plumblinev1.StripeMeasurement
	for i := len(runs) - 1; i >= 0; i-- { // oldest first
		var s plumblinev1.StripeScan
		if err := proto.Unmarshal(runs[i].Scan, &s); err != nil || !s.GetPlacementOffsetKnown() {
			continue
		}
		if c := s.GetConfidence(); !(c >= 0 && c <= 1) { // ingest refuses these; a stored one counts as garbage
			continue
		}
		if m == nil || m.GetDevice() != s.GetPlacementDevice() {
			m = &plumblinev1.StripeMeasurement{Device: s.GetPlacementDevice(), Basis: s.GetPlacementBasis(), OffsetKnown: true}
		}
		m.MeasuredAt = timestamppb.New(runs[i].StartedAt)
		u := s.GetInferredStripeUnitBytes()
		switch {
		case u == 0:
			m.NoneRuns++
			continue
		case u != m.GetUnitBytes():
			m.UnitBytes, m.Confidence, m.AgreeingRuns, m.NoneRuns = u, 0, 0, 0
		}
		m.AgreeingRuns++
		m.Confidence = max(m.GetConfidence(), s.GetConfidence())
		m.StraddleCostSeconds = s.GetStraddleCostSeconds()
		m.StraddleCostLowSeconds = s.GetStraddleCostLowSeconds()
		m.StraddleCostHighSeconds = s.GetStraddleCostHighSeconds()
	}
	return m
}
