// Package config loads and validates the server's YAML configuration file
// (deploy/examples/server.yaml documents every key), in the style of the
// agent's internal/agent/config: Default, Load, Validate, errors from
// strictyaml that name the key path and line. Flags override it (cmd/server).
package config

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/plumbline/plumbline/internal/bytesize"
	"github.com/plumbline/plumbline/internal/policy"
	"github.com/plumbline/plumbline/internal/server/exporter"
	"github.com/plumbline/plumbline/internal/server/ingest"
	"github.com/plumbline/plumbline/internal/strictyaml"
)

// Config is the server's configuration file (deploy/examples/server.yaml
// documents every key). Flags override it.
type Config struct {
	// DataDir holds the SQLite database (when store.dsn is empty) and, in
	// dev mode, the dev CA, certificates and the agent config.
	DataDir string      `yaml:"data_dir"`
	GRPC    GRPCConfig  `yaml:"grpc"`
	Web     WebConfig   `yaml:"web"`
	Store   StoreConfig `yaml:"store"`
	Agents  AgentConfig `yaml:"agents"`
	Log     LogConfig   `yaml:"log"`
	// Enrollment: join tokens and agent certificates signed by the
	// server (docs/install.md, "Enrollment").
	Enrollment EnrollmentConfig `yaml:"enrollment"`
	// ShutdownTimeout bounds the graceful stop on SIGINT/SIGTERM.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	// Policies is central policy: entries that select hosts and give them
	// probe schedules, declared devices, maintenance windows and intervals
	// (internal/policy; docs/policy.md).
	Policies []policy.Entry `yaml:"policies"`
	// PolicyReloadInterval is how often the configuration file is read
	// again for changed policies (default 10s); other keys need a restart.
	PolicyReloadInterval time.Duration `yaml:"policy_reload_interval"`
	// Metrics shapes the /metrics exposition.
	Metrics MetricsConfig `yaml:"metrics"`

	// File is the configuration file (set by Load), re-read for policies.
	File string `yaml:"-"`

	// Dev is set by --dev only.
	Dev bool `yaml:"-"`
	// BaselineInterval is set by --baseline.interval only.
	BaselineInterval time.Duration `yaml:"-"`
	// PprofAddress is set by --debug.pprof-listen-address only: a separate
	// listener serving net/http/pprof (empty: none).
	PprofAddress string `yaml:"-"`
}

// GRPCConfig is the agent-facing gRPC listener.
type GRPCConfig struct {
	ListenAddress string        `yaml:"listen_address"`
	TLS           TLSConfig     `yaml:"tls"`
	Insecure      bool          `yaml:"insecure"`
	MaxRecvSize   bytesize.Size `yaml:"max_recv_msg_size"`
	MaxBatch      int           `yaml:"max_batch_records"`
	RateLimit     RateConfig    `yaml:"rate_limit"`
	// Admission bounds (ingest.Options): calls per connection, bytes of
	// messages in flight server-wide and per agent (0: twice
	// max_recv_msg_size).
	MaxConcurrentStreams  uint32        `yaml:"max_concurrent_streams"`
	MaxInflightBytes      bytesize.Size `yaml:"max_inflight_bytes"`
	MaxAgentInflightBytes bytesize.Size `yaml:"max_agent_inflight_bytes"`
	// MaxPendingReports bounds the Report calls in progress: beyond it a
	// Report is refused before it is read, with a retry hint (0 in a
	// file: the default; -1: no bound). MaxLongPolls bounds one agent's
	// WatchPolicy calls waiting at once.
	MaxPendingReports int `yaml:"max_pending_reports"`
	MaxLongPolls      int `yaml:"max_long_polls_per_agent"`
	// MaxAnonymousInflightBytes bounds the bytes of messages held at once
	// for callers without a certificate (enrollment), apart from agents'
	// (at least max_recv_msg_size: ingest raises a smaller one).
	MaxAnonymousInflightBytes bytesize.Size `yaml:"max_anonymous_inflight_bytes"`
	// MessageReadTimeout bounds the time from a call's admission to its
	// message being read: a late one gives its reservations back.
	MessageReadTimeout time.Duration `yaml:"message_read_timeout"`
	// Quota bounds what each agent identity may store and send.
	Quota QuotaConfig `yaml:"quota"`
}

