package vocab

import (
	"slices"
	"strings"
)

// ProbeKind is the I/O shape of a probe run.
type ProbeKind string

// The probe kinds.
const (
	RandomRead  ProbeKind = "random-read"  // random reads of the block size, aligned to it
	RandomWrite ProbeKind = "random-write" // random writes of the block size, aligned to it
	LogWrite    ProbeKind = "log-write"    // sequential writes, each synced before the next, wrapping
	// StripeScan is the geometry probe: 8 KiB reads placed to straddle
	// candidate stripe-unit boundaries or to stay inside them. Schedules
	// name it explicitly (it is not in the default schedule) and its
	// latency feeds no degradation detector: the server reads its answer
	// (ProbeResult.stripe_scan) as a source of geometry.
	StripeScan ProbeKind = "stripe-scan"
)

// Block-size limits every probe kind shares.
const (
	MinBlockSize = 512     // bytes: the smallest logical sector
	MaxBlockSize = 1 << 20 // bytes
)

// ProbeKindSpec is what the agent's checks and the server's validation know
// of one probe kind.
type ProbeKindSpec struct {
	Kind ProbeKind
	// Reported: agents run this kind and the server accepts its results.
	// A kind that is neither Reported nor Probed is only a reserved name.
	Reported bool
	// Probed: the probe engine runs this kind on request (`agent probe
	// --kind`), Reported or not.
	Probed bool
	// Default: a schedule that names no kinds runs this one.
	Default bool
	// Judged: the degradation detector learns this kind's latency (the
	// baselines, cohorts and priors); a kind that measures geometry is
	// not judged.
	Judged bool
	// MaxOps bounds a run of this kind (0: MaxOps).
	MaxOps uint64
	// ScheduledOps is the op budget of a scheduled run of this kind when
	// its schedule names no ops (0: the agent's schedule default, 50).
	ScheduledOps uint64
	// MinFileSize is the smallest probe file a run of this kind needs
	// (0: no floor beyond the engine's).
	MinFileSize uint64
	// MinBlockSize and MaxBlockSize bound the block size of a run of this
	// kind (MinBlockSize 0: the package's MinBlockSize); equal, the kind
	// has one fixed block size.
	MinBlockSize uint32
	MaxBlockSize uint32
	// MaxQueueDepth is the deepest queue a run of this kind takes (0:
	// the package's MaxQueueDepth). A synced kind runs at 1 whatever the
	// schedule says; a kind with MaxQueueDepth 1 refuses more.
	MaxQueueDepth int
	// Synced: each write is made durable before the next (a sync mode is
	// required), and the queue depth is 1.
	Synced bool
	// Writes: the kind writes its blocks (with random data); else it
	// reads them.
	Writes bool
	// Access is the order its operations visit the probe file.
	Access Access
	// Geometry: the kind measures geometry, not latency: its reads are
	// placed by its measurement (Access AccessPlaced) and its result
	// carries the answer (ProbeResult.stripe_scan, the volume's
	// measured stripe); it is not Judged.
	Geometry bool
}

// Access is the order a probe kind's operations visit the probe file.
type Access string

// The access orders.
const (
	// AccessRandom: uniformly random offsets, aligned to the block size.
	AccessRandom Access = "random"
	// AccessSequential: one block after the other from the start of the
	// data area, wrapping at its end (a database's log).
	AccessSequential Access = "sequential"
	// AccessPlaced: where the kind's measurement places them, read by
	// read (stripe-scan: straddling candidate stripe-unit boundaries or
	// staying inside them).
	AccessPlaced Access = "placed"
)

// probeKinds is the one list of probe kinds, in the order flag help,
// validation messages and the agent's default schedule use.
var probeKinds = [...]ProbeKindSpec{
	{Kind: RandomRead, Reported: true, Probed: true, Default: true, Judged: true, MaxBlockSize: MaxBlockSize,
		Access: AccessRandom},
	{Kind: RandomWrite, Reported: true, Probed: true, Default: true, Judged: true, MaxBlockSize: MaxBlockSize,
		Writes: true, Access: AccessRandom},
	{Kind: LogWrite, Reported: true, Probed: true, Default: true, Judged: true, MaxBlockSize: MaxLogBlockSize,
		Writes: true, Access: AccessSequential, Synced: true},
	{Kind: StripeScan, Reported: true, Probed: true, MinBlockSize: StripeScanBlockSize, MaxBlockSize: StripeScanBlockSize,
		MaxQueueDepth: 1, MaxOps: StripeScanMaxOps, ScheduledOps: StripeScanMaxOps, MinFileSize: StripeScanMinFileSize,
		Access: AccessPlaced, Geometry: true},
}

