package evaluator

import (
	"encoding/binary"
	"errors"
	"math"
	"slices"
)

// rateHistory is one database operation's rate (operations per second)
// over its last intervals judged while the operation was not degraded: the
// usual rate the attribution compares the last interval's with. It is
// persisted with the operation's state (database_states.rate_history).
type rateHistory struct {
	rates []float64 // oldest first, at most rateWindow
}

const (
	rateWindow     = 60 // intervals kept (an hour at the agent's default minute)
	rateMinHistory = 10 // intervals before the history speaks
	rateVersion    = 1
)

// observe adds one interval's rate.
func (h *rateHistory) observe(rate float64) {
	if math.IsNaN(rate) || math.IsInf(rate, 0) || rate < 0 {
		return
	}
	h.rates = append(h.rates, rate)
	if n := len(h.rates); n > rateWindow {
		h.rates = slices.Delete(h.rates, 0, n-rateWindow)
	}
}

// median is the history's median rate; 0 until it holds rateMinHistory
// intervals.
func (h *rateHistory) median() float64 {
	if len(h.rates) < rateMinHistory {
		return 0
	}
	s := slices.Clone(h.rates)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// MarshalBinary encodes the history: a version byte, then each rate as a
// little-endian float64.
func (h *rateHistory) MarshalBinary() ([]byte, error) {
	b := make([]byte, 1, 1+8*len(h.rates))
	b[0] = rateVersion
	for _, r := range h.rates {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(r))
	}
	return b, nil
}

// UnmarshalBinary decodes what MarshalBinary wrote; empty is an empty
// history.
func (h *rateHistory) UnmarshalBinary(b []byte) error {
	h.rates = nil
	if len(b) == 0 {
		return nil
	}
	if b[0] != rateVersion || (len(b)-1)%8 != 0 || (len(b)-1)/8 > rateWindow {
		return errors.New("rate history: unknown encoding")
	}
	for i := 1; i < len(b); i += 8 {
		h.observe(math.Float64frombits(binary.LittleEndian.Uint64(b[i:])))
	}
	return nil
}