// QuotaConfig is grpc.quota: per agent identity, the bytes its records
// may cost per UTC day and its token bucket of records (0: no bound).
// A batch over either is refused with RESOURCE_EXHAUSTED, nothing of it
// stored; the agent keeps it in its spool and retries.
type QuotaConfig struct {
	MaxBytesPerDay   bytesize.Size `yaml:"max_bytes_per_day"`
	RecordsPerSecond float64       `yaml:"records_per_second"`
	RecordBurst      int           `yaml:"record_burst"`
}

// Ingest is the quota as ingest.Options take it (0 there is the default,
// so a bound turned off here is negative there).
func (q QuotaConfig) Ingest() ingest.Quota {
	return ingest.Quota{MaxBytesPerDay: int64(Off(float64(q.MaxBytesPerDay))), RecordsPerSecond: Off(q.RecordsPerSecond), RecordBurst: q.RecordBurst}
}

// Off is a bound of the configuration as ingest.Options takes it: 0 in the
// configuration turns the bound off (negative in ingest), where 0 in
// ingest.Options means its default.
func Off(v float64) float64 {
	if v == 0 {
		return -1
	}
	return v
}

// TLSConfig names the server's certificate and the CA that signs agent
// certificates.
type TLSConfig struct {
	CertFile     string `yaml:"cert_file"`
	KeyFile      string `yaml:"key_file"`
	ClientCAFile string `yaml:"client_ca_file"`
}

// EnrollmentConfig is the CA that signs enrolled agents' certificates.
// Enrollment is on when CACertFile is set, and in --dev mode (the dev CA).
type EnrollmentConfig struct {
	// CACertFile and CAKeyFile: a CA (typically an intermediate of the
	// operator's PKI) that grpc.tls.client_ca_file trusts.
	CACertFile string `yaml:"ca_cert_file"`
	CAKeyFile  string `yaml:"ca_key_file"`
	// TrustBundleFile: the CA(s) enrolling agents are given to verify the
	// server; empty: grpc.tls.client_ca_file.
	TrustBundleFile string `yaml:"trust_bundle_file"`
	// CertTTL is the lifetime of an agent certificate; agents renew at two
	// thirds of it.
	CertTTL time.Duration `yaml:"cert_ttl"`
	// RateLimit bounds enrollment and renewal calls, server-wide.
	RateLimit RateConfig `yaml:"rate_limit"`
	// RateLimitPerAddress bounds each source address's enrollment calls
	// (GetTrustBundle and Enroll together), RenewRateLimitPerAgent each
	// identity's renewals; calls_per_second 0 turns one off.
	RateLimitPerAddress    RateConfig `yaml:"rate_limit_per_address"`
	RenewRateLimitPerAgent RateConfig `yaml:"renew_rate_limit_per_agent"`
}

// EnrollmentEnabled says whether the server enrolls agents.
func (c Config) EnrollmentEnabled() bool {
	return !c.GRPC.Insecure && (c.Dev || c.Enrollment.CACertFile != "")
}

// RateConfig is the per-agent token bucket.
type RateConfig struct {
	CallsPerSecond float64 `yaml:"calls_per_second"`
	Burst          int     `yaml:"burst"`
}

// WebConfig is the HTTP listener (inventory API, health).
type WebConfig struct {
	ListenAddress string `yaml:"listen_address"`
	// BearerTokenFile holds one more API token (named "default").
	BearerTokenFile string `yaml:"bearer_token_file"`
	// BearerTokens are the inventory API's tokens; with any, /api/ needs
	// one of them, in --dev mode too.
	BearerTokens []TokenConfig `yaml:"bearer_tokens"`
	// ConfigFile is a Prometheus exporter-toolkit web configuration file:
	// TLS (tls_server_config) and basic auth (basic_auth_users) for the
	// whole HTTP listener, re-read on every request.
	ConfigFile string `yaml:"config_file"`
}

// TokenConfig is one API bearer token.
type TokenConfig struct {
	// Name says whose token it is (logs, revocation).
	Name string `yaml:"name"`
	// TokenFile holds the secret (surrounding white space is ignored).
	TokenFile string `yaml:"token_file"`
	// Role is read-only, the only role (and the default).
	Role string `yaml:"role"`
}

