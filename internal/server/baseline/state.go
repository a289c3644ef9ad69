package baseline

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
)

// The serialised Detector (MarshalBinary), little-endian:
//
//	"PLB" 0x01                  magic and format version
//	status, reference           one byte each (codes below)
//	flags                       one byte: which of the three times follow
//	since, time, streak since   varint Unix nanoseconds, each if flagged
//	ratio, latency              float64 bits
//	streak                      uvarint
//	history                     uvarint n, then n float64s, oldest first
//	held                        uvarint n, then n float64s
//
//	(version 2) for each signal after the median — tail, mean, rate:
//	status                      one byte
//	flags                       one byte: since, streak since
//	since, streak since         varint Unix nanoseconds, each if flagged
//	ratio                       float64 bits
//	streak, recent              uvarint each (recent: the beyond-run mask)
//	history                     uvarint n, then n float32s, oldest first
//	held                        uvarint n, then n float64s
//
//	(version 3) the slow-op count:
//	status                      one byte
//	flags                       one byte: since, streak since
//	since, streak since         varint Unix nanoseconds, each if flagged
//	ratio                       float64 bits
//	streak                      uvarint
//	pool                        uvarint n, then n × (slow ops byte, ops uvarint), oldest first
//	history                     uvarint n, then n float32 weights (pooled sums 0..n-1)
//	learned                     uvarint
//	waiting                     uvarint n, then n bytes (pools not learned yet), oldest first
//	corroborated                uvarint for each signal after the median (tail, mean, rate)
//
// The configuration is not part of it: UnmarshalBinary keeps the
// Detector's own, and trims a longer history to its window. A state with
// a 48-run window takes at most 4+3+30+16+1+1+384+1+8×3 ≈ 460 bytes for
// the median and, with 24-run signal windows, 2+20+8+1+3+1+96+1+8×3 ≈ 156
// more per signal: ≈ 930 (785 measured with nothing held), and at most
// 2+20+8+1+1+16×4+1+48×4+4+1+16 ≈ 310 for the slow-op count (its default
// 6-run pool and 13 sums: ≈ 100; 883 bytes measured in all with full
// windows), and a uvarint per signal for the mean's corroborated streak.
// Versions 1 (the median alone) and 2 (no
// slow-op count) are still read: the signals they lack start learning.
var magic = [3]byte{'P', 'L', 'B'}

// stateVersion is the format MarshalBinary writes.
const stateVersion = 3

var (
	statusCodes = []Status{"", Learning, OK, Degraded}
	refCodes    = []Reference{NoReference, History, Cohort, Prior}
)

const (
	flagSince = 1 << iota
	flagTime
	flagStreakSince
)

// maxHeld bounds the held runs (Config.Sustain is at most 64).
const maxHeld = 64

// ErrCorruptState wraps every UnmarshalBinary error.
var ErrCorruptState = errors.New("corrupt baseline state")

// MarshalBinary serialises the history and the state machine. The last
// state's comparisons are not kept.
func (d *Detector) MarshalBinary() ([]byte, error) {
	b := make([]byte, 0, 64+8*(d.hist.len()+len(d.held)))
	b = append(b, magic[0], magic[1], magic[2], stateVersion)
	b = append(b, byte(index(statusCodes, d.last.Status)), byte(index(refCodes, d.last.Reference)))
	b = appendTimes(b, d.last.Since, d.last.Time, d.streakSince)
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(d.last.Ratio))
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(d.last.Latency))
	b = binary.AppendUvarint(b, uint64(d.last.Streak))
	b = appendFloats(b, d.hist.values())
	b = appendFloats(b, d.held)
	for i := range d.tracks {
		k := &d.tracks[i]
		b = append(b, byte(index(statusCodes, k.st.Status)))
		b = appendTimes(b, k.st.Since, k.streakSince)
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(k.ratio))
		b = binary.AppendUvarint(b, uint64(k.st.Streak))
		b = binary.AppendUvarint(b, uint64(k.recent))
		b = binary.AppendUvarint(b, uint64(len(k.win.ring)))
		for _, x := range k.win.values() {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(float32(x)))
		}
		b = appendFloats(b, k.held)
	}
	b = d.slow.append(b)
	for i := range d.tracks {
		b = binary.AppendUvarint(b, uint64(d.tracks[i].corr))
	}
	return b, nil
}

// appendTimes appends a flag byte (bit i: times[i] is set) and the set
// times as varint Unix nanoseconds.
func appendTimes(b []byte, times ...time.Time) []byte {
	var flags byte
	for i, t := range times {
		if !t.IsZero() {
			flags |= 1 << i
		}
	}
	b = append(b, flags)
	for _, t := range times {
		if !t.IsZero() {
			b = binary.AppendVarint(b, t.UnixNano())
		}
	}
	return b
}

// times reads the times appendTimes wrote under flags.
func (r *reader) times(flags byte, times ...*time.Time) {
	for i, p := range times {
		if flags&(1<<i) != 0 {
			*p = time.Unix(0, r.varint()).UTC()
		}
	}
}

func appendFloats(b []byte, xs []float64) []byte {
	b = binary.AppendUvarint(b, uint64(len(xs)))
	for _, x := range xs {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
	}
	return b
}

func index[T comparable](list []T, v T) int {
	for i, x := range list {
		if x == v {
			return i
		}
	}
	return 0
}

