// Package members is the server's sibling judge: it compares each member of
// a group of devices doing the same work (md members, mirror legs, the PVs
// under one LV, multipath paths) with its siblings, interval by interval,
// from the kernel's own accounting the agents send (Record.member_io), and
// names a member that is slower than its siblings, sustained: by device,
// /dev/disk/by-id name and serial, with the ratio and since when.
//
// The statistics are the baseline detector's (internal/server/baseline):
// the siblings' median and MAD as the reference, a member beyond it only
// when both the ratio and the robust z-score say so, a minimum of
// operations for an interval to count, Sustain of the last SustainWindow
// intervals beyond to name a member and Recover normal ones in a row to
// clear it (hysteresis).
//
// A second, slower path names a member whose excess is too small for one
// interval to show it past the noise — a member that stalls a few percent
// of its operations adds a few milliseconds to a mean of ten, ×1.2–2 minute
// by minute — but is there interval after interval: a one-sided CUSUM
// (Page's cumulative sum) of the member's log await ratio to its siblings,
// less a reference of DriftRatio, names it when the sum reaches
// DriftLimit. A steady ×1.4 gets there in about eight intervals; a healthy
// member's ratio wanders around 1 and the sum keeps falling back to 0.
//
// It runs as its own leader loop (Judge.Run), apart from the baseline
// evaluator: member I/O arrives on its own schedule (a record a minute per
// agent, not a probe run), its progress is its own watermark, and the
// evaluator's pass is shared with the rebuild and database work.
package members

import (
	"math"
	"math/bits"
	"slices"
	"time"

	"github.com/plumbline/plumbline/internal/server/baseline"
	"github.com/plumbline/plumbline/internal/server/store"
	"github.com/plumbline/plumbline/internal/vocab"
)

// Config holds the judge's constants. The zero value of a field means its
// default (DefaultConfig).
type Config struct {
	// MinOps is how many completed operations in one direction a member
	// needs in an interval for its await there to be compared (default
	// 20): /proc/diskstats counts time in whole milliseconds, summed per
	// request, so fewer ops say little.
	MinOps uint64
	// A member is beyond its siblings in a direction when its await is at
	// least Ratio times the siblings' median (default 1.5), MinExcess above
	// it (default 50µs), and Z robust deviations above it (default 3; the
	// siblings' MAD, floored at MinRelativeSpread of their median, default
	// 0.05).
	Ratio             float64
	MinExcess         time.Duration
	Z                 float64
	MinRelativeSpread float64
	// Sustain of the last SustainWindow intervals judged beyond name a
	// member slow (defaults 4 of 6: 4 minutes at the agent's default
	// 60-second interval for a steady slowdown; a member that stalls now
	// and then may dip below the ratio in an interval without starting
	// over). SustainWindow is at most 31 (the state's column is a 32-bit
	// signed integer).
	Sustain       int
	SustainWindow int
	// While named, an interval is normal when in every direction compared
	// the ratio is below RecoverRatio (default 1.2); Recover normal
	// intervals in a row clear it (default 3).
	RecoverRatio float64
	Recover      int
	// DriftRatio and DriftLimit are the CUSUM's reference and limit: each
	// interval judged adds ln(ratio) − ln(DriftRatio) to the member's sum
	// (floored at 0), the ratio the geometric mean of its directions'
	// (each capped at DriftCap, so that one wild interval cannot name a
	// member alone), and a sum of DriftLimit names the member (defaults
	// 1.2, 1.2 and 2). A direction whose await is less than MinExcess
	// above its siblings' adds no more than ratio 1.
	DriftRatio float64
	DriftLimit float64
	DriftCap   float64
	// SizeRatio: a member does the same kind of work as its siblings when
	// its mean request size is within this factor of theirs (default 2);
	// otherwise its await is not compared (a parity or resync pattern, a
	// sequential stream one leg of a mirror takes).
	SizeRatio float64
	// Stale: a member not reported for this long is forgotten, and a gap
	// this long breaks a streak (default 1h).
	Stale time.Duration
}

