// Package agentkeys holds the keys of the agent's configuration that
// central policy sets as well — probe schedules (probes), declared
// hardware arrays (declared_devices), database sources (databases) and the
// member I/O interval (intervals.member_io): their types, defaults and
// checks.
// The agent's configuration (internal/agent/config) and the server's policy
// validation (internal/policy) share them, so the server validates a
// policy fragment exactly as the agent will without linking discovery,
// the probe engine or the agent's configuration.
package agentkeys

import (
	"fmt"
	"math"
	"math/bits"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/plumbline/plumbline/internal/bytesize"
	"github.com/plumbline/plumbline/internal/mounts"
	"github.com/plumbline/plumbline/internal/vocab"
)

// Defaults of a probe schedule (internal/agent/config explains the budget).
const (
	DefaultProbeEvery = 3 * time.Minute
	// DefaultProbeOps is a scheduled run's op budget. `agent probe` (one
	// run by hand) keeps probe.DefaultOptions' 1,000.
	DefaultProbeOps = 50
)

// The probe engine's defaults and limits a schedule takes (the engine's
// probe.DefaultOptions, probe.HeaderSize and probe.MinFreeAuto; a test
// checks they agree). They are restated here so that the server, which
// validates central policy with this package, does not link the agent's
// O_DIRECT probe engine.
const (
	// ProbeFileUnit is the probe file's header size: file_size is a
	// multiple of it, at least twice it.
	ProbeFileUnit = 1 << 20
	// MinFreeAuto as MinFree: the byte floor is twice file_size.
	MinFreeAuto MinFree = -1

	defaultFileSize       = 1 * bytesize.GiB
	defaultBlockSize      = 8 * bytesize.KiB
	defaultQueueDepth     = 1
	defaultSync           = vocab.SyncDsync
	defaultMaxDuration    = 60 * time.Second
	defaultIOPS           = 100.0
	defaultBusyThreshold  = 70.0
	defaultMinFreePercent = 10.0
)

// ProbeSchedule runs probes on every volume whose mount point matches.
// The budget keys are the `agent probe` flags.
type ProbeSchedule struct {
	MountPoint    string            `yaml:"mount_point,omitempty"` // glob of the volume's mount point (mounts.MatchGlob)
	Dir           string            `yaml:"dir,omitempty"`         // probe directory on that volume
	Kinds         []vocab.ProbeKind `yaml:"kinds,omitempty"`       // default vocab.DefaultProbeKinds (not stripe-scan)
	Every         time.Duration     `yaml:"every,omitempty"`       // default 3m
	Ops           int               `yaml:"ops,omitempty"`         // default 50; a stripe-scan schedule's 2000
	IOPS          *float64          `yaml:"iops,omitempty"`        // 0: uncapped
	MaxDuration   time.Duration     `yaml:"max_duration,omitempty"`
	FileSize      bytesize.Size     `yaml:"file_size,omitempty"`
	BlockSize     bytesize.Size     `yaml:"block_size,omitempty"`
	QueueDepth    int               `yaml:"queue_depth,omitempty"`
	Sync          vocab.SyncMode    `yaml:"sync,omitempty"`
	BusyThreshold *float64          `yaml:"busy_threshold,omitempty"` // 0: guard off
	Jitter        time.Duration     `yaml:"jitter,omitempty"`         // random extra delay in [0, jitter) before each run
	AllowCached   bool              `yaml:"allow_cached,omitempty"`
	// The free-space floor (probe.Options.FreeSpaceFloor): creating or
	// growing the probe file must leave the larger of min_free_percent of
	// the file system (default 10) and min_free (default auto: twice
	// file_size) free.
	MinFree        *MinFree `yaml:"min_free,omitempty"`
	MinFreePercent *float64 `yaml:"min_free_percent,omitempty"`
}

// MinFree is the byte part of the free-space floor: a size, or "auto"
// (MinFreeAuto: twice the probe file). It is the YAML key min_free
// and the flag --min-free.
type MinFree int64

// String is "auto" or the size.
func (m MinFree) String() string {
	if m == MinFreeAuto {
		return "auto"
	}
	return bytesize.Size(m).String()
}

// Set implements flag.Value.
func (m *MinFree) Set(v string) error {
	if strings.TrimSpace(v) == "auto" {
		*m = MinFreeAuto
		return nil
	}
	n, err := bytesize.Parse(v)
	if err != nil {
		return fmt.Errorf("%w (or auto)", err)
	}
	if n > bytesize.Size(math.MaxInt64) {
		return fmt.Errorf("%w %q: too large", bytesize.ErrSyntax, v)
	}
	*m = MinFree(n)
	return nil
}

// UnmarshalText implements encoding.TextUnmarshaler (YAML).
func (m *MinFree) UnmarshalText(b []byte) error { return m.Set(string(b)) }

