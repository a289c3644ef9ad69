package probe

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/plumbline/plumbline/internal/histogram"
	"github.com/plumbline/plumbline/internal/vocab"
)

// fakeTarget is an in-memory target; delay is added to every op.
type fakeTarget struct {
	delay   time.Duration
	fail    bool
	reads   atomic.Int64
	writes  atomic.Int64
	syncs   atomic.Int64
	mu      sync.Mutex
	offsets []int64
}

var _ target = (*fakeTarget)(nil)

func (f *fakeTarget) op(off int64) {
	f.mu.Lock()
	f.offsets = append(f.offsets, off)
	f.mu.Unlock()
	if f.delay > 0 {
		time.Sleep(f.delay)
	}
}

func (f *fakeTarget) ReadAt(p []byte, off int64) (int, error) {
	f.reads.Add(1)
	f.op(off)
	if f.fail {
		return 0, errors.New("injected read error")
	}
	return len(p), nil
}

func (f *fakeTarget) WriteAt(p []byte, off int64) (int, error) {
	f.writes.Add(1)
	f.op(off)
	if f.fail {
		return 0, errors.New("injected write error")
	}
	return len(p), nil
}

func (f *fakeTarget) Datasync() error { f.syncs.Add(1); return nil }

// fakeUtil reports io_ticks advancing by step per call.
type fakeUtil struct {
	mu    sync.Mutex
	ticks time.Duration
	step  time.Duration
}

var _ utilSampler = (*fakeUtil)(nil)

func (f *fakeUtil) ioTicks() (time.Duration, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ticks += f.step
	return f.ticks, nil
}

func testPlan(kind Kind) plan {
	return plan{
		kind: kind, read: !kind.Spec().Writes, sequential: kind.Spec().Access == vocab.AccessSequential,
		blockSize: 8192, qd: 1, ops: 500, maxDur: time.Minute,
		dataOff: HeaderSize, dataBlocks: 64, align: 4096,
		latWindow: 16, maxErrors: 10, seed: 1, busyInterval: time.Millisecond,
	}
}

func TestMeasureBudgetAndCounts(t *testing.T) {
	for _, kind := range Kinds() {
		for _, qd := range []int{1, 4} {
			if kind == LogWrite && qd > 1 {
				continue
			}
			t.Run(string(kind)+"/qd"+string(rune('0'+qd)), func(t *testing.T) {
				p := testPlan(kind)
				p.qd = qd
				p.syncEach = kind == LogWrite
				tgt := &fakeTarget{}
				out := measure(t.Context(), p, tgt, nil)
				if out.ops != p.ops || out.stoppedReason != "" {
					t.Fatalf("measure() ops = %d, reason %q; want %d, \"\"", out.ops, out.stoppedReason, p.ops)
				}
				if got := tgt.reads.Load() + tgt.writes.Load(); got != int64(p.ops) {
					t.Errorf("target saw %d ops, want exactly %d", got, p.ops)
				}
				if out.hist.Count() != uint64(p.ops) {
					t.Errorf("histogram count %d, want %d", out.hist.Count(), p.ops)
				}
				for _, off := range tgt.offsets {
					if off < p.dataOff || off >= p.dataOff+p.dataBlocks*int64(p.blockSize) || (off-p.dataOff)%int64(p.blockSize) != 0 {
						t.Fatalf("offset %d outside the data region or unaligned", off)
					}
				}
				if kind == LogWrite {
					if tgt.syncs.Load() != int64(p.ops) {
						t.Errorf("fdatasync calls = %d, want %d", tgt.syncs.Load(), p.ops)
					}
					// Sequential, wrapping at the end of the data region.
					for i, off := range tgt.offsets {
						want := p.dataOff + int64(i)%p.dataBlocks*int64(p.blockSize)
						if off != want {
							t.Fatalf("log write %d at %d, want %d", i, off, want)
						}
					}
				}
			})
		}
	}
}

func TestMeasureStops(t *testing.T) {
	tests := []struct {
		name   string
		plan   func(p *plan)
		tgt    *fakeTarget
		util   utilSampler
		reason string
	}{
		{"max duration", func(p *plan) { p.ops = MaxOps; p.maxDur = 30 * time.Millisecond }, &fakeTarget{delay: time.Millisecond}, nil, vocab.StopMaxDuration},
		{"latency ceiling", func(p *plan) { p.latCeiling = time.Microsecond }, &fakeTarget{delay: time.Millisecond}, nil, vocab.StopLatencyCeiling},
		{"io errors", func(p *plan) {}, &fakeTarget{fail: true}, nil, vocab.StopIOErrors},
		{"busy during", func(p *plan) { p.ops = MaxOps; p.busyThreshold = 70 }, &fakeTarget{delay: 100 * time.Microsecond}, &fakeUtil{step: time.Hour}, vocab.StopBusyDuring},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := testPlan(RandomRead)
			tt.plan(&p)
			out := measure(t.Context(), p, tt.tgt, tt.util)
			if out.stoppedReason != tt.reason {
				t.Errorf("stoppedReason = %q, want %q (ops %d, errors %d)", out.stoppedReason, tt.reason, out.ops, out.errors)
			}
			if out.ops+out.errors >= p.ops {
				t.Errorf("ops+errors = %d, want fewer than the budget %d", out.ops+out.errors, p.ops)
			}
			if out.hist.Count() != uint64(out.ops) {
				t.Errorf("histogram count %d, ops %d", out.hist.Count(), out.ops)
			}
		})
	}
}