// StoreConfig names the database.
type StoreConfig struct {
	DSN string `yaml:"dsn"`
	// LeaseTTL is how long a replica leads a background loop without
	// renewing its lease (PostgreSQL; replicas on one database): the
	// bound on failover after a leader dies.
	LeaseTTL time.Duration `yaml:"lease_ttl"`
	// Retention is how long records (probe results, geometry snapshots,
	// rejected records) are kept; 0 keeps them for ever. What the
	// evaluator or the inventory has not read yet, and each volume's
	// latest geometry, are kept whatever their age (internal/server/retention).
	Retention time.Duration `yaml:"retention"`
}

// AgentConfig is what the server tells agents in HelloResponse, and when
// it counts one down.
type AgentConfig struct {
	GeometryRefreshInterval time.Duration `yaml:"geometry_refresh_interval"`
	ReportInterval          time.Duration `yaml:"report_interval"`
	// DownAfter is how long an agent with no open connection and no
	// report counts as up (plumbline_agent_up); 0: 3 × report_interval,
	// at least 1m (DownThreshold). A connected agent is up however idle
	// it is: the server notes its open connections every third of this,
	// and its keepalive closes a dead connection within two thirds.
	DownAfter time.Duration `yaml:"down_after"`
}

// DownThreshold is DownAfter, or its default: 3 × ReportInterval, at
// least a minute.
func (c AgentConfig) DownThreshold() time.Duration {
	if c.DownAfter > 0 {
		return c.DownAfter
	}
	return max(3*c.ReportInterval, time.Minute)
}

// MetricsConfig shapes the /metrics exposition.
type MetricsConfig struct {
	// ClassicHistogramBuckets is the classic bucket set of the probe
	// latency histograms (exporter.ClassicBucketsNamed): coarse (the
	// default, 6 bounds), fine (18) or none. The native buckets are
	// always there.
	ClassicHistogramBuckets string `yaml:"classic_histogram_buckets"`
}

// LogConfig chooses the log level and format.
type LogConfig struct {
	Level  string `yaml:"level"`
	Format string `yaml:"format"`
}

// Defaults.
const (
	DefaultGRPCAddress     = ":7443"
	DefaultWebAddress      = ":9464"
	DevGRPCAddress         = "127.0.0.1:7443"
	DevWebAddress          = "127.0.0.1:9464"
	DefaultDataDir         = "/var/lib/plumbline"
	DefaultShutdownTimeout = 15 * time.Second
	DefaultLeaseTTL        = 15 * time.Second
	// DefaultRetention is store.retention's default: 30 days.
	DefaultRetention = 30 * 24 * time.Hour
	// MinRetention is the shortest store.retention other than 0.
	MinRetention = time.Hour
	// DefaultCertTTL is enrollment.cert_ttl's default.
	DefaultCertTTL = 30 * 24 * time.Hour
	// DefaultBaselineInterval is --baseline.interval's default.
	DefaultBaselineInterval = 30 * time.Second
	// DefaultPolicyReloadInterval is policy_reload_interval's default.
	DefaultPolicyReloadInterval = 10 * time.Second
)

