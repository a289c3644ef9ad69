// Package probe is Plumbline's low-impact I/O probe engine. A probe runs a
// bounded number of database-shaped I/Os (8 KiB random reads and writes,
// synchronous log writes) against the agent's own probe file and reports
// counts and the latency distribution.
//
// Safety comes first: a probe only ever touches one file, a fixed name
// inside an operator-chosen directory, which it created itself (O_EXCL) and
// marked with a header; it refuses symlinks, foreign files and file systems
// that cannot bypass the page cache; it fills the file once, rate-limited,
// and never lets the file system drop below a free-space floor; every run
// is bounded in ops, time and rate, skips when the device is already busy
// and stops when latency spikes. Skips and early stops are Results with a
// StoppedReason, not errors.
//
// The package imports neither gRPC nor Prometheus: the CLI (`agent probe`)
// and the agent's scheduler call Run and turn the Result into output.
package probe

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"time"

	"github.com/plumbline/plumbline/internal/histogram"
	"github.com/plumbline/plumbline/internal/vocab"
)

// Kind is the I/O shape of a probe; the kinds are vocab's.
type Kind = vocab.ProbeKind

// The probe kinds this engine runs.
const (
	RandomRead  = vocab.RandomRead
	RandomWrite = vocab.RandomWrite
	LogWrite    = vocab.LogWrite
	StripeScan  = vocab.StripeScan
)

// Kinds lists every kind agents run and report, for schedules and validation.
func Kinds() []Kind { return vocab.ProbeKinds() }

// JudgedKinds lists the kinds whose latency the degradation detector
// learns: the ones a latency simulation produces.
func JudgedKinds() []Kind { return vocab.JudgedProbeKinds() }

// ProbedKinds lists every kind `agent probe` runs, for its flag help.
func ProbedKinds() []Kind { return vocab.ProbedKinds() }

// SyncMode is how a log-write makes each write durable.
type SyncMode = vocab.SyncMode

// The sync modes.
const (
	SyncDsync     = vocab.SyncDsync
	SyncFdatasync = vocab.SyncFdatasync
)

// DefaultFileName is the one name a probe file has inside its directory.
const DefaultFileName = ".plumbline-probe"

// HeaderSize is the size of the header region at the start of the probe
// file. Probe I/O only touches the data region after it; 1 MiB keeps every
// data offset aligned to any block size up to MaxBlockSize.
const HeaderSize = 1 << 20

// Block size limits, from vocab.
const (
	MinBlockSize    = vocab.MinBlockSize
	MaxBlockSize    = vocab.MaxBlockSize
	MaxLogBlockSize = vocab.MaxLogBlockSize
)

// The free-space floor: creating or growing the probe file must leave at
// least FreeSpaceFloor bytes free. By default that is the larger of 10% of
// the file system and twice the probe file: the file never pushes a volume
// below 10% free, and never takes more than a third of the free space it
// finds. A 2 GiB log volume can hold a 64 MiB probe file (it needs 269 MiB
// free); a 1 GiB file on it is refused.
const (
	DefaultMinFreePercent = 10
	// MinFreeAuto as Options.MinFreeBytes: the byte floor is twice FileSize.
	MinFreeAuto = -1
)

// FreeSpaceFloor is the free space, in bytes, that must remain on a file
// system of total bytes once the probe file is written: the larger of
// MinFreePercent of total and MinFreeBytes (MinFreeAuto: 2 × FileSize).
func (o Options) FreeSpaceFloor(total int64) int64 {
	byBytes := o.MinFreeBytes
	if byBytes == MinFreeAuto {
		byBytes = math.MaxInt64
		if o.FileSize <= math.MaxInt64/2 {
			byBytes = 2 * o.FileSize
		}
	}
	byPercent := int64(min(float64(max(total, 0))*o.MinFreePercent/100, math.MaxInt64/2))
	return max(byPercent, byBytes)
}

// minFreeString describes the byte floor for messages.
func (o Options) minFreeString() string {
	if o.MinFreeBytes == MinFreeAuto {
		return fmt.Sprintf("auto: twice the %d-byte file", o.FileSize)
	}
	return fmt.Sprintf("%d", o.MinFreeBytes)
}

// freeSpaceError is the refusal when writing grow more bytes would leave
// after bytes free of total, below floor.
func (o Options) freeSpaceError(grow, after, total, floor int64) error {
	return fmt.Errorf("%w in %s: writing the %d-byte probe file would leave %d bytes free of %d, below the floor of %d bytes (the larger of --min-free-percent %g and --min-free %s); use a smaller --file-size (file_size) or lower the floor (min_free, min_free_percent)",
		ErrFreeSpace, o.Dir, grow, max(after, 0), total, floor, o.MinFreePercent, o.minFreeString())
}

