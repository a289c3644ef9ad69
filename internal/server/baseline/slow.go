package baseline

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"
)

// SlowFactor is how many times its run's median an operation takes to
// count as slow (Run.Slow): a 100 ms stall on a 6 ms disk op is ~17×, on
// a 0.35 ms cached one ~300×, while a healthy run's spread stays within a
// few times its median.
const SlowFactor = 8

// SlowConfig is the constants of the slow-op signal (SignalSlow). Zero
// fields take their defaults (DefaultConfig).
//
// The signal pools each run's count of slow ops over the last Pool runs
// (each run counting at most PerRun, so that one bad run cannot carry the
// pool) and judges that sum against the empirical distribution of the same
// pooled sum in the volume's own history: a decayed histogram of past
// pools (half-life HalfLife runs), whose ceiling is the largest pooled sum
// the history still holds half a run's weight of. A pool is beyond when it
// reaches the ceiling + Margin and Floor: a volume whose slow ops come in
// bursts learns those bursts, one that never stalls is judged on Floor.
// The defaults were chosen on the recorded noise and stalls of
// internal/lab/replay (bench/RESULTS-degrade.md, third pass): Margin 2 or
// Sustain 1 raised 13 and 6 false alerts in 56 days of the lab's loaded
// recording, the defaults 1.
type SlowConfig struct {
	// Pool is how many recent runs are pooled (default 6: 18 minutes at
	// the default 3-minute schedule), PerRun the most slow ops one run
	// counts for (default 2).
	Pool, PerRun int
	// Floor is the least pooled count that can be beyond (default 5:
	// more than two runs' worth at PerRun 2, so one or two stalled runs
	// never alert); Margin how far above the history's ceiling a pool
	// must be (default 3).
	Floor, Margin int
	// MinHistory is how many pools the history needs before it is a
	// reference (default 240: 12 hours at the default schedule; the
	// ceiling of a shorter history is below the bursts a loaded host
	// shows in a day).
	MinHistory int
	// HalfLife is the history's memory in runs (default 960: two days at
	// the default schedule).
	HalfLife int
	// Sustain beyond runs in a row degrade (default 2: the pool already
	// spans Pool runs), Recover normal runs in a row recover (default 3).
	Sustain, Recover int
	// MinOps is the fewest completed operations a run needs to count
	// (default 50).
	MinOps int
}

// maxSlowBins bounds Pool × PerRun (the histogram of pooled sums).
const maxSlowBins = 48

func (c *SlowConfig) fill(d SlowConfig) {
	for _, f := range []struct{ v, d *int }{{&c.Pool, &d.Pool}, {&c.PerRun, &d.PerRun}, {&c.Floor, &d.Floor}, {&c.Margin, &d.Margin}, {&c.MinHistory, &d.MinHistory},
		{&c.HalfLife, &d.HalfLife}, {&c.Sustain, &d.Sustain}, {&c.Recover, &d.Recover}, {&c.MinOps, &d.MinOps}} {
		if *f.v == 0 {
			*f.v = *f.d
		}
	}
}

func (c SlowConfig) validate() error {
	switch {
	case c.Pool < 1 || c.Pool > maxWithin || c.PerRun < 1 || c.Pool*c.PerRun >= maxSlowBins:
		return fmt.Errorf("slow pool %d × %d per run: want pool 1 to %d, pool × per run below %d", c.Pool, c.PerRun, maxWithin, maxSlowBins)
	case c.Floor < 1 || c.Floor > c.Pool*c.PerRun:
		return fmt.Errorf("slow floor %d: want 1 to pool × per run (%d)", c.Floor, c.Pool*c.PerRun)
	case c.Margin < 1 || c.MinHistory < 1:
		return fmt.Errorf("slow margin %d, min history %d: want at least 1", c.Margin, c.MinHistory)
	case c.HalfLife < 1 || c.Sustain < 1 || c.Sustain > maxHeld || c.Recover < 1 || c.Recover > maxHeld || c.MinOps < 1:
		return fmt.Errorf("slow half-life %d, sustain %d, recover %d, min ops %d: want each at least 1, sustain and recover at most %d",
			c.HalfLife, c.Sustain, c.Recover, c.MinOps, maxHeld)
	}
	return nil
}

// slowRun is one run in the pool: its slow ops and its ops, saturated.
type slowRun struct {
	slow uint8
	ops  uint16
}

