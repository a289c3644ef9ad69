package probe

// fillResult copies the engine's outcome into the result.
func fillResult(res *Result, out outcome, blockSize int) {
	res.Ops = out.ops
	res.Errors = out.errors
	res.Bytes = int64(out.ops) * int64(blockSize)
	res.StoppedReason = out.stoppedReason
	res.Skipped = out.ops == 0 && out.errors == 0
	if out.firstErr != nil {
		res.FirstError = out.firstErr.Error()
	}
	if out.busyPercent > 0 {
		res.BusyPercent = out.busyPercent
	}
	if out.ops > 0 {
		d := out.end.Sub(out.start).Seconds()
		res.Duration = d
		if d > 0 {
			res.IOPS = float64(out.ops) / d
			res.Throughput = float64(res.Bytes) / d
		}
	}
	res.Histogram = out.hist
	res.Latency = LatencyOf(out.hist)
}