// Spec is kind k's entry; the zero spec (reads, no access order, no
// limits) for a kind the probe engine does not run.
func (k ProbeKind) Spec() ProbeKindSpec {
	s, _ := LookupProbedKind(k)
	return s
}

// BlockSizes are the smallest and largest block size of a run of this
// kind, the defaults filled in.
func (s ProbeKindSpec) BlockSizes() (lo, hi uint64) {
	lo, hi = uint64(s.MinBlockSize), uint64(s.MaxBlockSize)
	if lo == 0 {
		lo = MinBlockSize
	}
	if hi == 0 {
		hi = MaxBlockSize
	}
	return lo, hi
}

// OpsLimit is the most ops a run of this kind takes, the default filled in.
func (s ProbeKindSpec) OpsLimit() uint64 {
	if s.MaxOps == 0 {
		return MaxOps
	}
	return s.MaxOps
}

// QueueDepthLimit is the deepest queue a run of this kind takes, the
// default filled in.
func (s ProbeKindSpec) QueueDepthLimit() int {
	if s.MaxQueueDepth == 0 {
		return MaxQueueDepth
	}
	return s.MaxQueueDepth
}

// MaxLogBlockSize is the largest block size of a log-write run.
const MaxLogBlockSize = 64 << 10

// StripeScanBlockSize is the one block size of a stripe-scan run.
const StripeScanBlockSize = 8 << 10

// StripeScanMaxOps bounds a stripe-scan run: its budget and its default.
const StripeScanMaxOps = 2000

// StripeScanMinFileSize is the smallest probe file a stripe-scan run
// places its reads in: straddles of 1 MiB candidate units.
const StripeScanMinFileSize = 16 << 20

// ProbeKinds lists every kind agents run and the server accepts, in order.
func ProbeKinds() []ProbeKind { return kindsWhere(func(s ProbeKindSpec) bool { return s.Reported }) }

// DefaultProbeKinds lists the kinds a schedule that names none runs.
func DefaultProbeKinds() []ProbeKind {
	return kindsWhere(func(s ProbeKindSpec) bool { return s.Reported && s.Default })
}

// JudgedProbeKinds lists the kinds whose latency the degradation detector
// learns, in order.
func JudgedProbeKinds() []ProbeKind {
	return kindsWhere(func(s ProbeKindSpec) bool { return s.Reported && s.Judged })
}

// IsJudged reports whether kind k's latency feeds the degradation detector.
func IsJudged(k ProbeKind) bool {
	s, ok := LookupProbeKind(k)
	return ok && s.Judged
}

// ProbedKinds lists every kind the probe engine runs on request, in order.
func ProbedKinds() []ProbeKind { return kindsWhere(func(s ProbeKindSpec) bool { return s.Probed }) }

// ListedProbeKinds lists every probe kind name, reserved ones included.
func ListedProbeKinds() []ProbeKind { return kindsWhere(func(ProbeKindSpec) bool { return true }) }

// LookupProbeKind returns the spec of a Reported kind; false for an unknown
// or only reserved name.
func LookupProbeKind(k ProbeKind) (ProbeKindSpec, bool) {
	return lookupWhere(k, func(s ProbeKindSpec) bool { return s.Reported })
}

// LookupProbedKind returns the spec of a kind the probe engine runs.
func LookupProbedKind(k ProbeKind) (ProbeKindSpec, bool) {
	return lookupWhere(k, func(s ProbeKindSpec) bool { return s.Probed })
}

func kindsWhere(keep func(ProbeKindSpec) bool) []ProbeKind {
	var out []ProbeKind
	for _, s := range probeKinds {
		if keep(s) {
			out = append(out, s.Kind)
		}
	}
	return out
}