// MarshalText implements encoding.TextMarshaler.
func (m MinFree) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// WithDefaults is probes with every omitted key filled in (Load fills
// them the same way).
func WithDefaults(probes []ProbeSchedule) []ProbeSchedule {
	out := slices.Clone(probes)
	for i := range out {
		out[i].ApplyDefaults()
	}
	return out
}

// ApplyDefaults fills a schedule's omitted keys: the schedule defaults
// (every, ops), else the probe engine's.
func (p *ProbeSchedule) ApplyDefaults() {
	if len(p.Kinds) == 0 {
		p.Kinds = vocab.DefaultProbeKinds()
	}
	setZero(&p.Every, DefaultProbeEvery)
	setZero(&p.Ops, p.defaultOps())
	setZero(&p.MaxDuration, defaultMaxDuration)
	setZero(&p.FileSize, defaultFileSize)
	setZero(&p.BlockSize, defaultBlockSize)
	setZero(&p.QueueDepth, defaultQueueDepth)
	setZero(&p.Sync, defaultSync)
	setNil(&p.IOPS, defaultIOPS)
	setNil(&p.BusyThreshold, defaultBusyThreshold)
	setNil(&p.MinFree, MinFreeAuto)
	setNil(&p.MinFreePercent, defaultMinFreePercent)
}

// defaultOps is the op budget of a schedule that names none: its kinds'
// own (vocab.ProbeKindSpec.ScheduledOps: a stripe-scan's 2,000, which its
// inference needs) when every kind has one, else DefaultProbeOps.
func (p *ProbeSchedule) defaultOps() int {
	ops := uint64(0)
	for _, k := range p.Kinds {
		spec, ok := vocab.LookupProbeKind(k)
		if !ok || spec.ScheduledOps == 0 {
			return DefaultProbeOps
		}
		ops = max(ops, spec.ScheduledOps)
	}
	if ops == 0 {
		return DefaultProbeOps
	}
	return int(ops)
}

func setZero[T comparable](p *T, def T) {
	var zero T
	if *p == zero {
		*p = def
	}
}

func setNil[T any](p **T, def T) {
	if *p == nil {
		*p = &def
	}
}

// adder collects one validation error.
type adder func(format string, args ...any)

// ValidateProbes checks every schedule (defaults applied); the errors name
// the key, probes[i].key, as the configuration file does.
func ValidateProbes(probes []ProbeSchedule) []error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	seen := map[string]bool{}
	files := map[string]int{} // a probe directory → the first schedule using it
	for i, p := range probes {
		p.validate(fmt.Sprintf("probes[%d]", i), seen, add)
		j, ok := files[dirKey(p.Dir)]
		switch {
		case !ok:
			files[dirKey(p.Dir)] = i
		case probes[j].FileSize != p.FileSize:
			add("probes[%d].file_size %s: probes[%d] has the same dir with file_size %s (one probe file: a different size rewrites it at every run; use the same size or a dir of its own)",
				i, p.FileSize, j, probes[j].FileSize)
		}
	}
	return errs
}

// validate checks one schedule, named w in messages; seen holds the
// (mount_point, kind) pairs of the schedules before it.
func (p ProbeSchedule) validate(w string, seen map[string]bool, add adder) {
	if !mounts.ValidGlob(p.MountPoint) {
		add("%s.mount_point %q: want an absolute path or glob (path.Match syntax; on Windows D:/ or C:/MountPoints/*)", w, p.MountPoint)
	}
	if !path.IsAbs(p.Dir) && !isWindowsAbs(p.Dir) {
		add("%s.dir %q: want an absolute path", w, p.Dir)
	}
	for j, k := range p.Kinds {
		if _, ok := vocab.LookupProbeKind(k); !ok {
			add("%s.kinds[%d] %q: want %s", w, j, k, orList(vocab.ProbeKindNames()))
		}
		key := p.MountPoint + "\x00" + string(k)
		if seen[key] {
			add("%s.kinds[%d] %q: scheduled twice for mount_point %q", w, j, k, p.MountPoint)
		}
		seen[key] = true
	}
	if p.Every < time.Second {
		add("%s.every %s: want at least 1s", w, p.Every)
	}
	if p.Ops < 1 || p.Ops > vocab.MaxOps {
		add("%s.ops %d: want 1 to %d", w, p.Ops, vocab.MaxOps)
	} else if k, spec, ok := p.refusingKind(func(s vocab.ProbeKindSpec) bool { return uint64(p.Ops) > s.OpsLimit() }); ok {
		add("%s.ops %d: %s wants 1 to %d%s", w, p.Ops, k, spec.OpsLimit(), p.apart(k))
	}
	if p.IOPS != nil && *p.IOPS < 0 {
		add("%s.iops %g: want 0 (uncapped) or more", w, *p.IOPS)
	}
	if p.MaxDuration <= 0 || p.MaxDuration > p.Every {
		add("%s.max_duration %s: want more than 0 and at most every (%s)", w, p.MaxDuration, p.Every)
	}
	p.validateSizes(w, add)
	if !slices.Contains(vocab.SyncModes(), p.Sync) {
		add("%s.sync %q: want %s", w, p.Sync, orList(vocab.SyncModeNames()))
	}
	if p.BusyThreshold != nil && (*p.BusyThreshold < 0 || *p.BusyThreshold > 100) {
		add("%s.busy_threshold %g: want 0 (off) to 100 percent", w, *p.BusyThreshold)
	}
	if p.MinFreePercent != nil && (*p.MinFreePercent < 0 || *p.MinFreePercent >= 100) {
		add("%s.min_free_percent %g: want 0 to less than 100", w, *p.MinFreePercent)
	}
	if p.Jitter < 0 || p.Jitter > p.Every {
		add("%s.jitter %s: want 0 to every (%s)", w, p.Jitter, p.Every)
	}
}

