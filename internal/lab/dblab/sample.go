//go:build linux

package dblab

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/plumbline/plumbline/internal/vocab"
)

// Key is one counter set of a database's ground truth: a location of its
// files and an operation, in the wire's words.
type Key struct {
	Location vocab.DatabaseLocation
	Op       vocab.DatabaseOp
}

func (k Key) String() string { return string(k.Location) + "/" + string(k.Op) }

// Counter is one operation's cumulative counters as the database's view
// gives them.
type Counter struct {
	Count uint64
	// Nanos is the time the operations took, in nanoseconds (the views
	// give milliseconds as floats, or picoseconds).
	Nanos float64
	Bytes uint64
}

// Sample is a reading of every counter of a database's views at one time.
type Sample struct {
	At       time.Time
	Counters map[Key]Counter
}

// Delta is one counter set's change between two samples.
type Delta struct {
	Key
	Count uint64
	Nanos float64
	Bytes uint64
}

// Latency is the mean time of one operation over the delta, in seconds;
// 0 without operations.
func (d Delta) Latency() float64 {
	if d.Count == 0 {
		return 0
	}
	return d.Nanos / float64(d.Count) / 1e9
}

// Diff returns every counter set's change from a to b, sorted by key. A
// counter that went backwards (a reset, a restart) is an error.
func Diff(a, b Sample) ([]Delta, error) {
	var out []Delta
	for k, cb := range b.Counters {
		ca := a.Counters[k]
		if cb.Count < ca.Count || cb.Nanos < ca.Nanos || cb.Bytes < ca.Bytes {
			return nil, fmt.Errorf("%s went backwards between %s and %s", k, a.At.Format(time.TimeOnly), b.At.Format(time.TimeOnly))
		}
		out = append(out, Delta{Key: k, Count: cb.Count - ca.Count, Nanos: cb.Nanos - ca.Nanos, Bytes: cb.Bytes - ca.Bytes})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key.String() < out[j].Key.String() })
	return out, nil
}

// add adds a counter to the sample's key.
func (s *Sample) add(k Key, c Counter) {
	if s.Counters == nil {
		s.Counters = map[Key]Counter{}
	}
	t := s.Counters[k]
	t.Count += c.Count
	t.Nanos += c.Nanos
	t.Bytes += c.Bytes
	s.Counters[k] = t
}

// History keeps a database's samples in time order so that an interval
// the agent reported can be matched with the views over the same
// interval.
type History struct {
	samples []Sample
}

// Add appends a sample (taken after every one before it).
func (h *History) Add(s Sample) { h.samples = append(h.samples, s) }

// Len is the number of samples kept.
func (h *History) Len() int { return len(h.samples) }

// Nearest returns the sample taken closest to t and how far from t it
// was taken.
func (h *History) Nearest(t time.Time) (Sample, time.Duration, bool) {
	if len(h.samples) == 0 {
		return Sample{}, 0, false
	}
	i := sort.Search(len(h.samples), func(i int) bool { return !h.samples[i].At.Before(t) })
	best := -1
	var bestOff time.Duration
	for _, j := range []int{i - 1, i} {
		if j < 0 || j >= len(h.samples) {
			continue
		}
		off := h.samples[j].At.Sub(t).Abs()
		if best < 0 || off < bestOff {
			best, bestOff = j, off
		}
	}
	return h.samples[best], bestOff, true
}

// Over returns the views' deltas over [from, to], from the samples
// nearest each end, and the larger of the two misalignments.
func (h *History) Over(from, to time.Time) ([]Delta, time.Duration, error) {
	a, offA, ok := h.Nearest(from)
	if !ok {
		return nil, 0, fmt.Errorf("no samples")
	}
	b, offB, _ := h.Nearest(to)
	if !b.At.After(a.At) {
		return nil, 0, fmt.Errorf("no samples between %s and %s", from.Format(time.TimeOnly), to.Format(time.TimeOnly))
	}
	d, err := Diff(a, b)
	return d, max(offA, offB), err
}

// Bracket returns the views' deltas over the narrowest and the widest
// spans of samples around [from, to]: inner from the first sample at or
// after from+guard to the last at or before to−guard, outer from the last
// sample at or before from−guard to the first at or after to+guard. The
// counters being cumulative, whatever they counted over [from, to] lies
// between the two, whoever read them then; guard allows for the time a
// reader takes to read them (its instant is not known to the
// millisecond). ok is false when the samples do not reach around the
// interval (inner may then be empty: no sample inside it).
func (h *History) Bracket(from, to time.Time, guard time.Duration) (inner, outer []Delta, ok bool, err error) {
	n := len(h.samples)
	firstFrom := func(t time.Time) int { return sort.Search(n, func(i int) bool { return !h.samples[i].At.Before(t) }) }
	lastUntil := func(t time.Time) int { return sort.Search(n, func(i int) bool { return h.samples[i].At.After(t) }) - 1 }
	oa, ob := lastUntil(from.Add(-guard)), firstFrom(to.Add(guard))
	ia, ib := firstFrom(from.Add(guard)), lastUntil(to.Add(-guard))
	if oa < 0 || ob >= n {
		return nil, nil, false, nil
	}
	if outer, err = Diff(h.samples[oa], h.samples[ob]); err != nil {
		return nil, nil, false, err
	}
	if ia < ib {
		if inner, err = Diff(h.samples[ia], h.samples[ib]); err != nil {
			return nil, nil, false, err
		}
	}
	return inner, outer, true, nil
}

// Format renders deltas as "location/op=count×latency" for logs.
func Format(ds []Delta) string {
	var b strings.Builder
	for _, d := range ds {
		if d.Count == 0 {
			continue
		}
		fmt.Fprintf(&b, " %s=%d×%.3fms", d.Key, d.Count, d.Latency()*1e3)
	}
	return strings.TrimSpace(b.String())
}
