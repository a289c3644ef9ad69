package probe

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/plumbline/plumbline/internal/histogram"
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
	res := Result{
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
	if o.BusyThreshold > 0 {
		res.BusyGuard = "unavailable: no per-device busy time on Windows yet"
	}
	seed := o.Seed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
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
	if o.Jitter > 0 {
		j := time.Duration(rand.New(rand.NewPCG(seed, 1)).Int64N(int64(o.Jitter)))
		if sleepCtx(ctx, j) != nil {
			return interrupted()
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
	if f.filled {
		res.FillSeconds = time.Since(fillStart).Seconds()
	}
	res.CacheBypass = f.cacheBypass
	p := plan{
		kind:          o.Kind,
		blockSize:     o.BlockSize,
		qd:            o.QueueDepth,
		syncEach:      o.Kind != RandomRead && o.Sync == SyncFdatasync,
		ops:           o.Ops,
		maxDur:        o.MaxDuration,
		iops:          o.IOPS,
		dataOff:       HeaderSize,
		dataBlocks:    (o.FileSize - HeaderSize) / int64(o.BlockSize),
		align:         f.memAlign,
		busyThreshold: 0,
		busyInterval:  o.BusyInterval,
		latCeiling:    o.LatencyCeiling,
		latWindow:     o.LatencyWindow,
		maxErrors:     o.MaxErrors,
		seed:          seed,
	}
	out := measure(ctx, p, f, nil)
	fillResult(&res, out, o.BlockSize)
	return res, nil
}
