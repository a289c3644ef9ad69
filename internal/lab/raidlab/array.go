package raidlab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	"github.com/plumbline/plumbline/internal/ctxtime"
)

// ErrMemberFailed is returned for a request the array cannot serve because
// a member it needs has failed (RAID 0, a single disk, both halves of a
// mirror, two RAID 5 members). The FUSE layer turns it into EIO.
var ErrMemberFailed = errors.New("raidlab: a member the request needs has failed")

// ErrOutOfRange is returned for a write past the array's end.
var ErrOutOfRange = errors.New("raidlab: write past the end of the array")

// Array is one emulated array: its geometry, its members' queues and
// service model, its faults, its counters and the file that holds its data.
// Data is stored as the array presents it (logical bytes, no parity); the
// members and the parity exist only as timing.
type Array struct {
	geo    Geometry
	preset Preset
	data   *os.File

	mu         sync.Mutex
	rng        *rand.Rand
	members    []member
	addLatency time.Duration // added to every request's response time
	throttle   throttle
	c          counters
	// devs are the members' own block devices (a lab started with
	// MemberDevices): each member operation is real I/O on its device,
	// timed by MemberIO where the device's file is served. nil: the
	// members exist only in the model.
	devs *memberDevices
}

// throttle is a token bucket in front of the array, a cloud volume's
// provisioned IOPS with a burst allowance, kept as a theoretical arrival
// time (GCRA): a request is admitted at max(now, tat − burst/iops) and
// moves tat on by 1/iops, so an idle bucket admits burst requests at once
// and then one per 1/iops.
type throttle struct {
	iops      float64 // 0: no throttle
	burst     int
	tat       time.Time
	throttled uint64 // requests that waited for a token
	waited    time.Duration
}

// admit is when a request arriving at now may start.
func (t *throttle) admit(now time.Time) time.Time {
	if t.iops <= 0 {
		return now
	}
	interval := time.Duration(float64(time.Second) / t.iops)
	if t.tat.Before(now) {
		t.tat = now
	}
	t.tat = t.tat.Add(interval)
	at := t.tat.Add(-time.Duration(t.burst) * interval)
	if !at.After(now) {
		return now
	}
	t.throttled++
	t.waited += at.Sub(now)
	return at
}

type member struct {
	busyUntil  time.Time
	failed     bool
	factor     float64       // service-time multiplier (slow fault); 0 means 1
	addLatency time.Duration // added to every operation's service time
	// stall fault: each operation stalls for stallFor with probability
	// stallFrac, holding the member's queue (a disk retrying a sector).
	stallFrac float64
	stallFor  time.Duration
	stalls    uint64
	// rebuild fault: background operations of rebuildLen bytes arrive
	// every rebuildEvery (the member rebuilt is written, the others read)
	// and queue with the foreground; rebuildNext is the next arrival.
	rebuildEvery time.Duration
	rebuildWrite bool
	rebuildNext  time.Time
	rebuildOps   uint64
	readOps      uint64
	writeOps     uint64
	readBytes    uint64
	writeBytes   uint64
	busy         time.Duration
}

type counters struct {
	readRequests, writeRequests uint64
	splitReads, splitWrites     uint64
	readBytes, writeBytes       uint64
	failedRequests              uint64
	flushes                     uint64
	inFlight, maxInFlight       int
}

// NewArray builds an array over data, which must be at least g.Size bytes
// long (a sparse file is fine). seed fixes the rotational-delay sequence.
func NewArray(g Geometry, p Preset, data *os.File, seed uint64) (*Array, error) {
	if err := g.Validate(); err != nil {
		return nil, err
	}
	return &Array{
		geo:     g,
		preset:  p,
		data:    data,
		rng:     rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		members: make([]member, g.Members),
	}, nil
}

// Geometry returns the array's shape.
func (a *Array) Geometry() Geometry { return a.geo }