// MaxOps bounds Options.Ops: a run keeps one 8-byte latency sample per op.
const MaxOps = vocab.MaxOps

// MaxFailureBytes bounds Result.Failure as reported (agent.proto's
// ProbeResult.failure).
const MaxFailureBytes = vocab.MaxFailureBytes

// FailureReason classifies an error of Run: vocab.StopRefused for the refusals
// (ErrUnsafePath, ErrForeignFile, ErrNoCacheBypass, ErrFreeSpace,
// ErrInvalid, ErrNotSupported), vocab.StopFailed for anything else.
func FailureReason(err error) string {
	for _, r := range []error{ErrUnsafePath, ErrForeignFile, ErrNoCacheBypass, ErrFreeSpace, ErrInvalid, ErrNotSupported} {
		if errors.Is(err, r) {
			return vocab.StopRefused
		}
	}
	return vocab.StopFailed
}

// Errors a caller may want to tell apart (wrapped; use errors.Is).
var (
	ErrNotSupported  = errors.New("probes are not supported on this operating system yet")
	ErrUnsafePath    = errors.New("unsafe probe path")
	ErrForeignFile   = errors.New("not a Plumbline probe file")
	ErrNoCacheBypass = errors.New("file system cannot bypass the page cache (O_DIRECT)")
	ErrFreeSpace     = errors.New("not enough free space")
	ErrInvalid       = errors.New("invalid probe options")
)

// Options describe one probe run. DefaultOptions returns the CLI defaults;
// zero values of the guards mean "off" (IOPS, FillRate: unlimited).
type Options struct {
	Dir      string // directory holding the probe file (required)
	FileName string // default DefaultFileName; a single path element
	FileSize int64  // total probe file size including the header; multiple of 1 MiB

	Kind       Kind
	BlockSize  int      // bytes; power of two, 512 B–1 MiB (log-write: ≤ 64 KiB)
	QueueDepth int      // parallel workers for the random kinds; log-write is always 1
	Sync       SyncMode // log-write only

	Ops         int           // op budget (≥ 1)
	MaxDuration time.Duration // wall-clock cap of the measured phase
	IOPS        float64       // token-bucket rate cap; 0 = unlimited
	Jitter      time.Duration // random delay in [0, Jitter) before the run

	FillRate int64 // bytes per second for the one-time fill; 0 = unlimited

	MinFreePercent float64 // free-space floor, % of the file system
	MinFreeBytes   int64   // free-space floor, bytes, or MinFreeAuto; the larger floor wins (FreeSpaceFloor)

	BusyThreshold  float64       // percent utilisation of the backing device; 0 = guard off
	BusyWindow     time.Duration // sampling window before the run
	BusyInterval   time.Duration // re-check interval during the run
	LatencyCeiling time.Duration // stop when the median of the last LatencyWindow ops exceeds it; 0 = off
	LatencyWindow  int           // ops in the latency guard's window
	MaxErrors      int           // stop after this many I/O errors

	AllowCached bool // run without O_DIRECT where the file system refuses it

	// RawIO issues the probe's pread/pwrite/fdatasync as raw system calls
	// (64-bit Linux), bypassing the Go scheduler's syscall hand-off. That
	// stops every ~50 µs I/O from waking the runtime's sysmon thread and
	// saves about a fifth of the CPU per op, but a stuck I/O then holds
	// its P and delays garbage collection for the whole process. Only for
	// a process that does nothing else: the one-shot CLI sets it, a
	// long-running agent must not. It is ignored (ordinary calls are
	// used) unless QueueDepth < GOMAXPROCS: a blocked raw call holds its
	// P, so more workers than Ps would not all have an I/O in flight.
	RawIO bool

	ProcRoot string // procfs mount point, for /proc/diskstats
	SysRoot  string // sysfs mount point (procfs library wants one)

	Seed uint64 // random offsets seed; 0 = from the clock

	// Placement is where the file system's device lies on the device a
	// stripe-scan measures (stripe-scan only).
	Placement Placement

	// Progress, when set, is updated while the run fills its file and
	// measures, for a caller that shows progress (nil: no tracking).
	Progress *Progress
}