// Default is the configuration without a file or flags.
func Default() Config {
	return Config{
		DataDir: DefaultDataDir,
		GRPC: GRPCConfig{
			ListenAddress: DefaultGRPCAddress,
			MaxRecvSize:   ingest.DefaultMaxRecvMsgSize,
			MaxBatch:      ingest.DefaultLimits().MaxBatchRecords,
			RateLimit:     RateConfig{CallsPerSecond: 20, Burst: 40},

			MaxConcurrentStreams: ingest.DefaultMaxConcurrentStreams,
			MaxInflightBytes:     ingest.DefaultMaxInflightBytes,
			MaxPendingReports:    ingest.DefaultMaxPendingReports,
			MaxLongPolls:         ingest.DefaultMaxLongPolls,
			Quota: QuotaConfig{MaxBytesPerDay: ingest.DefaultMaxBytesPerDay,
				RecordsPerSecond: ingest.DefaultRecordsPerSecond, RecordBurst: ingest.DefaultRecordBurst},

			MaxAnonymousInflightBytes: ingest.DefaultMaxAnonymousInflightBytes,
			MessageReadTimeout:        ingest.DefaultMessageReadTimeout,
		},
		Web:     WebConfig{ListenAddress: DefaultWebAddress},
		Store:   StoreConfig{LeaseTTL: DefaultLeaseTTL, Retention: DefaultRetention},
		Agents:  AgentConfig{GeometryRefreshInterval: 15 * time.Minute, ReportInterval: 10 * time.Second},
		Log:     LogConfig{Level: "info", Format: "text"},
		Metrics: MetricsConfig{ClassicHistogramBuckets: exporter.ClassicCoarse},
		Enrollment: EnrollmentConfig{
			CertTTL: DefaultCertTTL, RateLimit: RateConfig{CallsPerSecond: 5, Burst: 50},
			RateLimitPerAddress:    RateConfig{CallsPerSecond: ingest.DefaultAddressRatePerSecond, Burst: ingest.DefaultAddressBurst},
			RenewRateLimitPerAgent: RateConfig{CallsPerSecond: ingest.DefaultRenewRatePerSecond, Burst: ingest.DefaultRenewBurst},
		},
		ShutdownTimeout: DefaultShutdownTimeout,

		PolicyReloadInterval: DefaultPolicyReloadInterval,
	}
}

// Load reads a YAML file over the defaults. Unknown keys are errors.
func Load(path string) (Config, error) {
	cfg, _, err := LoadLines(path)
	return cfg, err
}

// LoadLines is Load that also returns the line of each key
// path in the file, for Validate's errors (strictyaml.WithLines).
func LoadLines(path string) (Config, map[string]int, error) {
	cfg := Default()
	b, err := os.ReadFile(path)
	if err != nil {
		return cfg, nil, fmt.Errorf("config: %w", err)
	}
	if err := Decode(b, &cfg); err != nil {
		return cfg, nil, fmt.Errorf("config %s: %w", path, err)
	}
	cfg.File = path
	return cfg, strictyaml.Lines(b), nil
}

// LoadPolicies reads the policies of a configuration file, validated: the
// server's policy reload (policy.Source.WatchFile).
func LoadPolicies(path string) ([]policy.Entry, error) {
	cfg, lines, err := LoadLines(path)
	if err != nil {
		return nil, err
	}
	if err := policy.Validate(cfg.Policies); err != nil {
		return nil, fmt.Errorf("config %s: %w", path, strictyaml.WithLines(err, lines))
	}
	return cfg.Policies, nil
}

// Decode decodes b over cfg: errors name the key path and line
// (strictyaml); an empty file leaves the defaults.
func Decode(b []byte, cfg *Config) error {
	return strictyaml.Decode(b, cfg)
}