// ReadAt serves a read the way the array would: it waits until every
// member operation the read needs has been served, then returns the data.
// A read that reaches past the end is cut short (io.EOF as os.File does).
func (a *Array) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("raidlab: negative offset %d", off)
	}
	if off >= a.geo.Size {
		return 0, io.EOF
	}
	n := min(int64(len(p)), a.geo.Size-off)
	done, run, err := a.serve(false, off, n)
	if err != nil {
		return 0, err
	}
	defer a.done()
	if run != nil {
		if done, err = a.runMembers(ctx, done, run); err != nil {
			return 0, err
		}
	}
	got, rerr := a.data.ReadAt(p[:n], off)
	if rerr == io.EOF && int64(got) < n {
		// The backing file is sparse and sized, so this is a short file:
		// the rest reads as zeros, as an unwritten disk would.
		clear(p[got:n])
		got, rerr = int(n), nil
	}
	if werr := waitUntil(ctx, done); werr != nil {
		return 0, werr
	}
	if rerr != nil {
		return got, fmt.Errorf("raidlab: backing file: %w", rerr)
	}
	if n < int64(len(p)) {
		return int(n), io.EOF
	}
	return got, nil
}

// WriteAt serves a write the way the array would.
func (a *Array) WriteAt(ctx context.Context, p []byte, off int64) (int, error) {
	if off < 0 || off > a.geo.Size || int64(len(p)) > a.geo.Size-off {
		return 0, fmt.Errorf("%w: %d bytes at %d, size %d", ErrOutOfRange, len(p), off, a.geo.Size)
	}
	done, run, err := a.serve(true, off, int64(len(p)))
	if err != nil {
		return 0, err
	}
	defer a.done()
	if run != nil {
		if done, err = a.runMembers(ctx, done, run); err != nil {
			return 0, err
		}
	}
	got, werr := a.data.WriteAt(p, off)
	if err := waitUntil(ctx, done); err != nil {
		return 0, err
	}
	if werr != nil {
		return got, fmt.Errorf("raidlab: backing file: %w", werr)
	}
	return got, nil
}

// Sync is a cache flush (fsync, or a journal's preflush through the loop
// device). Members have no volatile write cache, so in the model a flush
// costs nothing; it is counted. The backing file is not synced: it is
// scratch that dies with the lab, and a real fsync of it would add the
// host disk's flush latency to every synced write.
func (a *Array) Sync() error {
	a.mu.Lock()
	a.c.flushes++
	a.mu.Unlock()
	return nil
}

func waitUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return nil
	}
	return ctxtime.Sleep(ctx, d)
}

// serve plans a request's member operations, queues them and returns when
// the last of them will be done. With member devices attached it queues
// nothing: it returns when the request may start (after the throttle) and
// the phases of member operations to run on the devices. It also tracks
// requests in flight, which is how a test sees that the kernel really
// sends requests concurrently.
func (a *Array) serve(write bool, off, n int64) (time.Time, [][]memberOp, error) {
	now := time.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.count(write, off, n)
	phases, err := a.plan(write, off, n)
	if err != nil {
		a.c.failedRequests++
		return time.Time{}, nil, err
	}
	start := a.throttle.admit(now)
	a.c.inFlight++
	a.c.maxInFlight = max(a.c.maxInFlight, a.c.inFlight)
	if a.devs != nil {
		return start, phases, nil
	}
	for _, ops := range phases {
		end := start
		for _, op := range ops {
			if t := a.reserve(&a.members[op.member], start, op.len, op.write); t.After(end) {
				end = t
			}
		}
		start = end
	}
	return start.Add(a.addLatency), nil, nil
}

// count adds a request to the array's counters; a.mu is held.
func (a *Array) count(write bool, off, n int64) {
	split := a.geo.Split(off, n)
	if write {
		a.c.writeRequests++
		a.c.writeBytes += uint64(n)
		if split {
			a.c.splitWrites++
		}
		return
	}
	a.c.readRequests++
	a.c.readBytes += uint64(n)
	if split {
		a.c.splitReads++
	}
}

