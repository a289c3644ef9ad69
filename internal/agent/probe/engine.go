package probe

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/plumbline/plumbline/internal/ctxtime"
	"github.com/plumbline/plumbline/internal/histogram"
	"github.com/plumbline/plumbline/internal/vocab"
)

// target is what the engine does I/O against: the opened probe file. The
// Linux implementation uses pread/pwrite on an O_DIRECT descriptor; tests
// may use a fake.
type target interface {
	ReadAt(p []byte, off int64) (int, error)
	WriteAt(p []byte, off int64) (int, error)
	Datasync() error
}

// utilSampler reads the cumulative busy time (io_ticks) of the backing
// device. A nil sampler means the busy guard is unavailable.
type utilSampler interface {
	ioTicks() (time.Duration, error)
}

// activitySampler is a utilSampler that also reads the device's completed
// I/O, so that the busy guard reports what the device did in its window.
type activitySampler interface {
	counters() (diskCounters, error)
}

// diskCounters are one device's cumulative diskstats counters: reads and
// writes completed, their 512-byte sectors, io_ticks (time with I/O in
// flight) and time_in_queue (the sum of every I/O's time).
type diskCounters struct {
	ios, sectors uint64
	ticks, queue time.Duration
}

// plan is a validated run, ready for the engine.
type plan struct {
	kind       Kind
	blockSize  int
	qd         int
	syncEach   bool // fdatasync after every write
	ops        int
	maxDur     time.Duration
	iops       float64
	dataOff    int64 // first byte of the data region
	dataBlocks int64 // data region size / blockSize
	align      int   // buffer memory alignment
	read       bool  // the kind reads (random-read, stripe-scan)
	sequential bool  // the kind writes one block after the other (log-write)
	// schedule, when set, is the file offset of every op in order (a
	// stripe-scan's placed reads), and each op's latency is kept by index.
	schedule []int64

	busyThreshold float64
	busyInterval  time.Duration
	latCeiling    time.Duration
	latWindow     int
	maxErrors     int
	seed          uint64
	progress      *Progress // nil: none
}

// outcome is what the engine measured.
type outcome struct {
	ops, errors   int
	firstErr      error
	hist          *histogram.Histogram
	start, end    time.Time
	stoppedReason string
	busyPercent   float64
	// opLatency is the latency of scheduled op i, −1 when it did not
	// complete; nil without a schedule.
	opLatency []time.Duration
}

// Internal stop causes, mapped to StoppedReason.
var (
	errStopDuration = errors.New(vocab.StopMaxDuration)
	errStopBusy     = errors.New(vocab.StopBusyDuring)
	errStopLatency  = errors.New(vocab.StopLatencyCeiling)
	errStopIOErrors = errors.New(vocab.StopIOErrors)
)

// measure runs the measured phase: p.qd workers share one op budget and one
// pacer; a monitor goroutine watches the device while they run. Every
// goroutine it starts has returned when it returns.
func measure(ctx context.Context, p plan, tgt target, util utilSampler) outcome {
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	runCtx, cancelT := context.WithTimeoutCause(runCtx, p.maxDur, errStopDuration)
	defer cancelT()

	m := &measurement{p: p, tgt: tgt, cancel: cancel, pace: newPacer(p.iops), guard: newLatencyGuard(p.latCeiling, p.latWindow)}
	if p.schedule != nil {
		m.opLatency = make([]time.Duration, p.ops)
		for i := range m.opLatency {
			m.opLatency[i] = -1
		}
	}
	workers := make([]workerResult, p.qd)
	var wg sync.WaitGroup
	p.progress.startMeasure(p.ops)
	start := time.Now()
	for w := range p.qd {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.work(runCtx, w, &workers[w])
		}()
	}

	// The busy monitor runs until the workers are done.
	workersDone := make(chan struct{})
	var monWG sync.WaitGroup
	var busyPct atomic.Uint64 // float64 bits
	if util != nil && p.busyThreshold > 0 {
		monWG.Add(1)
		go func() {
			defer monWG.Done()
			monitorBusy(runCtx, workersDone, p, util, &m.busy, &busyPct, func() { cancel(errStopBusy) })
		}()
	}
	wg.Wait()
	end := time.Now()
	close(workersDone)
	monWG.Wait()

	out := m.collect(workers)
	out.opLatency = m.opLatency
	out.start, out.end, out.busyPercent = start, end, math.Float64frombits(busyPct.Load())
	switch cause := context.Cause(runCtx); {
	case out.ops+out.errors >= p.ops:
		// Every op ran: a guard or the clock firing after the last one
		// stopped nothing.
	case ctx.Err() != nil:
		out.stoppedReason = vocab.StopInterrupted
	case cause != nil:
		out.stoppedReason = cause.Error()
	}
	return out
}

