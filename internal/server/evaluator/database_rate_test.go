package evaluator

import (
	"math"
	"testing"
)

// The rate history speaks after 10 intervals, keeps the last 60, survives
// its encoding, and refuses an encoding it does not know.
func TestRateHistory(t *testing.T) {
	t.Parallel()
	var h rateHistory
	for i := range 9 {
		h.observe(float64(i))
	}
	if m := h.median(); m != 0 {
		t.Fatalf("median of 9 intervals = %v, want 0 (not yet)", m)
	}
	h.observe(math.NaN()) // not a rate: ignored
	h.observe(9)
	if m := h.median(); m != 4.5 {
		t.Fatalf("median of 0..9 = %v, want 4.5", m)
	}
	for i := 10; i < 100; i++ {
		h.observe(float64(i))
	}
	b, err := h.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var g rateHistory
	if err := g.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if len(g.rates) != 60 || g.rates[0] != 40 || g.median() != 69.5 {
		t.Fatalf("decoded %d rates from %v, median %v; want the last 60 (40..99), median 69.5", len(g.rates), g.rates[0], g.median())
	}
	if err := g.UnmarshalBinary(nil); err != nil || len(g.rates) != 0 {
		t.Fatalf("empty encoding: %v, %d rates; want an empty history", err, len(g.rates))
	}
	if err := g.UnmarshalBinary([]byte{9, 1, 2}); err == nil {
		t.Fatal("unknown encoding accepted")
	}
}
