package inventory

import (
	"fmt"
	"math"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/plumbline/plumbline/internal/vocab"
)

// measured is what the geometry probe adds to a volume's verdict, as the
// CSV shows it beside the predicted split: where the judged stripe unit
// comes from and how sure a stripe-scan measurement is of it, and the
// measured cost of one split I/O with what it comes to per I/O of each
// size (plumbline.v1.Alignment fields 4, 13-17).
type measured struct {
	source []byte // within the geometry read: no copy

	confidence float64
	cost       float64 // -1: not measured
	low, high  float64 // -1: not measured
	costSet    bool    // the geometry has a cost (proto3 optional presence)
	// penalty by I/O size (in the order of the sizes asked for); -1:
	// none.
	penalty []float64
}

// The plumbline.v1 field numbers measuredOf reads
// (proto/plumbline/v1/geometry.proto).
const (
	volumeAlignmentField = 5  // Volume.alignment
	alignSourceField     = 4  // Alignment.stripe_unit_source
	alignCostField       = 13 // Alignment.measured_split_cost_seconds
	alignCostLowField    = 14 // Alignment.measured_split_cost_low_seconds
	alignCostHighField   = 15 // Alignment.measured_split_cost_high_seconds
	alignPenaltyField    = 16 // Alignment.measured_penalty_seconds, map<uint32, double>
	alignConfidenceField = 17 // Alignment.stripe_unit_confidence
	mapKeyField          = 1
	mapValueField        = 2
)

// measuredOf reads the measured fields of a stored plumbline.v1.Volume's
// alignment, with the penalty of each of sizes (into penalty, of their
// length: a caller reuses it). It walks the wire format
// and skips everything else (the layers, the findings), so a CSV row of
// every volume costs no protobuf decode of the whole volume. A geometry
// that does not parse gives an error and what was read before the damage
// (the store only holds geometry ingest validated).
func measuredOf(geometry []byte, sizes []uint32, penalty []float64) (measured, error) {
	m := measured{penalty: penalty[:len(sizes)]}
	for i := range m.penalty {
		m.penalty[i] = -1
	}
	// Each occurrence of the alignment merges into what came before, as
	// proto.Unmarshal merges a repeated message field (the server writes
	// one).
	err := eachField(geometry, func(num protowire.Number, typ protowire.Type, b []byte) error {
		if num == volumeAlignmentField && typ == protowire.BytesType {
			return eachField(b, m.alignmentField(sizes))
		}
		return nil
	})
	if !m.costSet { // not measured: no interval either
		m.cost, m.low, m.high = -1, -1, -1
	}
	return m, err
}

// alignmentField reads one field of an Alignment into m.
func (m *measured) alignmentField(sizes []uint32) func(protowire.Number, protowire.Type, []byte) error {
	return func(num protowire.Number, typ protowire.Type, b []byte) error {
		switch typ {
		case protowire.BytesType:
			switch num {
			case alignSourceField:
				m.source = b
			case alignPenaltyField:
				return m.penaltyEntry(b, sizes)
			}
		case protowire.Fixed64Type:
			v, _ := protowire.ConsumeFixed64(b)
			f := math.Float64frombits(v)
			switch num {
			case alignCostField:
				m.cost, m.costSet = f, true
			case alignCostLowField:
				m.low = f
			case alignCostHighField:
				m.high = f
			case alignConfidenceField:
				m.confidence = f
			}
		}
		return nil
	}
}

// penaltyEntry reads one map entry of measured_penalty_seconds into the
// penalty of its size, when it is one of sizes (a missing key or value
// is 0, as in protobuf).
func (m *measured) penaltyEntry(entry []byte, sizes []uint32) error {
	var key uint64
	var value float64
	err := eachField(entry, func(num protowire.Number, typ protowire.Type, b []byte) error {
		switch {
		case num == mapKeyField && typ == protowire.VarintType:
			key, _ = protowire.ConsumeVarint(b)
		case num == mapValueField && typ == protowire.Fixed64Type:
			v, _ := protowire.ConsumeFixed64(b)
			value = math.Float64frombits(v)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i, s := range sizes {
		if uint64(s) == key {
			m.penalty[i] = value
		}
	}
	return nil
}

// eachField calls fn with each field of a message: its number, wire type
// and value bytes (a length-delimited field's contents; a fixed or varint
// field's encoding).
func eachField(b []byte, fn func(protowire.Number, protowire.Type, []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("geometry: %w", protowire.ParseError(n))
		}
		b = b[n:]
		var v []byte
		switch typ {
		case protowire.BytesType:
			val, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return fmt.Errorf("geometry: %w", protowire.ParseError(n))
			}
			v, b = val, b[n:]
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return fmt.Errorf("geometry: %w", protowire.ParseError(n))
			}
			v, b = b[:n], b[n:]
		}
		if err := fn(num, typ, v); err != nil {
			return err
		}
	}
	return nil
}

// measuredCSVColumns are the CSV columns of measured, after the others:
// stripe_unit_source, stripe_unit_confidence, the split cost and its
// interval (seconds, as the API), and measured_penalty_seconds_8k/_64k
// (one per vocab.IOSizes, named like split_fraction_8k).
func measuredCSVColumns() []string {
	out := []string{"stripe_unit_source", "stripe_unit_confidence", "measured_split_cost_seconds",
		"measured_split_cost_low_seconds", "measured_split_cost_high_seconds"}
	for _, s := range vocab.IOSizes() {
		out = append(out, fmt.Sprintf("measured_penalty_seconds_%dk", s>>10))
	}
	return out
}