// DefaultOptions returns the defaults of `agent probe`.
func DefaultOptions() Options {
	return Options{
		FileName:       DefaultFileName,
		FileSize:       1 << 30,
		Kind:           RandomRead,
		BlockSize:      8 << 10,
		QueueDepth:     1,
		Sync:           SyncDsync,
		Ops:            1000,
		MaxDuration:    60 * time.Second,
		IOPS:           100,
		FillRate:       64 << 20,
		MinFreePercent: DefaultMinFreePercent,
		MinFreeBytes:   MinFreeAuto,
		BusyThreshold:  70,
		BusyWindow:     time.Second,
		BusyInterval:   time.Second,
		LatencyCeiling: 500 * time.Millisecond,
		LatencyWindow:  16,
		MaxErrors:      10,
		ProcRoot:       "/proc",
		SysRoot:        "/sys",
	}
}

// invalid is an ErrInvalid with a message.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// validate checks o and fills the few defaults that have no "off" meaning.
func (o *Options) validate() error {
	if o.Dir == "" {
		return invalid("--dir is required")
	}
	if o.FileName == "" {
		o.FileName = DefaultFileName
	}
	if err := checkFileName(o.FileName); err != nil {
		return err
	}
	spec, ok := vocab.LookupProbedKind(o.Kind)
	if !ok {
		return invalid("kind %q: want one of %s", o.Kind, kindList(vocab.ProbedKinds()))
	}
	if err := runnerFor(spec).check(o); err != nil {
		return err
	}
	if err := o.validateShape(spec); err != nil {
		return err
	}
	if err := o.validateBudget(); err != nil {
		return err
	}
	o.fillDefaults()
	return nil
}

// validateShape checks the I/O the run issues: block size, sync mode and
// queue depth (a synced kind, log-write, is single-threaded).
func (o *Options) validateShape(spec vocab.ProbeKindSpec) error {
	bs := o.BlockSize
	if bs < MinBlockSize || bs > MaxBlockSize || bs&(bs-1) != 0 {
		return invalid("block size %d: want a power of two from 512B to 1MiB", bs)
	}
	if spec.Synced {
		if _, hi := spec.BlockSizes(); uint64(bs) > hi {
			return invalid("%s block size %d: want 512B to %dKiB", o.Kind, bs, hi>>10)
		}
		switch o.Sync {
		case SyncDsync, SyncFdatasync:
		case "":
			o.Sync = SyncDsync
		default:
			return invalid("sync mode %q: want dsync or fdatasync", o.Sync)
		}
		if o.QueueDepth > 1 {
			return invalid("%s is single-threaded: queue depth must be 1", o.Kind)
		}
		o.QueueDepth = 1
	} else {
		o.Sync = ""
	}
	if o.QueueDepth < 1 || o.QueueDepth > vocab.MaxQueueDepth {
		return invalid("queue depth %d: want 1 to %d", o.QueueDepth, vocab.MaxQueueDepth)
	}
	if o.FileSize%HeaderSize != 0 || o.FileSize < HeaderSize+int64(max(bs, HeaderSize)) {
		return invalid("file size %d: want a multiple of 1MiB, at least 2MiB", o.FileSize)
	}
	return nil
}

// validateBudget checks the run's bounds: ops, duration, rates, the
// free-space floor and the busy guard.
func (o *Options) validateBudget() error {
	if o.Ops < 1 || o.Ops > MaxOps {
		return invalid("ops %d: want 1 to %d", o.Ops, MaxOps)
	}
	if o.MaxDuration <= 0 {
		return invalid("max duration must be positive")
	}
	if o.IOPS < 0 || o.FillRate < 0 || o.Jitter < 0 || (o.MinFreeBytes < 0 && o.MinFreeBytes != MinFreeAuto) || o.LatencyCeiling < 0 {
		return invalid("rates, sizes and durations must not be negative")
	}
	if o.MinFreePercent < 0 || o.MinFreePercent >= 100 {
		return invalid("free-space floor %v%%: want 0 to <100", o.MinFreePercent)
	}
	if o.BusyThreshold < 0 || o.BusyThreshold > 100 {
		return invalid("busy threshold %v%%: want 0 to 100", o.BusyThreshold)
	}
	return nil
}

// fillDefaults sets the guards' windows and the roots left at zero.
func (o *Options) fillDefaults() {
	if o.BusyWindow <= 0 {
		o.BusyWindow = time.Second
	}
	if o.BusyInterval <= 0 {
		o.BusyInterval = time.Second
	}
	if o.LatencyWindow <= 0 {
		o.LatencyWindow = 16
	}
	if o.MaxErrors <= 0 {
		o.MaxErrors = 10
	}
	if o.ProcRoot == "" {
		o.ProcRoot = "/proc"
	}
	if o.SysRoot == "" {
		o.SysRoot = "/sys"
	}
}