// slowTrack is the slow-op signal's state machine: the pool of the last
// runs, the decayed histogram of past pooled sums, and the same rule as
// the other signals (Sustain beyond in a row, the history frozen while
// degraded, Recover to clear). Each pool waits Pool runs before the history
// learns it, and a degraded state drops the waiting ones: a stall that
// raises the pool a run at a time is judged against the history from
// before it, not one that learned its ramp.
type slowTrack struct {
	sc   *SlowConfig
	pool [maxWithin]slowRun
	n    int // runs in the pool (up to Pool)
	head int // the oldest run once the pool is full
	// hist is the decayed weight of each pooled sum; learned counts the
	// pools it has seen (up to MinHistory matters).
	hist    [maxSlowBins]float32
	learned int
	// wait holds the pools not learned yet, oldest at waitHead.
	wait     [maxWithin]uint8
	waitN    int
	waitHead int
	st       SignalState
	since    time.Time // the current streak's first run
	ratio    float64
	// ops is the last pool's ops, for the detail.
	ops int
}

func (k *slowTrack) push(r slowRun) {
	if k.n < k.sc.Pool {
		k.pool[k.n] = r
		k.n++
		return
	}
	k.pool[k.head] = r
	k.head = (k.head + 1) % k.sc.Pool
}

// pooled is the pool's capped sum and its ops.
func (k *slowTrack) pooled() (capped, ops int) {
	for _, r := range k.pool[:k.n] {
		capped += min(int(r.slow), k.sc.PerRun)
		ops += int(r.ops)
	}
	return capped, ops
}

// learn adds one pooled sum to the history, decaying the rest.
func (k *slowTrack) learn(s int) {
	decay := float32(math.Exp2(-1 / float64(k.sc.HalfLife)))
	for i := range k.sc.Pool*k.sc.PerRun + 1 {
		k.hist[i] *= decay
	}
	k.hist[s]++
	k.learned = min(k.learned+1, 1<<20)
}

// ceiling is the largest pooled sum the history holds at least half a
// run's weight at or above.
func (k *slowTrack) ceiling() int {
	var tail float32
	for i := k.sc.Pool * k.sc.PerRun; i > 0; i-- {
		if tail += k.hist[i]; tail >= 0.5 {
			return i
		}
	}
	return 0
}

// observe counts one run's slow ops (ops below MinOps: the run is left
// out and only Value and History are cleared).
func (k *slowTrack) observe(t time.Time, slow, ops int) {
	sc := k.sc
	if ops < sc.MinOps || slow < 0 {
		k.st.Value, k.st.History = 0, Comparison{}
		return
	}
	k.push(slowRun{slow: uint8(min(slow, math.MaxUint8)), ops: uint16(min(ops, math.MaxUint16))})
	s, n := k.pooled()
	k.ops = n
	prev := k.st
	st := SignalState{Value: float64(s), Status: Learning, Since: prev.Since}
	if k.n < sc.Pool {
		k.st = st
		if prev.Status != Learning || prev.Since.IsZero() {
			k.st.Since = t
		}
		return
	}
	trusted := k.learned >= sc.MinHistory
	ceil := k.ceiling()
	if trusted {
		st.History = Comparison{Baseline: float64(max(ceil, 1)), Ratio: float64(s) / float64(max(ceil, 1))}
		k.ratio = st.History.Ratio
	}
	beyond := trusted && s >= ceil+sc.Margin && s >= sc.Floor
	if prev.Status == Degraded {
		st.Status, st.Since = Degraded, prev.Since
		if !beyond {
			if st.Streak = prev.Streak + 1; st.Streak == 1 {
				k.since = t
			}
		}
		if st.Streak >= sc.Recover {
			st.Status, st.Since, st.Streak = OK, k.since, 0
		}
		k.st = st
		return
	}
	if trusted {
		st.Status = OK
	}
	if prev.Status != st.Status || prev.Since.IsZero() {
		st.Since = t
	}
	k.await(s)
	if !beyond {
		k.st = st
		return
	}
	if st.Streak = prev.Streak + 1; st.Streak == 1 {
		k.since = t
	}
	if st.Streak >= sc.Sustain {
		st.Status, st.Since, st.Streak = Degraded, k.since, 0
		k.waitN, k.waitHead = 0, 0
	}
	k.st = st
}

// await queues a pool for the history; the one queued Pool runs ago is
// learned.
func (k *slowTrack) await(s int) {
	if k.waitN < k.sc.Pool {
		k.wait[(k.waitHead+k.waitN)%k.sc.Pool] = uint8(s)
		k.waitN++
		return
	}
	k.learn(int(k.wait[k.waitHead]))
	k.wait[k.waitHead] = uint8(s)
	k.waitHead = (k.waitHead + 1) % k.sc.Pool
}