func TestMeasureIdleDeviceDoesNotStop(t *testing.T) {
	p := testPlan(RandomRead)
	p.busyThreshold = 70
	out := measure(t.Context(), p, &fakeTarget{delay: 50 * time.Microsecond}, &fakeUtil{step: 0})
	if out.stoppedReason != "" || out.ops != p.ops {
		t.Errorf("idle device: reason %q, ops %d; want \"\", %d", out.stoppedReason, out.ops, p.ops)
	}
}

func TestMeasureInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	p := testPlan(RandomRead)
	p.iops = 1000
	p.ops = MaxOps
	time.AfterFunc(20*time.Millisecond, cancel)
	out := measure(ctx, p, &fakeTarget{}, nil)
	if out.stoppedReason != vocab.StopInterrupted {
		t.Errorf("stoppedReason = %q, want %q", out.stoppedReason, vocab.StopInterrupted)
	}
}

func TestOthersUtil(t *testing.T) {
	tests := []struct {
		ticks, own, wall time.Duration
		want             float64
	}{
		{500 * time.Millisecond, 0, time.Second, 50},
		{500 * time.Millisecond, 400 * time.Millisecond, time.Second, 10},
		{100 * time.Millisecond, 400 * time.Millisecond, time.Second, 0},
		{3 * time.Second, 0, time.Second, 100},
		{time.Second, 0, 0, 0},
	}
	for _, tt := range tests {
		if got := othersUtil(tt.ticks, tt.own, tt.wall); got != tt.want {
			t.Errorf("othersUtil(%v, %v, %v) = %v, want %v", tt.ticks, tt.own, tt.wall, got, tt.want)
		}
	}
}

func TestLatencyGuard(t *testing.T) {
	g := newLatencyGuard(10*time.Millisecond, 4)
	seq := []struct {
		d    time.Duration
		trip bool
	}{
		{20 * time.Millisecond, false}, // window not full yet
		{20 * time.Millisecond, false},
		{time.Millisecond, false},
		{time.Millisecond, false},      // 2 of 4 above: the median is not
		{20 * time.Millisecond, false}, // replaces the first 20ms: still 2 of 4
		{20 * time.Millisecond, false}, // replaces the second: still 2 of 4
		{20 * time.Millisecond, true},  // replaces a 1ms: 3 of 4 above
	}
	for i, s := range seq {
		if got := g.observe(s.d); got != s.trip {
			t.Errorf("observe #%d (%v) = %v, want %v", i, s.d, got, s.trip)
		}
	}
}

// TestLatencyOf: the run's percentiles are the histogram's quantiles (the
// numbers the server shows and judges); min, mean and max stay exact.
func TestLatencyOf(t *testing.T) {
	var samples []time.Duration
	for i := 1; i <= 1000; i++ {
		samples = append(samples, time.Duration(i)*time.Microsecond)
	}
	h := histFrom(samples)
	l := LatencyOf(h)
	want := Latency{Min: 1e-6, Mean: 500.5e-6, P50: h.Quantile(0.5), P90: h.Quantile(0.9), P99: h.Quantile(0.99),
		P999: h.Quantile(0.999), Max: 1000e-6}
	if l != want {
		t.Errorf("LatencyOf = %+v, want %+v", l, want)
	}
	t.Logf("1..1000 µs: p50 %v, p90 %v, p99 %v, p99.9 %v", l.P50, l.P90, l.P99, l.P999)
	// Within one bucket (9%) of the exact nearest rank.
	for _, c := range []struct{ got, exact float64 }{{l.P50, 500e-6}, {l.P90, 900e-6}, {l.P99, 990e-6}, {l.P999, 999e-6}} {
		if c.got/c.exact > 1.0906 || c.exact/c.got > 1.0906 {
			t.Errorf("percentile %v, exact %v: more than a bucket apart", c.got, c.exact)
		}
	}
	if (LatencyOf(&histogram.Histogram{}) != Latency{}) || (LatencyOf(nil) != Latency{}) {
		t.Error("LatencyOf(empty) is not the zero Latency")
	}
}

func TestAlignedBuffer(t *testing.T) {
	for _, align := range []int{512, 4096, 65536} {
		b := alignedBuffer(8192, align)
		if len(b) != 8192 || int(addrOf(b))%align != 0 {
			t.Errorf("alignedBuffer(8192, %d): len %d, addr %% align = %d", align, len(b), int(addrOf(b))%align)
		}
	}
}

func TestPacerWaitsBetweenOps(t *testing.T) {
	// Not a timing assertion on speed: 5 ops at 200 IOPS cannot all start
	// in less than 4 intervals.
	p := newPacer(200)
	start := time.Now()
	for range 5 {
		if err := p.wait(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if el := time.Since(start); el < 4*5*time.Millisecond {
		t.Errorf("5 paced ops at 200 IOPS took %v, less than 4 intervals", el)
	}
}

func BenchmarkMeasureOverhead(b *testing.B) {
	p := testPlan(RandomRead)
	p.ops = b.N
	b.ResetTimer()
	measure(b.Context(), p, &fakeTarget{}, nil)
}