// measurement is what measure's workers share.
type measurement struct {
	p        plan
	tgt      target
	cancel   context.CancelCauseFunc
	claimed  atomic.Int64 // ops claimed from the budget
	errCount atomic.Int64
	pace     *pacer
	busy     ownBusy
	guard    *latencyGuard
	firstErr atomic.Pointer[error]
	logNext  atomic.Int64 // log-write: next sequential block
	// opLatency is indexed by the op's claim number: each index is written
	// by the one worker that claimed it, and read after they all return.
	opLatency []time.Duration
}

// work is worker w: it claims ops from the shared budget and runs them
// until the budget is spent or ctx ends (a guard, the clock or the caller).
func (m *measurement) work(ctx context.Context, w int, res *workerResult) {
	p := m.p
	res.hist = &histogram.Histogram{}
	buf := alignedBuffer(p.blockSize, p.align)
	rng := rand.New(rand.NewPCG(p.seed, uint64(w)))
	if !p.read {
		fillRandom(rng, buf)
	}
	for {
		if ctx.Err() != nil {
			return
		}
		n := m.claimed.Add(1)
		if n > int64(p.ops) {
			return
		}
		if err := m.pace.wait(ctx); err != nil {
			return
		}
		var off int64
		switch {
		case p.schedule != nil:
			off = p.schedule[n-1]
		case p.sequential:
			off = p.dataOff + (m.logNext.Add(1)-1)%p.dataBlocks*int64(p.blockSize)
		default:
			off = p.dataOff + rng.Int64N(p.dataBlocks)*int64(p.blockSize)
		}
		m.busy.begin()
		t0 := time.Now()
		err := doOp(p, m.tgt, buf, off)
		lat := time.Since(t0)
		m.busy.end()
		p.progress.opDone()
		if err != nil {
			m.firstErr.CompareAndSwap(nil, &err)
			if m.errCount.Add(1) >= int64(p.maxErrors) {
				m.cancel(errStopIOErrors)
				return
			}
			continue
		}
		res.ops++
		if m.opLatency != nil {
			m.opLatency[n-1] = lat
		}
		res.hist.Observe(lat)
		if m.guard.observe(lat) {
			m.cancel(errStopLatency)
		}
	}
}

// collect merges the workers' results into the run's counts and
// histogram.
func (m *measurement) collect(workers []workerResult) outcome {
	out := outcome{hist: &histogram.Histogram{}}
	for _, r := range workers {
		out.ops += r.ops
		_ = out.hist.Merge(r.hist) // one run's workers: far from the 292 years of latency that overflow
	}
	out.errors = int(m.errCount.Load())
	if e := m.firstErr.Load(); e != nil {
		out.firstErr = *e
	}
	return out
}

type workerResult struct {
	ops  int
	hist *histogram.Histogram
}

// doOp performs one I/O of the plan's kind at off.
func doOp(p plan, tgt target, buf []byte, off int64) error {
	var n int
	var err error
	if p.read {
		n, err = tgt.ReadAt(buf, off)
	} else {
		n, err = tgt.WriteAt(buf, off)
		if err == nil && p.syncEach {
			if serr := tgt.Datasync(); serr != nil {
				return fmt.Errorf("fdatasync: %w", serr)
			}
		}
	}
	if err != nil {
		return fmt.Errorf("%s at offset %d: %w", p.kind, off, err)
	}
	if n != len(buf) {
		return fmt.Errorf("%s at offset %d: short I/O (%d of %d bytes)", p.kind, off, n, len(buf))
	}
	return nil
}

// monitorBusy re-reads the device's io_ticks every p.busyInterval and calls
// stop when the utilisation caused by others (io_ticks minus the time our
// own ops were in flight) exceeds the threshold.
func monitorBusy(ctx context.Context, done <-chan struct{}, p plan, util utilSampler, own *ownBusy, pct *atomic.Uint64, stop func()) {
	prevTicks, err := util.ioTicks()
	if err != nil {
		return
	}
	prevOwn, prevAt := own.total(), time.Now()
	tk := time.NewTicker(p.busyInterval)
	defer tk.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-done:
			return
		case <-tk.C:
		}
		ticks, err := util.ioTicks()
		if err != nil {
			continue
		}
		now, ownNow := time.Now(), own.total()
		u := othersUtil(ticks-prevTicks, ownNow-prevOwn, now.Sub(prevAt))
		pct.Store(math.Float64bits(u))
		if u > p.busyThreshold {
			stop()
			return
		}
		prevTicks, prevOwn, prevAt = ticks, ownNow, now
	}
}