func (k *slowTrack) reset() {
	*k = slowTrack{sc: k.sc}
}

// append serialises the track (the format in state.go, version 3).
func (k *slowTrack) append(b []byte) []byte {
	b = append(b, byte(index(statusCodes, k.st.Status)))
	b = appendTimes(b, k.st.Since, k.since)
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(k.ratio))
	b = binary.AppendUvarint(b, uint64(k.st.Streak))
	b = binary.AppendUvarint(b, uint64(k.n))
	for i := range k.n {
		r := k.pool[(k.head+i)%k.n]
		b = append(b, r.slow)
		b = binary.AppendUvarint(b, uint64(r.ops))
	}
	bins := k.sc.Pool*k.sc.PerRun + 1
	b = binary.AppendUvarint(b, uint64(bins))
	for _, w := range k.hist[:bins] {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(w))
	}
	b = binary.AppendUvarint(b, uint64(k.learned))
	b = binary.AppendUvarint(b, uint64(k.waitN))
	for i := range k.waitN {
		b = append(b, k.wait[(k.waitHead+i)%k.sc.Pool])
	}
	return b
}

// savedSlow is a decoded slow-op track.
type savedSlow struct {
	status             Status
	since, streakSince time.Time
	ratio              float64
	streak             int
	pool               []slowRun
	hist               []float32
	learned            int
	wait               []uint8
}

// slow decodes a slow-op track written under any configuration: what
// does not fit sc (a longer pool, sums beyond its range) is trimmed by
// restore.
func (r *reader) slow() savedSlow {
	var t savedSlow
	st, flags := r.byte(), r.byte()
	if r.err != nil {
		return t
	}
	if int(st) >= len(statusCodes) || flags&^3 != 0 {
		r.fail("slow status %d, flags %#x", st, flags)
		return t
	}
	t.status = statusCodes[st]
	r.times(flags, &t.since, &t.streakSince)
	if t.ratio = r.float(); !(t.ratio >= 0) || math.IsInf(t.ratio, 1) {
		r.fail("slow ratio %v", t.ratio)
	}
	if n := r.uvarint(); n > maxHeld {
		r.fail("slow streak %d", n)
	} else {
		t.streak = int(n)
	}
	n := r.count(maxWithin)
	for range n {
		slow, ops := r.byte(), r.uvarint()
		if ops > math.MaxUint16 {
			r.fail("slow pool ops %d", ops)
		}
		t.pool = append(t.pool, slowRun{slow: slow, ops: uint16(ops)})
	}
	bins := r.count(maxSlowBins)
	for range bins {
		w := math.Float32frombits(r.fixed32())
		if !(w >= 0) || math.IsInf(float64(w), 1) {
			r.fail("slow weight %v", w)
		}
		t.hist = append(t.hist, w)
	}
	if n := r.uvarint(); n > 1<<20 {
		r.fail("slow learned %d", n)
	} else {
		t.learned = int(n)
	}
	for range r.count(maxWithin) {
		t.wait = append(t.wait, r.byte())
	}
	return t
}

// count reads a uvarint count of at most max.
func (r *reader) count(max int) int {
	n := r.uvarint()
	if r.err == nil && n > uint64(max) {
		r.fail("count %d: want at most %d", n, max)
	}
	if r.err != nil {
		return 0
	}
	return int(n)
}

// fixed32 reads 4 little-endian bytes.
func (r *reader) fixed32() uint32 {
	if r.err != nil || len(r.b) < 4 {
		r.fail("truncated")
		return 0
	}
	v := binary.LittleEndian.Uint32(r.b)
	r.b = r.b[4:]
	return v
}

// restore loads a decoded track, keeping the most recent runs and waiting
// pools that fit this configuration and the sums in its range (a pool
// learned under a larger range counts at its top).
func (k *slowTrack) restore(t savedSlow) {
	sc := k.sc
	*k = slowTrack{sc: sc, st: SignalState{Status: t.status, Since: t.since, Streak: t.streak}, since: t.streakSince, ratio: t.ratio}
	if len(t.pool) > sc.Pool {
		t.pool = t.pool[len(t.pool)-sc.Pool:]
	}
	for _, r := range t.pool {
		k.push(r)
	}
	top := sc.Pool * sc.PerRun
	for i, w := range t.hist {
		k.hist[min(i, top)] += w
	}
	k.learned = t.learned
	if len(t.wait) > sc.Pool {
		t.wait = t.wait[len(t.wait)-sc.Pool:]
	}
	for _, w := range t.wait {
		k.wait[k.waitN] = uint8(min(int(w), top))
		k.waitN++
	}
}