// reserve queues one operation of n bytes on m, arriving at t, behind
// the member's queue and any rebuild operations due, and returns when it
// is done; a.mu is held.
func (a *Array) reserve(m *member, t time.Time, n int64, write bool) time.Time {
	a.background(m, t)
	s := t
	if m.busyUntil.After(s) {
		s = m.busyUntil
	}
	svc := a.serviceTime(m, n)
	m.busyUntil = s.Add(svc)
	m.busy += svc
	if write {
		m.writeOps++
		m.writeBytes += uint64(n)
	} else {
		m.readOps++
		m.readBytes += uint64(n)
	}
	return m.busyUntil
}

// done marks a request finished (for the in-flight count).
func (a *Array) done() {
	a.mu.Lock()
	a.c.inFlight--
	a.mu.Unlock()
}

func (a *Array) serviceTime(m *member, n int64) time.Duration {
	p := a.preset
	d := p.Fixed + time.Duration(float64(p.PerKiB)*float64(n)/1024)
	if p.AvgRotation > 0 {
		d += time.Duration(a.rng.Int64N(int64(2 * p.AvgRotation)))
	}
	if m.factor > 0 {
		d = time.Duration(float64(d) * m.factor)
	}
	if m.stallFrac > 0 && a.rng.Float64() < m.stallFrac {
		d += m.stallFor
		m.stalls++
	}
	return d + m.addLatency
}

// rebuildLen is the size of a rebuild's background operations (md's
// resync works in 64 KiB chunks by default).
const rebuildLen = 64 << 10

// background queues the rebuild operations that arrived on m up to t,
// ahead of a foreground operation arriving at t. After a long idle spell
// only the last second's arrivals can still hold the queue (the member
// keeps up with them: its load is below 1), so older ones are skipped.
func (a *Array) background(m *member, t time.Time) {
	if m.rebuildEvery <= 0 {
		return
	}
	if floor := t.Add(-time.Second); m.rebuildNext.Before(floor) {
		m.rebuildNext = floor
	}
	for !m.rebuildNext.After(t) {
		s := m.rebuildNext
		if m.busyUntil.After(s) {
			s = m.busyUntil
		}
		svc := a.serviceTime(m, rebuildLen)
		m.busyUntil = s.Add(svc)
		m.busy += svc
		m.rebuildOps++
		m.rebuildNext = m.rebuildNext.Add(m.rebuildEvery)
	}
}

// plan maps a request onto member operations, in phases: every operation
// of a phase is queued at once; the next phase starts when the slowest of
// them is done (a RAID 5 read-modify-write reads before it writes).
// Called with a.mu held.
func (a *Array) plan(write bool, off, n int64) ([][]memberOp, error) {
	g := a.geo
	switch g.Level {
	case Single:
		if a.members[0].failed {
			return nil, ErrMemberFailed
		}
		return [][]memberOp{{{member: 0, off: off, len: n, write: write}}}, nil
	case RAID1:
		all := make([]int, g.Members)
		for i := range all {
			all[i] = i
		}
		return a.planMirror(write, all, off, n)
	case RAID0:
		var ops []memberOp
		for _, p := range g.pieces(off, n) {
			if a.members[p.member].failed {
				return nil, ErrMemberFailed
			}
			ops = append(ops, memberOp{member: p.member, off: p.memberOf, len: p.len, write: write})
		}
		return [][]memberOp{mergeOps(ops)}, nil
	case RAID10:
		var ops []memberOp
		for _, p := range g.pieces(off, n) {
			ph, err := a.planMirror(write, []int{p.member, p.member + 1}, p.memberOf, p.len)
			if err != nil {
				return nil, err
			}
			ops = append(ops, ph[0]...)
		}
		return [][]memberOp{mergeOps(ops)}, nil
	case RAID5:
		if write {
			return a.planRAID5Write(off, n)
		}
		return a.planRAID5Read(off, n)
	}
	return nil, fmt.Errorf("raidlab: unknown level %q", g.Level)
}

