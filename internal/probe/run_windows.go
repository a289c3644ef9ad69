package probe

import (
	"context"
	"errors"
	"time"
)

// Run runs one probe on Windows: validate, wait the start jitter, open
// (create and fill when needed) the probe file with FILE_FLAG_NO_BUFFERING
// | FILE_FLAG_WRITE_THROUGH, measure. The busy guard needs
// /proc/diskstats and is unavailable here; the latency guard, IOPS cap,
// op and duration budgets apply as on Linux.
func Run(ctx context.Context, o Options) (Result, error) {
	if err := o.validate(); err != nil {
		return Result{}, err
	}
	res := newResult(o)
	if o.BusyThreshold > 0 {
		res.BusyGuard = "unavailable: no per-device busy time on Windows yet"
	}
	seed := runSeed(o)
	interrupted := func() (Result, error) {
		res.StoppedReason, res.Skipped = StopInterrupted, true
		return res, nil
	}
	// Refuse a bad --dir at once, before any waiting.
	d, err := openDir(o.Dir)
	if err != nil {
		return res, err
	}
	d.close()
	if waitJitter(ctx, o, seed) != nil {
		return interrupted()
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
	p := newPlan(o, seed, f.memAlign, 0)
	out := measure(ctx, p, f, nil)
	fillResult(&res, out, o.BlockSize)
	return res, nil
}