// DefaultConfig is the configuration every zero field of a Config takes.
func DefaultConfig() Config {
	return Config{MinOps: 20, Ratio: 1.5, MinExcess: 50 * time.Microsecond, Z: 3, MinRelativeSpread: 0.05,
		Sustain: 4, SustainWindow: 6, RecoverRatio: 1.2, Recover: 3, DriftRatio: 1.2, DriftLimit: 1.2, DriftCap: 2,
		SizeRatio: 2, Stale: time.Hour}
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.MinOps == 0 {
		c.MinOps = d.MinOps
	}
	if c.Ratio <= 1 {
		c.Ratio = d.Ratio
	}
	if c.MinExcess <= 0 {
		c.MinExcess = d.MinExcess
	}
	if c.Z <= 0 {
		c.Z = d.Z
	}
	if c.MinRelativeSpread <= 0 {
		c.MinRelativeSpread = d.MinRelativeSpread
	}
	if c.Sustain <= 0 || c.Sustain > 31 {
		c.Sustain = d.Sustain
	}
	if c.SustainWindow < c.Sustain || c.SustainWindow > 31 {
		c.SustainWindow = max(d.SustainWindow, c.Sustain)
	}
	if c.RecoverRatio <= 1 || c.RecoverRatio > c.Ratio {
		c.RecoverRatio = min(d.RecoverRatio, c.Ratio)
	}
	if c.Recover <= 0 {
		c.Recover = d.Recover
	}
	if c.DriftRatio <= 1 {
		c.DriftRatio = d.DriftRatio
	}
	if c.DriftLimit <= 0 {
		c.DriftLimit = d.DriftLimit
	}
	if c.DriftCap <= c.DriftRatio {
		c.DriftCap = max(d.DriftCap, c.DriftRatio*1.5)
	}
	if c.SizeRatio <= 1 {
		c.SizeRatio = d.SizeRatio
	}
	if c.Stale <= 0 {
		c.Stale = d.Stale
	}
	return c
}

// The directions a member's await is compared in.
const (
	Read  = "read"
	Write = "write"
)

// Verdict is one member's comparison with its siblings in one interval.
type Verdict struct {
	Device string
	// Judged: compared in at least one direction.
	Judged bool
	// Beyond: beyond its siblings in a direction. Normal: judged, and
	// below RecoverRatio in every direction compared.
	Beyond, Normal bool
	// Direction is the direction it is most beyond its siblings in (or,
	// not beyond, the one with the largest ratio); Ratio its await over the
	// siblings' median there; Await and SiblingsAwait the two, in seconds.
	Direction            string
	Ratio                float64
	Await, SiblingsAwait float64
	// Excess is the member's log await ratio to its siblings, the mean of
	// its directions' (each capped at DriftCap; a direction within
	// MinExcess of its siblings at most 0): what the interval adds to the
	// member's CUSUM before the reference.
	Excess float64
	// Util and SiblingsUtil are the share of the interval the member and
	// (the median of) its siblings had I/O in flight (0..1).
	Util, SiblingsUtil float64
}

// compared says whether a member takes part in its group's comparison:
// an md member only while in_sync and neither faulty, a spare, a
// replacement being built, nor write-mostly (slower by design).
func compared(kind string, c store.MemberCounters) bool {
	if kind != string(vocab.MemberGroupMD) || len(c.State) == 0 {
		return true
	}
	if !slices.Contains(c.State, vocab.MDInSync) {
		return false
	}
	for _, f := range []string{vocab.MDFaulty, vocab.MDSpare, vocab.MDReplacement, vocab.MDWriteMostly, vocab.MDJournal} {
		if slices.Contains(c.State, f) {
			return false
		}
	}
	return true
}

// side is one member's figures in one direction.
type side struct {
	ops, timeMS, sectors uint64
}

