package probe

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/plumbline/plumbline/internal/histogram"
)

// The OS-neutral steps of Run; run_linux.go and run_windows.go put them
// around their own file handling and busy guard.

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
	return sleepCtx(ctx, time.Duration(rand.New(rand.NewPCG(seed, 1)).Int64N(int64(o.Jitter))))
}

// newPlan turns validated options into what measure runs; busyThreshold is
// 0 where no busy guard is available.
func newPlan(o Options, seed uint64, memAlign int, busyThreshold float64) plan {
	return plan{
		kind:          o.Kind,
		blockSize:     o.BlockSize,
		qd:            o.QueueDepth,
		syncEach:      o.Kind != RandomRead && o.Sync == SyncFdatasync,
		ops:           o.Ops,
		maxDur:        o.MaxDuration,
		iops:          o.IOPS,
		dataOff:       HeaderSize,
		dataBlocks:    (o.FileSize - HeaderSize) / int64(o.BlockSize),
		align:         memAlign,
		busyThreshold: busyThreshold,
		busyInterval:  o.BusyInterval,
		latCeiling:    o.LatencyCeiling,
		latWindow:     o.LatencyWindow,
		maxErrors:     o.MaxErrors,
		seed:          seed,
		progress:      o.Progress,
	}
}
