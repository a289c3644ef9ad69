package config

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"net"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/plumbline/plumbline/internal/bytesize"
	"github.com/plumbline/plumbline/internal/geometry"
	"github.com/plumbline/plumbline/internal/vocab"
)

// Defaults of the `agent run` keys.
//
// Probe schedule: every kind runs every 3 minutes with 50 operations —
// 20 runs × 50 = 1,000 operations (8 MB at 8 KiB) per kind per hour, the
// same I/O budget as one 1,000-op run an hour, but a sustained 2× slowdown
// is alerted within ~17 minutes instead of ~3 hours (docs/degradation.md, "Degradation
// on the lab"; internal/replay measures both on recorded noise).
//
// Spool size: the default traffic of one host is one ProbeResult per
// (volume, kind) per `every` and a full GeometrySnapshot when geometry
// changes. A ProbeResult record of a 50-op run is about 0.37 KiB on disk
// (fields, a latency histogram of ~10–20 populated buckets, the 20-byte
// frame; 0.63 KiB for 1,000 ops). A host with 8 probed volumes × 3 kinds
// every 3 minutes: 480 records/h × 168 h = 80,640 records ≈ 29 MiB a week.
// Geometry snapshots are ~1.5 KiB per volume: for 16 volumes ~24 KiB each;
// even with one snapshot every geometry_refresh (15 min) all week,
// 96 × 7 × 24 KiB ≈ 16 MiB. 29 + 16 = 45 MiB < 64 MiB: the default cap
// holds more than 7 days of default traffic (1.4× margin; 8 volumes that
// never change geometry need 30 MiB).
const (
	DefaultSpoolMaxBytes   = 64 * bytesize.MiB
	DefaultGeometryRefresh = 15 * time.Minute
	DefaultReportInterval  = 10 * time.Second
	DefaultProbeEvery      = 3 * time.Minute
	// DefaultProbeOps is a scheduled run's op budget. `agent probe` (one
	// run by hand) keeps probe.DefaultOptions' 1,000.
	DefaultProbeOps  = 50
	MinSpoolMaxBytes = 1 * bytesize.MiB
)

// The probe engine's defaults and limits a schedule takes (the engine's
// probe.DefaultOptions, probe.HeaderSize and probe.MinFreeAuto; a test
// checks they agree). They are restated here so that the server, which
// validates central policy with this package, does not link the agent's
// O_DIRECT probe engine (issue 12).
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

// Server is where the agent reports.
type Server struct {
	// Address is host:port of the server's gRPC listener (a DNS name with
	// several A records: every one is a replica).
	Address string `yaml:"address,omitempty"`
	// Addresses are more replicas' host:port (with or instead of
	// Address): the agent connects to one, in a random order per agent,
	// and fails over to the next.
	Addresses []string  `yaml:"addresses,omitempty"`
	TLS       ClientTLS `yaml:"tls,omitempty"`
	// Insecure sends in plaintext, without TLS: tests and dev only.
	Insecure bool `yaml:"insecure,omitempty"`
}

// Targets are the server addresses: Address, then Addresses.
func (s Server) Targets() []string {
	var out []string
	if s.Address != "" {
		out = append(out, s.Address)
	}
	return append(out, s.Addresses...)
}

// ClientTLS are the agent's mutual-TLS files (PEM).
type ClientTLS struct {
	CAFile   string `yaml:"ca_file,omitempty"`   // the CA that signed the server's certificate
	CertFile string `yaml:"cert_file,omitempty"` // the agent's client certificate; its CN is the default agent_id
	KeyFile  string `yaml:"key_file,omitempty"`
	// ServerName overrides the name checked in the server's certificate
	// (default: the host of server.address).
	ServerName string `yaml:"server_name,omitempty"`
}

// Spool is the agent's durable outbox.
type Spool struct {
	Dir      string        `yaml:"dir,omitempty"`
	MaxBytes bytesize.Size `yaml:"max_bytes,omitempty"` // default 64MiB
}

// Intervals are the agent's periods; the server's Hello answer overrides
// them when it states its own.
type Intervals struct {
	GeometryRefresh time.Duration `yaml:"geometry_refresh,omitempty"` // default 15m; also on mount-table change
	Report          time.Duration `yaml:"report,omitempty"`           // default 10s
}