// UnmarshalBinary restores a state written by MarshalBinary into d,
// keeping d's configuration. On error d is unchanged.
func (d *Detector) UnmarshalBinary(b []byte) error {
	r := reader{b: b}
	if len(b) < 4 || [3]byte(b[:3]) != magic || b[3] < 1 || b[3] > stateVersion {
		return fmt.Errorf("%w: bad magic or version", ErrCorruptState)
	}
	version := b[3]
	r.b = b[4:]
	var st State
	sc, rc, flags := r.byte(), r.byte(), r.byte()
	if int(sc) >= len(statusCodes) || int(rc) >= len(refCodes) || flags&^(flagSince|flagTime|flagStreakSince) != 0 {
		r.fail("status %d, reference %d, flags %#x", sc, rc, flags)
	} else {
		st.Status, st.Reference = statusCodes[sc], refCodes[rc]
	}
	var streakSince time.Time
	r.times(flags, &st.Since, &st.Time, &streakSince)
	st.Ratio, st.Latency = r.float(), r.float()
	if !(st.Ratio >= 0) || math.IsInf(st.Ratio, 1) || !(st.Latency >= 0) || math.IsInf(st.Latency, 1) {
		r.fail("ratio %v, latency %v", st.Ratio, st.Latency)
	}
	streak := r.uvarint()
	if streak > maxHeld {
		r.fail("streak %d", streak)
	}
	st.Streak = int(streak)
	hist := r.values(maxWindow)
	held := r.values(maxHeld)
	var tracks [numTracks]savedTrack
	if version >= 2 {
		for i := range tracks {
			tracks[i] = r.track()
		}
	}
	var slow savedSlow
	var corr [numTracks]int
	if version >= 3 {
		slow = r.slow()
		for i := range corr {
			corr[i] = r.count(maxHeld)
		}
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail("%d trailing bytes", len(r.b))
	}
	if r.err != nil {
		return r.err
	}
	d.hist.load(hist)
	d.held = held
	d.last = st
	d.streakSince = streakSince
	for i := range d.tracks {
		k, t := &d.tracks[i], &tracks[i]
		k.win.load(t.hist)
		k.held = append(k.held[:0], t.held...)
		k.st = SignalState{Status: t.status, Since: t.since, Streak: t.streak}
		k.streakSince, k.ratio = t.streakSince, t.ratio
		// A mask wider than this configuration's window keeps its recent end.
		k.recent = t.recent & (1<<k.sc.Within - 1)
		k.corr = corr[i]
	}
	d.slow.restore(slow)
	d.iops, d.cap = 0, 0
	return nil
}

// savedTrack is one decoded signal track.
type savedTrack struct {
	status             Status
	since, streakSince time.Time
	ratio              float64
	streak             int
	recent             uint16
	hist, held         []float64
}

func (r *reader) track() savedTrack {
	var t savedTrack
	sc, flags := r.byte(), r.byte()
	if r.err != nil {
		return t
	}
	if int(sc) >= len(statusCodes) || flags&^3 != 0 {
		r.fail("signal status %d, flags %#x", sc, flags)
		return t
	}
	t.status = statusCodes[sc]
	r.times(flags, &t.since, &t.streakSince)
	t.ratio = r.float()
	if !(t.ratio >= 0) || math.IsInf(t.ratio, 1) {
		r.fail("signal ratio %v", t.ratio)
	}
	streak := r.uvarint()
	if streak > maxHeld {
		r.fail("signal streak %d", streak)
	}
	t.streak = int(streak)
	recent := r.uvarint()
	if recent > 1<<maxWithin-1 {
		r.fail("signal recent mask %#x", recent)
	}
	t.recent = uint16(recent)
	t.hist = r.values32(maxWindow)
	t.held = r.values(maxHeld)
	return t
}

// values32 reads a count (at most max) and that many positive finite
// float32s.
func (r *reader) values32(max int) []float64 { return r.valuesOf(max, 4) }

// reader decodes with a sticky error.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", ErrCorruptState, fmt.Sprintf(format, args...))
	}
}

func (r *reader) byte() byte {
	if r.err != nil || len(r.b) < 1 {
		r.fail("truncated")
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *reader) float() float64 {
	if r.err != nil || len(r.b) < 8 {
		r.fail("truncated")
		return 0
	}
	v := math.Float64frombits(binary.LittleEndian.Uint64(r.b))
	r.b = r.b[8:]
	return v
}

func (r *reader) varint() int64 { return readVarint(r, binary.Varint, "varint") }

func (r *reader) uvarint() uint64 { return readVarint(r, binary.Uvarint, "uvarint") }

// readVarint decodes one varint with dec (binary.Varint or Uvarint).
func readVarint[T int64 | uint64](r *reader, dec func([]byte) (T, int), what string) T {
	if r.err != nil {
		return 0
	}
	v, n := dec(r.b)
	if n <= 0 {
		r.fail("bad %s", what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

// values reads a count (at most max) and that many positive finite floats.
func (r *reader) values(max int) []float64 { return r.valuesOf(max, 8) }

// valuesOf reads a count (at most max) and that many positive finite
// little-endian IEEE floats of size bytes (4 or 8).
func (r *reader) valuesOf(max, size int) []float64 {
	n := r.uvarint()
	if r.err != nil {
		return nil
	}
	if n > uint64(max) || n*uint64(size) > uint64(len(r.b)) {
		r.fail("%d values: want at most %d and the bytes to hold them", n, max)
		return nil
	}
	out := make([]float64, n)
	for i := range out {
		if size == 4 {
			out[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(r.b)))
		} else {
			out[i] = math.Float64frombits(binary.LittleEndian.Uint64(r.b))
		}
		r.b = r.b[size:]
		if !valid(out[i]) {
			r.fail("value %v: want a positive finite value", out[i])
			return nil
		}
	}
	return out
}