// await is the mean time a request took, in seconds. The kernel sums it
// in whole milliseconds: a sum of 0 is under one, counted as half.
func (s side) await() float64 { return max(float64(s.timeMS), 0.5) / 1000 / float64(s.ops) }
func (s side) size() float64  { return max(float64(s.sectors), 0.5) / float64(s.ops) }

func sides(c store.MemberCounters) [2]side {
	return [2]side{{c.Reads, c.ReadTimeMS, c.ReadSectors}, {c.Writes, c.WriteTimeMS, c.WriteSectors}}
}

var directions = [2]string{Read, Write}

// JudgeGroup compares every member of one group's interval with its
// siblings. Members not compared (see compared) get a verdict that is not
// Judged; so does a member in a direction with fewer than MinOps, or
// doing other work than its siblings (SizeRatio).
func JudgeGroup(cfg Config, interval time.Duration, g store.MemberGroup) []Verdict {
	cfg = cfg.withDefaults()
	out := make([]Verdict, len(g.Members))
	utils := make([]float64, 0, len(g.Members))
	for i, c := range g.Members {
		out[i] = Verdict{Device: c.Device, Util: min(1, float64(c.IOTimeMS)/1000/interval.Seconds())}
		if compared(g.Kind, c) {
			utils = append(utils, out[i].Util)
		}
	}
	var logs [2][]float64
	for d := range directions {
		logs[d] = judgeDirection(cfg, g, d, out)
	}
	for i := range out {
		var sum float64
		var n int
		for d := range directions {
			if x := logs[d][i]; !math.IsNaN(x) {
				sum, n = sum+x, n+1
			}
		}
		if n > 0 {
			out[i].Excess = sum / float64(n)
		}
		out[i].SiblingsUtil = siblingsMedian(utils, out[i].Util)
		out[i].Normal = out[i].Normal && out[i].Judged && !out[i].Beyond
	}
	return out
}

// judgeDirection compares the members' awaits in direction d, folds the
// result into their verdicts and returns each member's capped log ratio
// there (NaN: not compared).
func judgeDirection(cfg Config, g store.MemberGroup, d int, out []Verdict) []float64 {
	logs := make([]float64, len(out))
	for i := range logs {
		logs[i] = math.NaN()
	}
	var idx []int
	for i, c := range g.Members {
		if compared(g.Kind, c) && sides(c)[d].ops >= cfg.MinOps {
			idx = append(idx, i)
		}
	}
	if len(idx) < 2 {
		return logs
	}
	awaits := make([]float64, 0, len(idx))
	sizes := make([]float64, 0, len(idx))
	for _, i := range idx {
		s := sides(g.Members[i])[d]
		awaits, sizes = append(awaits, s.await()), append(sizes, s.size())
	}
	for k, i := range idx {
		sibA := without(awaits, k)
		if sz := baseline.Summarize(without(sizes, k)).Median; sz > 0 && (sizes[k] > sz*cfg.SizeRatio || sizes[k] < sz/cfg.SizeRatio) {
			continue // other work than its siblings'
		}
		ref := baseline.Summarize(sibA)
		m := max(ref.Median, 1e-6) // a microsecond: siblings that took no time at all
		ratio := awaits[k] / m
		sigma := max(1.4826*ref.MAD, cfg.MinRelativeSpread*m)
		z := (awaits[k] - m) / sigma
		excess := awaits[k]-m >= cfg.MinExcess.Seconds()
		beyond := ratio >= cfg.Ratio && z >= cfg.Z && excess
		logs[i] = math.Log(min(ratio, cfg.DriftCap))
		if !excess {
			logs[i] = min(logs[i], 0)
		}
		v := &out[i]
		first := !v.Judged
		if first {
			v.Normal = true
		}
		v.Judged = true
		v.Normal = v.Normal && ratio < cfg.RecoverRatio
		// The direction shown: a beyond one before any other, then the
		// larger ratio.
		if first || beyond && !v.Beyond || beyond == v.Beyond && ratio > v.Ratio {
			v.Direction, v.Ratio, v.Await, v.SiblingsAwait = directions[d], ratio, awaits[k], ref.Median
		}
		v.Beyond = v.Beyond || beyond
	}
	return logs
}

