package probe

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// Run runs one probe: validate, wait the start jitter, skip when the device
// is busy, open (create and fill when needed) the probe file, measure. A
// skipped, stopped or interrupted run is a Result with StoppedReason set and
// a nil error; errors are refusals (unsafe path, foreign file, no cache
// bypass, free-space floor, bad options) and failures to open the file.
func Run(ctx context.Context, o Options) (Result, error) {
	if err := o.validate(); err != nil {
		return Result{}, err
	}
	res := newResult(o)
	seed := runSeed(o)
	interrupted := func() (Result, error) {
		res.StoppedReason, res.Skipped = StopInterrupted, true
		return res, nil
	}

	// Refuse a bad --dir at once, before any waiting. The busy guard needs
	// the device under it; openProbeFile opens it again for the real work.
	dirFd, err := openDir(o.Dir)
	if err != nil {
		return res, err
	}
	var dst unix.Stat_t
	err = unix.Fstat(dirFd, &dst)
	unix.Close(dirFd)
	if err != nil {
		return res, fmt.Errorf("stat --dir %s: %w", o.Dir, err)
	}

	if waitJitter(ctx, o, seed) != nil {
		return interrupted()
	}
	var util utilSampler
	if o.BusyThreshold > 0 {
		s, status := newDiskstatsSampler(o.ProcRoot, o.SysRoot, dst.Dev)
		res.BusyGuard = status
		if s != nil {
			util, res.Device = s, s.name
			u, err := sampleUtil(ctx, s, o.BusyWindow)
			if err != nil {
				if ctx.Err() != nil {
					return interrupted()
				}
				res.BusyGuard = fmt.Sprintf("unavailable: %v", err)
				util = nil
			}
			res.BusyPercent = u
			if u > o.BusyThreshold {
				res.StoppedReason, res.Skipped = StopBusy, true
				return res, nil
			}
		}
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
	f.rawIO = o.RawIO
	if f.filled {
		res.FillSeconds = time.Since(fillStart).Seconds()
		res.FileRewrittenFrom = f.rewrittenFrom
	}
	res.CacheBypass = f.cacheBypass

	p := newPlan(o, seed, f.memAlign, o.BusyThreshold)
	out := measure(ctx, p, f, util)
	fillResult(&res, out, o.BlockSize)
	return res, nil
}

// sampleUtil measures the device's utilisation over window (no probe I/O
// is running yet).
func sampleUtil(ctx context.Context, s utilSampler, window time.Duration) (float64, error) {
	t0, err := s.ioTicks()
	if err != nil {
		return 0, err
	}
	start := time.Now()
	if err := sleepCtx(ctx, window); err != nil {
		return 0, err
	}
	t1, err := s.ioTicks()
	if err != nil {
		return 0, err
	}
	return othersUtil(t1-t0, 0, time.Since(start)), nil
}