func lookupWhere(k ProbeKind, keep func(ProbeKindSpec) bool) (ProbeKindSpec, bool) {
	for _, s := range probeKinds {
		if s.Kind == k && keep(s) {
			return s, true
		}
	}
	return ProbeKindSpec{}, false
}

// ProbeKindNames is ProbeKinds as strings.
func ProbeKindNames() []string { return names(ProbeKinds()) }

// JudgedProbeKindNames is JudgedProbeKinds as strings.
func JudgedProbeKindNames() []string { return names(JudgedProbeKinds()) }

// ProbeKindList is ProbeKinds for messages and flag help: "a, b, c".
func ProbeKindList() string { return strings.Join(ProbeKindNames(), ", ") }

// SyncMode is how a synced kind (log-write) makes each write durable.
type SyncMode string

// The sync modes.
const (
	SyncDsync     SyncMode = "dsync"     // the file is opened O_DSYNC
	SyncFdatasync SyncMode = "fdatasync" // fdatasync(2) after every write
)

// SyncModes lists every sync mode, the default first.
func SyncModes() []SyncMode { return []SyncMode{SyncDsync, SyncFdatasync} }

// SyncModeNames is SyncModes as strings.
func SyncModeNames() []string { return names(SyncModes()) }

// MaxQueueDepth bounds a run's queue depth.
const MaxQueueDepth = 256

// MaxOps bounds a run's ops: a run keeps one 8-byte latency sample per op.
const MaxOps = 10_000_000

// MaxFailureBytes bounds a reported run's failure text (agent.proto's
// ProbeResult.failure).
const MaxFailureBytes = 1024

// Stop reasons, as reported in ProbeResult.stopped_reason. The empty string
// means the run did all its ops.
const (
	StopMaxDuration    = "max-duration"    // --max-duration reached before --ops
	StopBusy           = "busy"            // device busy before the first op: run skipped
	StopBusyDuring     = "busy-during"     // device became busy during the run
	StopLatencyCeiling = "latency-ceiling" // recent probe latency above the ceiling
	StopInterrupted    = "interrupted"     // the caller's context was cancelled (SIGINT/SIGTERM)
	StopIOErrors       = "io-errors"       // too many I/O errors
	// StopMaintenance: a maintenance window (internal/maintenance) was
	// open when the run was due (skipped, no operations) or opened during
	// it (stopped at the window's start). Set by the agent's scheduler,
	// never by the engine; the run is not a failure and carries no
	// failure text.
	StopMaintenance = "maintenance"

	// A run that never started its I/O because the probe engine returned
	// an error, or because the agent's scheduler could not get the disk.
	// The engine itself never sets these: callers that report runs (the
	// agent) do.
	StopRefused     = "refused"      // a safety check said no: free-space floor, unsafe path, foreign file, no cache bypass, bad options
	StopFailed      = "failed"       // the probe file could not be opened, created or filled, or the run's time limit came first
	StopLockTimeout = "lock-timeout" // another probe held the disk for the whole run timeout
)

// stopReasons is the one list of stop reasons; notRun marks those of a run
// that never started its I/O.
var stopReasons = [...]struct {
	reason string
	notRun bool
}{
	{StopMaxDuration, false},
	{StopBusy, false},
	{StopBusyDuring, false},
	{StopLatencyCeiling, false},
	{StopInterrupted, false},
	{StopIOErrors, false},
	{StopMaintenance, false},
	{StopRefused, true},
	{StopFailed, true},
	{StopLockTimeout, true},
}

// StopReasons lists every stop reason, for validation and documentation.
func StopReasons() []string {
	out := make([]string, len(stopReasons))
	for i, s := range stopReasons {
		out[i] = s.reason
	}
	return out
}

// NotRunReasons are the stop reasons of a run that never started its I/O;
// only such a run carries a failure text.
func NotRunReasons() []string {
	var out []string
	for _, s := range stopReasons {
		if s.notRun {
			out = append(out, s.reason)
		}
	}
	return out
}

// IsNotRun reports whether reason is one of NotRunReasons.
func IsNotRun(reason string) bool { return slices.Contains(NotRunReasons(), reason) }

func names[S ~string](in []S) []string {
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = string(s)
	}
	return out
}