// validate checks the gRPC listener's limits.
func (g GRPCConfig) validate() []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if s := g.MaxRecvSize; s < 64<<10 || s > 256<<20 {
		bad("grpc.max_recv_msg_size %s: want 64KiB to 256MiB", s)
	}
	if n := g.MaxConcurrentStreams; n < 1 || n > 1000 {
		bad("grpc.max_concurrent_streams %d: want 1 to 1000", n)
	}
	if s := g.MaxInflightBytes; s < g.MaxRecvSize {
		bad("grpc.max_inflight_bytes %s: want at least grpc.max_recv_msg_size (%s)", s, g.MaxRecvSize)
	}
	if s := g.MaxAgentInflightBytes; s != 0 && (s < g.MaxRecvSize || s > g.MaxInflightBytes) {
		bad("grpc.max_agent_inflight_bytes %s: want 0 (twice max_recv_msg_size) or from grpc.max_recv_msg_size (%s) to grpc.max_inflight_bytes (%s)", s, g.MaxRecvSize, g.MaxInflightBytes)
	}
	if g.MaxPendingReports < -1 {
		bad("grpc.max_pending_reports %d: want -1 (no bound), 0 (the default, %d) or more", g.MaxPendingReports, ingest.DefaultMaxPendingReports)
	}
	if g.MaxLongPolls < 0 {
		bad("grpc.max_long_polls_per_agent %d: want 0 (the default, %d) or more", g.MaxLongPolls, ingest.DefaultMaxLongPolls)
	}
	if s := g.MaxAnonymousInflightBytes; s < MinAnonymousInflight || s > MaxAnonymousInflight {
		bad("grpc.max_anonymous_inflight_bytes %s: want %s to %s (below grpc.max_recv_msg_size it counts as that)", s, bytesize.Size(MinAnonymousInflight), bytesize.Size(MaxAnonymousInflight))
	}
	if d := g.MessageReadTimeout; d < time.Second || d > 10*time.Minute {
		bad("grpc.message_read_timeout %s: want 1s to 10m", d)
	}
	if g.MaxBatch < 1 || g.MaxBatch > 100_000 {
		bad("grpc.max_batch_records %d: want 1 to 100000", g.MaxBatch)
	}
	if g.RateLimit.CallsPerSecond < 0 {
		bad("grpc.rate_limit.calls_per_second %v: want 0 (off) or more", g.RateLimit.CallsPerSecond)
	}
	if g.RateLimit.CallsPerSecond > 0 && g.RateLimit.Burst < 1 {
		bad("grpc.rate_limit.burst %d: want at least 1", g.RateLimit.Burst)
	}
	if q := g.Quota; q.MaxBytesPerDay < 0 || q.MaxBytesPerDay > 0 && q.MaxBytesPerDay < 1<<20 {
		bad("grpc.quota.max_bytes_per_day %s: want 0 (no bound) or at least 1MiB", q.MaxBytesPerDay)
	}
	if q := g.Quota; q.RecordsPerSecond < 0 {
		bad("grpc.quota.records_per_second %v: want 0 (no bound) or more", q.RecordsPerSecond)
	}
	if q := g.Quota; q.RecordsPerSecond > 0 && q.RecordBurst < g.MaxBatch {
		bad("grpc.quota.record_burst %d: want at least grpc.max_batch_records (%d), or no batch could pass", q.RecordBurst, g.MaxBatch)
	}
	return errs
}

// StoreDSN is the configured DSN, or SQLite under the data directory.
func (c Config) StoreDSN() string {
	if c.Store.DSN != "" {
		return c.Store.DSN
	}
	return "sqlite://" + filepath.Join(c.DataDir, "plumbline.db")
}