// planMirror reads from the surviving mirror with the shortest queue and
// writes to every surviving mirror.
func (a *Array) planMirror(write bool, mirrors []int, off, n int64) ([][]memberOp, error) {
	var ops []memberOp
	best := -1
	for _, m := range mirrors {
		if a.members[m].failed {
			continue
		}
		if write {
			ops = append(ops, memberOp{member: m, off: off, len: n, write: true})
			continue
		}
		if best < 0 || a.members[m].busyUntil.Before(a.members[best].busyUntil) {
			best = m
		}
	}
	if !write && best >= 0 {
		ops = append(ops, memberOp{member: best, off: off, len: n})
	}
	if len(ops) == 0 {
		return nil, ErrMemberFailed
	}
	return [][]memberOp{ops}, nil
}

func (a *Array) failedMembers() []int {
	var f []int
	for i := range a.members {
		if a.members[i].failed {
			f = append(f, i)
		}
	}
	return f
}

// planRAID5Read reads each chunk from its member; a chunk on the failed
// member is rebuilt from the same range on every other member.
func (a *Array) planRAID5Read(off, n int64) ([][]memberOp, error) {
	failed := a.failedMembers()
	if len(failed) > 1 {
		return nil, ErrMemberFailed
	}
	var ops []memberOp
	for _, p := range a.geo.pieces(off, n) {
		if !a.members[p.member].failed {
			ops = append(ops, memberOp{member: p.member, off: p.memberOf, len: p.len})
			continue
		}
		for m := range a.geo.Members {
			if m != p.member {
				ops = append(ops, memberOp{member: m, off: p.memberOf, len: p.len})
			}
		}
	}
	return [][]memberOp{mergeOps(ops)}, nil
}

// planRAID5Write writes stripe by stripe. A write covering a whole stripe
// writes its data and parity with no reads. A partial-stripe write reads
// before it writes, by whichever of the two usual methods reads less
// (ties go to read-modify-write, what controllers do for small writes):
// read-modify-write reads the old data it replaces and the old parity;
// reconstruct-write reads the stripe's other data. Both work on the
// columns (byte ranges inside the chunk) the write touches, as md does:
// a write that crosses a chunk boundary touches two disjoint columns, and
// each is its own operation on the members that need it. With a member
// failed, the method that does not need it is used, and nothing is queued
// on it.
func (a *Array) planRAID5Write(off, n int64) ([][]memberOp, error) {
	failed := a.failedMembers()
	if len(failed) > 1 {
		return nil, ErrMemberFailed
	}
	isFailed := func(m int) bool { return len(failed) == 1 && failed[0] == m }
	var reads, writes []memberOp
	ps := a.geo.pieces(off, n)
	for i := 0; i < len(ps); {
		j := i
		for j < len(ps) && ps[j].stripe == ps[i].stripe {
			j++
		}
		r, w, err := a.geo.planRAID5Stripe(ps[i:j], isFailed)
		if err != nil {
			return nil, err
		}
		reads, writes = append(reads, r...), append(writes, w...)
		i = j
	}
	var phases [][]memberOp
	if len(reads) > 0 {
		phases = append(phases, mergeOps(reads))
	}
	return append(phases, mergeOps(writes)), nil
}