// without is xs without its k-th element (a new slice).
func without(xs []float64, k int) []float64 {
	out := make([]float64, 0, len(xs)-1)
	out = append(out, xs[:k]...)
	return append(out, xs[k+1:]...)
}

// siblingsMedian is the median of xs without one occurrence of x; 0 when
// nothing is left.
func siblingsMedian(xs []float64, x float64) float64 {
	if k := slices.Index(xs, x); k >= 0 {
		xs = without(xs, k)
	}
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Observe folds one interval's verdict (over start..end) into a member's
// state: which of the last intervals judged were beyond, and its CUSUM;
// naming the member once Sustain of the last SustainWindow were, or the
// CUSUM reached DriftLimit, and clearing it after Recover normal intervals
// in a row. Since is the start of the oldest beyond interval of that
// window (counted back in intervals of this one's length) or of the
// CUSUM's rise from 0, whichever is earlier. An interval not judged moves
// nothing; a gap of Stale or more starts the count again. It returns
// whether the member was named or cleared.
func Observe(cfg Config, st *store.MemberState, v Verdict, start, end time.Time) (changed bool) {
	cfg = cfg.withDefaults()
	if !st.Last.IsZero() && start.Sub(st.Last) >= cfg.Stale {
		st.Recent, st.Normal, st.Drift, st.DriftStart = 0, 0, 0, time.Time{}
	}
	st.Last = end
	st.Utilisation, st.SiblingsUtilisation = v.Util, v.SiblingsUtil
	if !v.Judged {
		return false
	}
	st.Direction, st.Ratio, st.AwaitSeconds, st.SiblingsAwaitSeconds = v.Direction, finite(v.Ratio), v.Await, v.SiblingsAwait
	st.Recent = st.Recent << 1 & (uint32(1)<<cfg.SustainWindow - 1)
	if v.Beyond {
		st.Recent |= 1
	}
	st.StreakStart = time.Time{}
	if st.Recent != 0 {
		oldest := 31 - bits.LeadingZeros32(st.Recent)
		st.StreakStart = start.Add(-time.Duration(oldest) * end.Sub(start))
	}
	drift(cfg, st, v.Excess, start)
	if !st.Slow {
		sustained, drifted := bits.OnesCount32(st.Recent) >= cfg.Sustain, st.Drift >= cfg.DriftLimit
		switch {
		case sustained && drifted:
			st.Since = minTime(st.StreakStart, st.DriftStart)
		case sustained:
			st.Since = st.StreakStart
		case drifted:
			st.Since = st.DriftStart
		default:
			return false
		}
		st.Slow, st.Normal = true, 0
		return true
	}
	if v.Normal {
		st.Normal++
	} else {
		st.Normal = 0
	}
	if st.Normal >= cfg.Recover {
		st.Slow, st.Since, st.Normal, st.Recent, st.StreakStart = false, time.Time{}, 0, 0, time.Time{}
		st.Drift, st.DriftStart = 0, time.Time{}
		return true
	}
	return false
}

// drift adds one interval's log ratio (excess), less the reference, to the
// member's CUSUM, floored at 0 and capped at twice the limit (a member
// named for hours would otherwise carry a sum no recovery could matter
// to); DriftStart is the start of the interval the sum last rose from 0.
func drift(cfg Config, st *store.MemberState, excess float64, start time.Time) {
	step := excess - math.Log(cfg.DriftRatio)
	if st.Drift == 0 && step > 0 {
		st.DriftStart = start
	}
	st.Drift = min(max(0, st.Drift+step), 2*cfg.DriftLimit)
	if st.Drift == 0 {
		st.DriftStart = time.Time{}
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func finite(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return 0
	}
	return x
}
