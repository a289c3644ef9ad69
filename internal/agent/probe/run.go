//go:build linux || windows

package probe

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"time"

	"github.com/plumbline/plumbline/internal/ctxtime"
	"github.com/plumbline/plumbline/internal/histogram"
	"github.com/plumbline/plumbline/internal/vocab"
)

// Run runs one probe: validate, wait the start jitter, skip when the device
// is busy, open (create and fill when needed) the probe file, measure. A
// skipped, stopped or interrupted run is a Result with StoppedReason set and
// a nil error; errors are refusals (unsafe path, foreign file, no cache
// bypass, free-space floor, bad options) and failures to open the file.
//
// On Linux the file is opened O_DIRECT and the busy guard reads
// /proc/diskstats; on Windows it is opened FILE_FLAG_NO_BUFFERING |
// FILE_FLAG_WRITE_THROUGH and the busy guard is unavailable (noBusyGuard).
// The latency guard, IOPS cap, op and duration budgets apply on both.
func Run(ctx context.Context, o Options) (Result, error) {
	if err := o.validate(); err != nil {
		return Result{}, err
	}
	res := newResult(o)
	if o.BusyThreshold > 0 && noBusyGuard != "" {
		res.BusyGuard = noBusyGuard
	}
	seed := runSeed(o)
	interrupted := func() (Result, error) {
		res.StoppedReason, res.Skipped = vocab.StopInterrupted, true
		return res, nil
	}

	// Refuse a bad --dir at once, before any waiting. The busy guard needs
	// the device under it; openProbeFile opens it again for the real work.
	d, err := openDir(o.Dir)
	if err != nil {
		return res, err
	}
	d.close()

	if waitJitter(ctx, o, seed) != nil {
		return interrupted()
	}
	util, err := checkBusy(ctx, o, d, &res)
	if err != nil {
		return interrupted()
	}
	if res.Skipped {
		return res, nil
	}

	fillStart := time.Now()
	f, err := openProbeFile(ctx, o)
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return interrupted()
		}
		return res, err
	}
	defer f.close()
	if f.filled {
		res.FillSeconds = time.Since(fillStart).Seconds()
		res.FileRewrittenFrom = f.rewrittenFrom
	}
	res.CacheBypass = f.cacheBypass

	spec := o.Kind.Spec()
	p := newPlan(o, spec, seed, f.memAlign)
	r := runnerFor(spec)
	if err := r.place(o, f, &p); err != nil {
		return res, err
	}
	// A raw system call keeps its P while it blocks: with more workers
	// than Ps, raw I/O would cap the queue depth at GOMAXPROCS (at QD 8 on
	// 2 CPUs, 2 I/Os in flight, not 8) and starve the busy monitor. Raw
	// I/O is used only while a P stays free for everything else.
	rawIO := o.RawIO && o.QueueDepth < runtime.GOMAXPROCS(0)
	out := measure(ctx, p, f.file.ioTarget(rawIO), util)
	fillResult(&res, out, o.BlockSize)
	r.answer(&res, out.opLatency, f.filled)
	return res, nil
}

// checkBusy is the busy guard before the run: it samples the utilisation
// of the device under d and marks res skipped (vocab.StopBusy) above
// o.BusyThreshold. It returns the sampler for the guard during the run (nil:
// none), and an error only when ctx ended while it sampled.
func checkBusy(ctx context.Context, o Options, d *probeDir, res *Result) (utilSampler, error) {
	if o.BusyThreshold <= 0 {
		return nil, nil
	}
	s, device, status := newBusySampler(o, d)
	res.BusyGuard = status
	if s == nil {
		return nil, nil
	}
	res.Device = device
	u, act, err := sampleUtil(ctx, s, o.BusyWindow)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		res.BusyGuard = fmt.Sprintf("unavailable: %v", err)
		s = nil
	}
	res.BusyPercent, res.BusyIO = u, act
	if u > o.BusyThreshold {
		res.StoppedReason, res.Skipped = vocab.StopBusy, true
	}
	return s, nil
}

// sampleUtil measures the device's utilisation over window (no probe I/O
// is running yet), and what the device did in it when s can say.
func sampleUtil(ctx context.Context, s utilSampler, window time.Duration) (float64, *DeviceActivity, error) {
	read := func() (diskCounters, error) {
		if a, ok := s.(activitySampler); ok {
			return a.counters()
		}
		t, err := s.ioTicks()
		return diskCounters{ticks: t}, err
	}
	c0, err := read()
	if err != nil {
		return 0, nil, err
	}
	start := time.Now()
	if err := ctxtime.Sleep(ctx, window); err != nil {
		return 0, nil, err
	}
	c1, err := read()
	if err != nil {
		return 0, nil, err
	}
	wall := time.Since(start)
	var act *DeviceActivity
	if _, ok := s.(activitySampler); ok && c1.ios >= c0.ios && c1.sectors >= c0.sectors && c1.queue >= c0.queue {
		act = &DeviceActivity{Window: wall, IOs: c1.ios - c0.ios, Sectors: c1.sectors - c0.sectors,
			IOTicks: min(max(c1.ticks-c0.ticks, 0), wall), TimeInQueue: c1.queue - c0.queue}
	}
	return othersUtil(c1.ticks-c0.ticks, 0, wall), act, nil
}

// The OS-neutral steps of Run.

// newResult is a run's Result before anything has happened.
func newResult(o Options) Result {
	return Result{
		Kind:       o.Kind,
		File:       joinPath(o.Dir, o.FileName),
		BlockSize:  o.BlockSize,
		QueueDepth: o.QueueDepth,
		Sync:       o.Sync,
		FileSize:   o.FileSize,
		OpsBudget:  o.Ops,
		IOPSCap:    o.IOPS,
		StartedAt:  time.Now().UTC(),
		BusyGuard:  "off",
		Histogram:  &histogram.Histogram{},
	}
}

// runSeed is the seed of a run's random offsets and start jitter.
func runSeed(o Options) uint64 {
	if o.Seed != 0 {
		return o.Seed
	}
	return uint64(time.Now().UnixNano())
}

// waitJitter sleeps the run's start jitter: a random share of o.Jitter.
func waitJitter(ctx context.Context, o Options, seed uint64) error {
	if o.Jitter <= 0 {
		return nil
	}
	return ctxtime.Sleep(ctx, time.Duration(rand.New(rand.NewPCG(seed, 1)).Int64N(int64(o.Jitter))))
}

// newPlan turns validated options of a kind with spec into what measure
// runs.
func newPlan(o Options, spec vocab.ProbeKindSpec, seed uint64, memAlign int) plan {
	return plan{
		kind:          o.Kind,
		read:          !spec.Writes,
		sequential:    spec.Access == vocab.AccessSequential,
		blockSize:     o.BlockSize,
		qd:            o.QueueDepth,
		syncEach:      spec.Synced && o.Sync == SyncFdatasync,
		ops:           o.Ops,
		maxDur:        o.MaxDuration,
		iops:          o.IOPS,
		dataOff:       HeaderSize,
		dataBlocks:    (o.FileSize - HeaderSize) / int64(o.BlockSize),
		align:         memAlign,
		busyThreshold: o.BusyThreshold,
		busyInterval:  o.BusyInterval,
		latCeiling:    o.LatencyCeiling,
		latWindow:     o.LatencyWindow,
		maxErrors:     o.MaxErrors,
		seed:          seed,
		progress:      o.Progress,
	}
}
