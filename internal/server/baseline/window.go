package baseline

import "slices"

// window is a ring of a history's last values and the same values sorted,
// kept up to date on every push (a binary search and one insertion pass)
// so that no run sorts the window. The median's history is float64; the
// other signals' are float32 (a signal is judged as a ratio to its
// history's median: 7 digits are plenty) so that the three extra signals
// of a volume share one small contiguous block.
type window[T float32 | float64] struct {
	ring    []T // capacity: the window's length; ring[head] is the oldest once full
	head    int
	byValue []T
}

// newWindow returns an empty window of n values over buf (2n long).
func newWindow[T float32 | float64](buf []T, n int) window[T] {
	return window[T]{ring: buf[:0:n], byValue: buf[n : n : 2*n]}
}

func (w *window[T]) len() int { return len(w.ring) }

func (w *window[T]) push(x float64) {
	v := T(x)
	if len(w.ring) < cap(w.ring) {
		w.ring = append(w.ring, v)
		i, _ := slices.BinarySearch(w.byValue, v)
		w.byValue = slices.Insert(w.byValue, i, v)
		return
	}
	old := w.ring[w.head]
	w.ring[w.head] = v
	w.head = (w.head + 1) % len(w.ring)
	replaceSorted(w.byValue, old, v)
}

// replaceSorted replaces old, which sorted s holds, with x, keeping s
// sorted: old's place by binary search, then one insertion-sort pass from
// it towards x's place, shifting only the values in between.
func replaceSorted[T float32 | float64](s []T, old, x T) {
	i, _ := slices.BinarySearch(s, old)
	if x >= old {
		for i+1 < len(s) && s[i+1] < x {
			s[i] = s[i+1]
			i++
		}
	} else {
		for i > 0 && s[i-1] > x {
			s[i] = s[i-1]
			i--
		}
	}
	s[i] = x
}

// values returns the ring oldest first.
func (w *window[T]) values() []float64 {
	out := make([]float64, 0, len(w.ring))
	for i := range w.ring {
		out = append(out, float64(w.ring[(w.head+i)%len(w.ring)]))
	}
	return out
}

// load replaces the window with vals (oldest first), keeping the most
// recent when there are more than it holds.
func (w *window[T]) load(vals []float64) {
	if len(vals) > cap(w.ring) {
		vals = vals[len(vals)-cap(w.ring):]
	}
	w.reset()
	for _, x := range vals {
		w.ring = append(w.ring, T(x))
	}
	w.byValue = append(w.byValue, w.ring...)
	slices.Sort(w.byValue)
}

func (w *window[T]) reset() { w.ring, w.byValue, w.head = w.ring[:0], w.byValue[:0], 0 }

// median is the window's median (0 when empty).
func (w *window[T]) median() float64 {
	s, n := w.byValue, len(w.byValue)
	switch {
	case n == 0:
		return 0
	case n%2 == 1:
		return float64(s[n/2])
	}
	return (float64(s[n/2-1]) + float64(s[n/2])) / 2
}

// stats summarises the window (only when a comparison needs its spread).
func (w *window[T]) stats() Stats {
	if s, ok := any(w.byValue).([]float64); ok {
		return summarizeSorted(s)
	}
	buf := make([]float64, len(w.byValue))
	for i, v := range w.byValue {
		buf[i] = float64(v)
	}
	return summarizeSorted(buf)
}
