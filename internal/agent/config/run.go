package config

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/plumbline/plumbline/internal/agentkeys"
	"github.com/plumbline/plumbline/internal/bytesize"
	"github.com/plumbline/plumbline/internal/labels"
)

// Defaults of the `agent run` keys.
//
// Probe schedule: every kind runs every 3 minutes with 50 operations —
// 20 runs × 50 = 1,000 operations (8 MB at 8 KiB) per kind per hour, the
// same I/O budget as one 1,000-op run an hour, but a sustained 2× slowdown
// is alerted within ~17 minutes instead of ~3 hours (docs/degradation.md, "Degradation
// on the lab"; internal/lab/replay measures both on recorded noise).
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
	MinSpoolMaxBytes       = 1 * bytesize.MiB
)

// The member I/O interval's default and bounds (agentkeys; 0s turns the
// sampling off).
const (
	DefaultMemberIOInterval = agentkeys.DefaultMemberIOInterval
	MinMemberIOInterval     = agentkeys.MinMemberIOInterval
	MaxMemberIOInterval     = agentkeys.MaxMemberIOInterval
)

// The keys central policy sets as well are agentkeys'; the names below
// keep them where the rest of the agent's configuration is.
type (
	ProbeSchedule  = agentkeys.ProbeSchedule
	MinFree        = agentkeys.MinFree
	DeclaredDevice = agentkeys.DeclaredDevice
	DeclaredRAID   = agentkeys.DeclaredRAID
	DatabaseSource = agentkeys.DatabaseSource
)

// Probe schedule defaults and limits (agentkeys).
const (
	DefaultProbeEvery = agentkeys.DefaultProbeEvery
	DefaultProbeOps   = agentkeys.DefaultProbeOps
	ProbeFileUnit     = agentkeys.ProbeFileUnit
	MinFreeAuto       = agentkeys.MinFreeAuto
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
	// MemberIO is how often the member devices under the volumes are
	// sampled (default 1m; 0s: off).
	MemberIO time.Duration `yaml:"member_io"`
}

// Web is the agent's own /healthz and /metrics endpoint.
type Web struct {
	// ListenAddress is host:port; empty: off. It must be a loopback address
	// unless AllowNonLoopback is set.
	ListenAddress    string `yaml:"listen_address,omitempty"`
	AllowNonLoopback bool   `yaml:"allow_non_loopback,omitempty"`
}

// WithDefaults is a with the defaults of list entries (probes) filled in,
// as Load fills them: for configuration built in code.
func WithDefaults(a Agent) Agent {
	a.applyDefaults()
	return a
}

// applyDefaults fills omitted keys of list entries (top-level defaults come
// from Default()).
func (a *Agent) applyDefaults() {
	a.Probes = agentkeys.WithDefaults(a.Probes)
	a.Databases = agentkeys.WithDatabaseDefaults(a.Databases)
}

// validateRun checks the `agent run` keys that are set.
func (a Agent) validateRun() []error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	a.validateEndpoints(add)
	errs = append(errs, agentkeys.ValidateProbes(a.Probes)...)
	errs = append(errs, agentkeys.ValidateDatabases(a.Databases)...)
	for i, w := range a.MaintenanceWindows {
		if err := w.Validate(); err != nil {
			add("maintenance_windows[%d]: %w", i, err)
		}
	}
	if err := labels.Check(a.Labels); err != nil {
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
	if d := iv.MemberIO; d != 0 && (d < MinMemberIOInterval || d > MaxMemberIOInterval) {
		add("intervals.member_io %s: want 0s (off) or %s to %s", d, MinMemberIOInterval, MaxMemberIOInterval)
	}
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