// Validate checks the configuration as a whole (files are read later).
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.DataDir == "" {
		bad("data_dir is empty")
	}
	for name, addr := range map[string]string{"grpc.listen_address": c.GRPC.ListenAddress, "web.listen_address": c.Web.ListenAddress} {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			bad("%s %q: want host:port (%v)", name, addr, err)
		}
	}
	if c.GRPC.ListenAddress == c.Web.ListenAddress && !strings.HasSuffix(c.GRPC.ListenAddress, ":0") {
		bad("grpc.listen_address and web.listen_address are both %q", c.GRPC.ListenAddress)
	}
	if !c.Dev && !c.GRPC.Insecure {
		t := c.GRPC.TLS
		if t.CertFile == "" || t.KeyFile == "" || t.ClientCAFile == "" {
			bad("grpc.tls.cert_file, key_file and client_ca_file are required (mutual TLS is the default; --insecure serves plaintext, --dev makes a local CA)")
		}
	}
	errs = append(errs, c.GRPC.validate()...)
	if c.Agents.GeometryRefreshInterval < time.Minute {
		bad("agents.geometry_refresh_interval %s: want at least 1m", c.Agents.GeometryRefreshInterval)
	}
	if c.Agents.ReportInterval < time.Second {
		bad("agents.report_interval %s: want at least 1s", c.Agents.ReportInterval)
	}
	if d := c.Agents.DownAfter; d != 0 && (d < 3*time.Second || d < 2*c.Agents.ReportInterval) {
		bad("agents.down_after %s: want 0 (3 × report_interval, at least 1m) or at least 3s and twice report_interval", d)
	}
	names := map[string]bool{}
	for i, tk := range c.Web.BearerTokens {
		switch {
		case tk.Name == "":
			bad("web.bearer_tokens[%d].name is empty", i)
		case names[tk.Name]:
			bad("web.bearer_tokens[%d].name %q: used twice", i, tk.Name)
		}
		names[tk.Name] = true
		if tk.TokenFile == "" {
			bad("web.bearer_tokens[%d].token_file is empty", i)
		}
		if tk.Role != "" && tk.Role != "read-only" {
			bad("web.bearer_tokens[%d].role %q: want read-only (the only role)", i, tk.Role)
		}
	}
	if c.Dev && !Loopback(c.Web.ListenAddress) && len(c.Web.BearerTokens) == 0 && c.Web.BearerTokenFile == "" {
		bad("web.listen_address %q is not a loopback address: in --dev mode that needs web.bearer_tokens", c.Web.ListenAddress)
	}
	if c.Store.LeaseTTL < time.Second {
		bad("store.lease_ttl %s: want at least 1s", c.Store.LeaseTTL)
	}
	if r := c.Store.Retention; r != 0 && r < MinRetention {
		bad("store.retention %s: want 0 (keep for ever) or at least %s", r, MinRetention)
	}
	errs = append(errs, c.Enrollment.validate(c.GRPC.Insecure)...)
	if c.ShutdownTimeout <= 0 {
		bad("shutdown_timeout %s: want more than 0", c.ShutdownTimeout)
	}
	if c.PolicyReloadInterval < time.Second {
		bad("policy_reload_interval %s: want at least 1s", c.PolicyReloadInterval)
	}
	if err := policy.Validate(c.Policies); err != nil {
		errs = append(errs, err)
	}
	if _, err := exporter.ClassicBucketsNamed(c.Metrics.ClassicHistogramBuckets); err != nil {
		bad("metrics.classic_histogram_buckets %q: want one of %s", c.Metrics.ClassicHistogramBuckets, strings.Join(exporter.ClassicBucketSets(), ", "))
	}
	switch strings.ToLower(c.Log.Level) {
	case "debug", "info", "warn", "error":
	default:
		bad("log.level %q: want debug, info, warn or error", c.Log.Level)
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		bad("log.format %q: want text or json", c.Log.Format)
	}
	return errors.Join(errs...)
}

// Loopback says whether a listen address binds loopback only.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (e EnrollmentConfig) validate(insecure bool) []error {
	var errs []error
	if (e.CACertFile == "") != (e.CAKeyFile == "") {
		errs = append(errs, errors.New("enrollment.ca_cert_file and ca_key_file go together"))
	}
	if e.CACertFile != "" && insecure {
		errs = append(errs, errors.New("enrollment needs TLS: it cannot be combined with grpc.insecure"))
	}
	if e.CertTTL < time.Second || e.CertTTL > 5*365*24*time.Hour {
		errs = append(errs, fmt.Errorf("enrollment.cert_ttl %s: want 1s to 43800h (agents renew at two thirds of it)", e.CertTTL))
	}
	if e.RateLimit.CallsPerSecond <= 0 || e.RateLimit.Burst < 1 {
		errs = append(errs, fmt.Errorf("enrollment.rate_limit: calls_per_second %v and burst %d: want both above 0", e.RateLimit.CallsPerSecond, e.RateLimit.Burst))
	}
	errs = append(errs, e.RateLimitPerAddress.validate("enrollment.rate_limit_per_address")...)
	errs = append(errs, e.RenewRateLimitPerAgent.validate("enrollment.renew_rate_limit_per_agent")...)
	return errs
}

// grpc.max_anonymous_inflight_bytes's range. The pool holds at least one
// message: ingest raises a smaller one to grpc.max_recv_msg_size.
const (
	MinAnonymousInflight = 1 << 20
	MaxAnonymousInflight = 1 << 30
)

// validate checks a per-caller token bucket named key: calls_per_second
// 0 (off) to 1000, burst 1 to 100000 when on.
func (r RateConfig) validate(key string) []error {
	var errs []error
	if c := r.CallsPerSecond; c < 0 || c > 1000 {
		errs = append(errs, fmt.Errorf("%s.calls_per_second %v: want 0 (off) to 1000", key, c))
	}
	if r.CallsPerSecond > 0 && (r.Burst < 1 || r.Burst > 100_000) {
		errs = append(errs, fmt.Errorf("%s.burst %d: want 1 to 100000", key, r.Burst))
	}
	return errs
}
