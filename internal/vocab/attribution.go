package vocab

// Attribution says whose fault a database's latency regression on a
// volume is, from the probe's view of the same volume
// (store.DatabaseVolume.Attribution, the API's database_attribution, the
// attribution label of plumbline_database_regression_ratio).
type Attribution string

// The attributions.
const (
	// AttributionDevice: the probe slowed with the database (degraded on
	// its latency, or its last run beyond its history): the storage.
	AttributionDevice Attribution = "device"
	// AttributionLoad: the database's latency rose while the probe stayed
	// on its baseline: the workload or the database itself.
	AttributionLoad Attribution = "load-or-database"
	// AttributionThrottle: the probe's achieved rate fell short of its cap
	// with its latency steady (baseline.State.Throttled): a rate limit
	// (cloud volume credits, a token bucket), not a failing disk.
	AttributionThrottle Attribution = "throttle"
	// AttributionUndetermined: no recent probe run with a trusted history
	// on the volume to compare with.
	AttributionUndetermined Attribution = "undetermined"
)

// Attributions lists every attribution.
func Attributions() []Attribution {
	return []Attribution{AttributionDevice, AttributionLoad, AttributionThrottle, AttributionUndetermined}
}

// AttributionNames is Attributions as strings.
func AttributionNames() []string { return names(Attributions()) }

// DatabaseNotMeasured is the state of a database operation (and of a
// volume all of whose operations are so) that the database does not time:
// "not measured", never a latency of 0.
const DatabaseNotMeasured = "not-measured"