func kindList(ks []Kind) string {
	s := make([]string, len(ks))
	for i, k := range ks {
		s[i] = string(k)
	}
	return strings.Join(s, ", ")
}

// checkFileName refuses anything but a single, plain path element: the
// probe file can never be outside --dir.
func checkFileName(name string) error {
	if name == "." || name == ".." || strings.ContainsAny(name, `/\`) || name != filepath.Base(name) || strings.ContainsRune(name, 0) {
		return fmt.Errorf("%w: file name %q must be a single name inside --dir", ErrUnsafePath, name)
	}
	return nil
}

// Latency summarises the run's latencies in seconds (LatencyOf): min, mean
// and max exact, the percentiles from the run's histogram.
type Latency struct {
	Min  float64 `json:"min"`
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p999"`
	Max  float64 `json:"max"`
}

// Result is the outcome of one run, skipped and stopped runs included.
type Result struct {
	Kind          Kind      `json:"kind"`
	File          string    `json:"file"`
	BlockSize     int       `json:"block_size_bytes"`
	QueueDepth    int       `json:"queue_depth"`
	Sync          SyncMode  `json:"sync,omitempty"`
	Ops           int       `json:"ops"`    // completed ops
	Errors        int       `json:"errors"` // failed ops
	Bytes         int64     `json:"bytes"`
	Duration      float64   `json:"duration_seconds"` // measured phase: first op start to last op end
	IOPS          float64   `json:"iops"`
	Throughput    float64   `json:"throughput_bytes_per_second"`
	CacheBypass   bool      `json:"cache_bypass"`
	StoppedReason string    `json:"stopped_reason"` // a vocab stop reason; "" when the run did all its ops (Run never sets the not-run ones: the agent does)
	Skipped       bool      `json:"skipped"`        // no op ran (busy before start, or interrupted before)
	Latency       Latency   `json:"latency_seconds"`
	StartedAt     time.Time `json:"started_at"`
	FileSize      int64     `json:"file_size_bytes"`
	FillSeconds   float64   `json:"fill_seconds"` // 0 unless this run (re)wrote the file
	// FileRewrittenFrom is the old size of a probe file this run rewrote
	// because FileSize changed; 0 otherwise.
	FileRewrittenFrom int64   `json:"file_rewritten_from_bytes,omitempty"`
	OpsBudget         int     `json:"ops_budget"`
	IOPSCap           float64 `json:"iops_cap"`
	Device            string  `json:"device,omitempty"` // diskstats name of the backing device
	BusyGuard         string  `json:"busy_guard"`       // "on", "off", or "unavailable: why"
	BusyPercent       float64 `json:"busy_percent"`     // others' utilisation seen last (before or during)
	// BusyIO is what the device did in the busy guard's window before the
	// run (others' I/O: the probe's had not started); nil without a guard.
	BusyIO     *DeviceActivity `json:"busy_io,omitempty"`
	FirstError string          `json:"first_error,omitempty"` // the first I/O error, if any
	Failure    string          `json:"failure,omitempty"`     // why a refused, failed or lock-timeout run never ran (set by the caller that reports it)

	// StripeScan is a stripe-scan run's answer; nil for other kinds.
	StripeScan *StripeScanResult `json:"stripe_scan,omitempty"`

	// Histogram is the mergeable latency distribution (seconds); it is
	// serialised as "latency_histogram".
	Histogram *histogram.Histogram `json:"-"`
}

// DeviceActivity is one device's diskstats deltas over a window: reads and
// writes completed, their 512-byte sectors, the time with I/O in flight
// (io_ticks) and the sum of every I/O's time (time_in_queue). Its rate is
// IOs/Window, its mean time per I/O TimeInQueue/IOs.
type DeviceActivity struct {
	Window      time.Duration `json:"window_ns"`
	IOs         uint64        `json:"ios"`
	Sectors     uint64        `json:"sectors"`
	IOTicks     time.Duration `json:"io_ticks_ns"`
	TimeInQueue time.Duration `json:"time_in_queue_ns"`
}

// MarshalJSON adds the histogram snapshot to the plain fields.
func (r Result) MarshalJSON() ([]byte, error) {
	type plain Result
	h := r.Histogram
	if h == nil {
		h = &histogram.Histogram{}
	}
	return json.Marshal(struct {
		plain
		Histogram histogram.Snapshot `json:"latency_histogram"`
	}{plain(r), h.Snapshot()})
}