// othersUtil is the device utilisation in percent that is not explained by
// our own in-flight time: (Δio_ticks − Δown) / Δwall, clamped to [0, 100].
// io_ticks counts milliseconds in which the device had at least one request
// in flight; ownBusy counts the wall time in which at least one of ours was,
// so subtracting it leaves (a lower bound of) everyone else's share.
func othersUtil(ticks, own, wall time.Duration) float64 {
	if wall <= 0 {
		return 0
	}
	u := float64(ticks-own) / float64(wall) * 100
	return min(max(u, 0), 100)
}

// ownBusy accumulates the wall time during which at least one probe op was
// in flight (the union of the op intervals, not their sum).
type ownBusy struct {
	mu       sync.Mutex
	inflight int
	since    time.Time
	acc      time.Duration
}

func (b *ownBusy) begin() {
	b.mu.Lock()
	if b.inflight == 0 {
		b.since = time.Now()
	}
	b.inflight++
	b.mu.Unlock()
}

func (b *ownBusy) end() {
	b.mu.Lock()
	b.inflight--
	if b.inflight == 0 {
		b.acc += time.Since(b.since)
	}
	b.mu.Unlock()
}

func (b *ownBusy) total() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.acc
	if b.inflight > 0 {
		t += time.Since(b.since)
	}
	return t
}

// pacer is a token bucket of burst 1: op n may start no earlier than
// interval after op n-1's slot. A slow op does not earn a burst of catch-up
// ops afterwards. A zero rate never waits.
type pacer struct {
	interval time.Duration
	mu       sync.Mutex
	next     time.Time
}

func newPacer(iops float64) *pacer {
	if iops <= 0 {
		return &pacer{}
	}
	return &pacer{interval: time.Duration(float64(time.Second) / iops)}
}

func (p *pacer) wait(ctx context.Context) error {
	if p.interval == 0 {
		return nil
	}
	p.mu.Lock()
	now := time.Now()
	slot := p.next
	if slot.Before(now) {
		slot = now
	}
	p.next = slot.Add(p.interval)
	p.mu.Unlock()
	return ctxtime.Sleep(ctx, time.Until(slot))
}

// latencyGuard trips when more than half of the last window ops (that is,
// their median) took longer than the ceiling.
type latencyGuard struct {
	ceiling time.Duration
	mu      sync.Mutex
	ring    []bool // op was above the ceiling
	n, over int
}

func newLatencyGuard(ceiling time.Duration, window int) *latencyGuard {
	return &latencyGuard{ceiling: ceiling, ring: make([]bool, window)}
}

func (g *latencyGuard) observe(d time.Duration) bool {
	if g.ceiling <= 0 {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	i := g.n % len(g.ring)
	if g.n >= len(g.ring) && g.ring[i] {
		g.over--
	}
	above := d > g.ceiling
	g.ring[i] = above
	if above {
		g.over++
	}
	g.n++
	return g.n >= len(g.ring) && g.over*2 > len(g.ring)
}

// LatencyOf summarises a run's latency histogram, in seconds: its exact
// minimum, mean and maximum and its quantiles by histogram.Quantile, the
// numbers the server's API shows and its baseline judges for the same run.
func LatencyOf(h *histogram.Histogram) Latency {
	if h == nil || h.Count() == 0 {
		return Latency{}
	}
	return Latency{
		Min:  h.Min().Seconds(),
		Mean: h.Sum().Seconds() / float64(h.Count()),
		P50:  h.Quantile(0.50),
		P90:  h.Quantile(0.90),
		P99:  h.Quantile(0.99),
		P999: h.Quantile(0.999),
		Max:  h.Max().Seconds(),
	}
}

// alignedBuffer returns a size-byte slice whose first byte is aligned to
// align (a power of two), carved out of a larger allocation. Go's heap does
// not move objects, so the alignment holds for the slice's lifetime.
func alignedBuffer(size, align int) []byte {
	if align < 1 {
		align = 1
	}
	raw := make([]byte, size+align)
	off := 0
	if r := int(addrOf(raw)) & (align - 1); r != 0 {
		off = align - r
	}
	return raw[off : off+size : off+size]
}

// fillRandom fills b with pseudo-random bytes: written data must not be
// compressible or zero, or thin provisioning and compressing SSDs would
// shortcut it.
func fillRandom(r *rand.Rand, b []byte) {
	for i := 0; i+8 <= len(b); i += 8 {
		v := r.Uint64()
		b[i], b[i+1], b[i+2], b[i+3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
		b[i+4], b[i+5], b[i+6], b[i+7] = byte(v>>32), byte(v>>40), byte(v>>48), byte(v>>56)
	}
}