// validateSizes checks block_size, file_size and queue_depth: first the
// engine's limits, then each kind's (its vocab.ProbeKindSpec).
func (p ProbeSchedule) validateSizes(w string, add adder) {
	bs := uint64(p.BlockSize)
	if bs < vocab.MinBlockSize || bs > vocab.MaxBlockSize || bits.OnesCount64(bs) != 1 {
		add("%s.block_size %s: want a power of two from 512B to 1MiB", w, p.BlockSize)
	} else if k, spec, ok := p.refusingKind(func(s vocab.ProbeKindSpec) bool { lo, hi := s.BlockSizes(); return bs < lo || bs > hi }); ok {
		lo, hi := spec.BlockSizes()
		add("%s.block_size %s: %s wants %s%s", w, p.BlockSize, k, sizeRange(lo, hi), p.apart(k))
	}
	fs := uint64(p.FileSize)
	if fs%ProbeFileUnit != 0 || fs < 2*ProbeFileUnit || fs < ProbeFileUnit+bs {
		add("%s.file_size %s: want a multiple of 1MiB, at least 2MiB", w, p.FileSize)
	} else if k, spec, ok := p.refusingKind(func(s vocab.ProbeKindSpec) bool { return fs < s.MinFileSize }); ok {
		add("%s.file_size %s: %s wants at least %s", w, p.FileSize, k, bytesize.Size(spec.MinFileSize))
	}
	if p.QueueDepth < 1 || p.QueueDepth > vocab.MaxQueueDepth {
		add("%s.queue_depth %d: want 1 to %d (log-write always runs at 1)", w, p.QueueDepth, vocab.MaxQueueDepth)
	} else if k, spec, ok := p.refusingKind(func(s vocab.ProbeKindSpec) bool { return p.QueueDepth > s.QueueDepthLimit() }); ok {
		add("%s.queue_depth %d: %s wants %s%s", w, p.QueueDepth, k, intRange(1, spec.QueueDepthLimit()), p.apart(k))
	}
}

// refusingKind is the first kind of the schedule whose spec refuses a key
// (the kinds share every key: one message names the first that refuses).
// Unknown kinds are skipped: validate names them.
func (p ProbeSchedule) refusingKind(refuses func(vocab.ProbeKindSpec) bool) (vocab.ProbeKind, vocab.ProbeKindSpec, bool) {
	for _, k := range p.Kinds {
		if spec, ok := vocab.LookupProbeKind(k); ok && refuses(spec) {
			return k, spec, true
		}
	}
	return "", vocab.ProbeKindSpec{}, false
}

// apart is the hint for a key kind k refuses in a schedule of several
// kinds: the keys apply to all of them, so k may need its own schedule.
func (p ProbeSchedule) apart(k vocab.ProbeKind) string {
	if len(p.Kinds) < 2 {
		return ""
	}
	return fmt.Sprintf(" (the schedule's keys apply to each of its kinds: give %s a schedule of its own for the same mount_point)", k)
}

// sizeRange is "8KiB" or "512B to 64KiB".
func sizeRange(lo, hi uint64) string {
	if lo == hi {
		return bytesize.Size(lo).String()
	}
	return bytesize.Size(lo).String() + " to " + bytesize.Size(hi).String()
}

// intRange is "1" or "1 to 256".
func intRange(lo, hi int) string {
	if lo == hi {
		return fmt.Sprint(lo)
	}
	return fmt.Sprintf("%d to %d", lo, hi)
}

// dirKey names the probe file a schedule's dir holds: /x/ and /x, C:\P
// and c:/p are one.
func dirKey(dir string) string {
	if isWindowsAbs(dir) {
		return strings.ToLower(path.Clean(strings.ReplaceAll(dir, `\`, "/")))
	}
	return path.Clean(dir)
}

// isWindowsAbs accepts C:\dir and C:/dir, so a Windows agent's config
// validates on any OS.
func isWindowsAbs(p string) bool {
	return len(p) >= 3 && (p[0]|0x20 >= 'a' && p[0]|0x20 <= 'z') && p[1] == ':' && (p[2] == '\\' || p[2] == '/')
}

// orList joins words for a message: "a, b or c".
func orList(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}