// ProbeSchedule runs probes on every volume whose mount point matches.
// The budget keys are the `agent probe` flags.
type ProbeSchedule struct {
	MountPoint    string            `yaml:"mount_point,omitempty"` // glob of the volume's mount point (geometry.MatchMountPoint)
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

// Web is the agent's own /healthz and /metrics endpoint.
type Web struct {
	// ListenAddress is host:port; empty: off. It must be a loopback address
	// unless AllowNonLoopback is set.
	ListenAddress    string `yaml:"listen_address,omitempty"`
	AllowNonLoopback bool   `yaml:"allow_non_loopback,omitempty"`
}

// applyDefaults fills omitted keys of list entries (top-level defaults come
// from Default()).
// WithDefaults is a with the defaults of list entries (probes) filled in,
// as Load fills them: for configuration built in code.
func WithDefaults(a Agent) Agent {
	a.Probes = slices.Clone(a.Probes)
	a.applyDefaults()
	return a
}

func (a *Agent) applyDefaults() {
	for i := range a.Probes {
		a.Probes[i].applyDefaults()
	}
}

// applyDefaults fills a schedule's omitted keys: the schedule defaults
// (every, ops), else the probe engine's.
func (p *ProbeSchedule) applyDefaults() {
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

// validateRun checks the `agent run` keys that are set.
func (a Agent) validateRun() []error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	a.validateEndpoints(add)
	seen := map[string]bool{}
	files := map[string]int{} // a probe directory → the first schedule using it
	for i, p := range a.Probes {
		p.validate(fmt.Sprintf("probes[%d]", i), seen, add)
		j, ok := files[dirKey(p.Dir)]
		switch {
		case !ok:
			files[dirKey(p.Dir)] = i
		case a.Probes[j].FileSize != p.FileSize:
			add("probes[%d].file_size %s: probes[%d] has the same dir with file_size %s (one probe file: a different size rewrites it at every run; use the same size or a dir of its own)",
				i, p.FileSize, j, a.Probes[j].FileSize)
		}
	}
	for i, w := range a.MaintenanceWindows {
		if err := w.Validate(); err != nil {
			add("maintenance_windows[%d]: %w", i, err)
		}
	}
	if err := CheckLabels(a.Labels); err != nil {
		add("labels: %w", err)
	}
	return errs
}

// adder collects one validation error.
type adder func(format string, args ...any)

// validateEndpoints checks the identity, server, spool, intervals and web
// keys.
func (a Agent) validateEndpoints(add adder) {
	if a.AgentID != "" && (len(a.AgentID) > 128 || strings.ContainsAny(a.AgentID, " \t\n/")) {
		add("agent_id %q: want up to 128 characters without spaces or slashes", a.AgentID)
	}
	if s := a.Server.Address; s != "" {
		if host, port, err := net.SplitHostPort(s); err != nil || host == "" || port == "" {
			add("server.address %q: want host:port", s)
		}
	}
	for i, s := range a.Server.Addresses {
		if host, port, err := net.SplitHostPort(s); err != nil || host == "" || port == "" {
			add("server.addresses[%d] %q: want host:port", i, s)
		}
	}
	if a.Spool.MaxBytes < MinSpoolMaxBytes {
		add("spool.max_bytes %s: want at least %s", a.Spool.MaxBytes, MinSpoolMaxBytes)
	}
	a.Intervals.validate(add)
	if s := a.Web.ListenAddress; s != "" {
		host, _, err := net.SplitHostPort(s)
		switch {
		case err != nil:
			add("web.listen_address %q: want host:port", s)
		case !a.Web.AllowNonLoopback && !isLoopback(host):
			add("web.listen_address %q: not a loopback address (use 127.0.0.1, ::1 or localhost, or set web.allow_non_loopback)", s)
		}
	}
}

func (iv Intervals) validate(add adder) {
	if iv.GeometryRefresh < time.Second {
		add("intervals.geometry_refresh %s: want at least 1s", iv.GeometryRefresh)
	}
	if iv.Report < 100*time.Millisecond {
		add("intervals.report %s: want at least 100ms", iv.Report)
	}
}

// validate checks one schedule, named w in messages; seen holds the
// (mount_point, kind) pairs of the schedules before it.
func (p ProbeSchedule) validate(w string, seen map[string]bool, add adder) {
	if !geometry.ValidMountGlob(p.MountPoint) {
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

// ValidateRun checks what `agent run` needs on top of Validate: a server to
// report to, its TLS files (unless server.insecure) and a spool directory.
func (a Agent) ValidateRun() error {
	var errs []error
	if err := a.Validate(); err != nil {
		errs = append(errs, err)
	}
	var missing []error
	if len(a.Server.Targets()) == 0 {
		missing = append(missing, errors.New("server.address: required (or server.addresses)"))
	}
	if !a.Server.Insecure {
		t := a.Server.TLS
		for _, f := range []struct{ key, v string }{{"ca_file", t.CAFile}, {"cert_file", t.CertFile}, {"key_file", t.KeyFile}} {
			if f.v == "" {
				missing = append(missing, fmt.Errorf("server.tls.%s: required (or server.insecure: true, for tests only)", f.key))
			}
		}
	}
	if a.Spool.Dir == "" {
		missing = append(missing, errors.New("spool.dir: required"))
	}
	if len(missing) > 0 {
		errs = append(errs, fmt.Errorf("%w: %w", ErrInvalid, errors.Join(missing...)))
	}
	return errors.Join(errs...)
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
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