// planRAID5Stripe plans the write of one stripe's pieces: the data and
// parity writes, and the reads the new parity needs — none for a full
// stripe or a failed parity member, else the cheaper of read-modify-write
// and reconstruct-write that the failed member leaves possible.
func (g Geometry) planRAID5Stripe(stripe []piece, isFailed func(int) bool) (reads, writes []memberOp, err error) {
	s := stripe[0].stripe
	pm := g.parityMember(s)
	var cols []span
	touched := make(map[int]piece, len(stripe)) // by data index
	for _, p := range stripe {
		cols = addSpan(cols, span{p.inChunk, p.inChunk + p.len})
		touched[p.dataIdx] = p
	}
	full := len(stripe) == g.Members-1 && len(cols) == 1 && cols[0] == span{0, g.StripeUnit}
	for _, p := range stripe {
		if !isFailed(p.member) {
			writes = append(writes, memberOp{member: p.member, off: p.memberOf, len: p.len, write: true})
		}
	}
	var parity []memberOp
	for _, c := range cols {
		parity = append(parity, memberOp{member: pm, off: s*g.StripeUnit + c.lo, len: c.hi - c.lo})
	}
	if !isFailed(pm) {
		for _, op := range parity {
			op.write = true
			writes = append(writes, op)
		}
	}
	if full || isFailed(pm) {
		return nil, writes, nil // no old data or parity is needed
	}
	rmw, rmwOK := rmwReads(stripe, parity, isFailed)
	rcw, rcwOK := g.rcwReads(s, pm, cols, touched, isFailed)
	switch {
	case rmwOK && (!rcwOK || len(rmw) <= len(rcw)):
		return rmw, writes, nil
	case rcwOK:
		return rcw, writes, nil
	default:
		return nil, nil, ErrMemberFailed
	}
}

// rmwReads are a read-modify-write's reads: the old parity and the old
// data of each piece; ok is false when a piece is on the failed member.
func rmwReads(stripe []piece, parity []memberOp, isFailed func(int) bool) (reads []memberOp, ok bool) {
	reads = append([]memberOp(nil), parity...)
	ok = true
	for _, p := range stripe {
		if isFailed(p.member) {
			ok = false
		}
		reads = append(reads, memberOp{member: p.member, off: p.memberOf, len: p.len})
	}
	return reads, ok
}

// rcwReads are a reconstruct-write's reads in stripe s (parity on member
// pm): every data chunk's bytes in the touched columns that the write
// does not replace; ok is false when one is on the failed member.
func (g Geometry) rcwReads(s int64, pm int, cols []span, touched map[int]piece, isFailed func(int) bool) (reads []memberOp, ok bool) {
	ok = true
	for d := range g.Members - 1 {
		m := (pm + 1 + d) % g.Members
		for _, c := range cols {
			for _, need := range c.minus(touched, d) {
				if isFailed(m) {
					ok = false
				}
				reads = append(reads, memberOp{member: m, off: s*g.StripeUnit + need.lo, len: need.hi - need.lo})
			}
		}
	}
	return reads, ok
}

// span is a byte range [lo, hi) inside a chunk.
type span struct{ lo, hi int64 }

// addSpan adds s to a sorted list of disjoint spans, joining overlaps.
func addSpan(ss []span, s span) []span {
	out := make([]span, 0, len(ss)+1)
	for _, t := range ss {
		if t.hi < s.lo || s.hi < t.lo {
			out = append(out, t)
			continue
		}
		s = span{min(s.lo, t.lo), max(s.hi, t.hi)}
	}
	out = append(out, s)
	for i := len(out) - 1; i > 0 && out[i].lo < out[i-1].lo; i-- {
		out[i], out[i-1] = out[i-1], out[i]
	}
	return out
}

// minus is the part of column c that data chunk d does not rewrite.
func (c span) minus(touched map[int]piece, d int) []span {
	p, ok := touched[d]
	if !ok {
		return []span{c}
	}
	w := span{p.inChunk, p.inChunk + p.len}
	var out []span
	if w.lo > c.lo {
		out = append(out, span{c.lo, min(w.lo, c.hi)})
	}
	if w.hi < c.hi {
		out = append(out, span{max(w.hi, c.lo), c.hi})
	}
	return out
}
