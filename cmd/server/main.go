// Command server is Plumbline's central server: it ingests agent reports
// over gRPC with mutual TLS, keeps the fleet's inventory in a store
// (SQLite by default, PostgreSQL at scale) and serves it over HTTP.
//
//	server --config FILE [flags]
//	server --dev --data-dir DIR      a local CA, certificates and a ready agent config under DIR
//
// Flags override the configuration file (deploy/examples/server.yaml
// documents every key):
//
//	--config FILE                 YAML configuration; unknown keys are errors
//	--config.check                validate the configuration (and TLS files) and exit
//	--data-dir DIR                data directory (default /var/lib/plumbline)
//	--store.dsn DSN               sqlite:///path/file.db or postgres://... (default sqlite under --data-dir)
//	--grpc.listen-address ADDR    agent gRPC listener (default :7443; --dev: 127.0.0.1:7443)
//	--grpc.tls.cert-file FILE     server certificate
//	--grpc.tls.key-file FILE      server key
//	--grpc.tls.client-ca-file F   CA that signs agent certificates
//	--web.listen-address ADDR     HTTP API and health (default :9464; --dev: 127.0.0.1:9464)
//	--insecure                    plaintext gRPC, agent ids taken on trust (logs a warning)
//	--baseline.interval DUR       how often the baseline evaluator judges new probe results (default 30s)
//	--dev                         development mode (see above)
//	--log.level LEVEL, --log.format text|json
//
// Identity: an agent is who its client certificate says — the URI SAN
// plumbline://agent/<id> when present, else the subject CN — and may report
// only for itself (ingest.AgentIdentity).
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/plumbline/plumbline/internal/evaluator"
	"github.com/plumbline/plumbline/internal/exporter"
	"github.com/plumbline/plumbline/internal/ingest"
	"github.com/plumbline/plumbline/internal/inventory"
	"github.com/plumbline/plumbline/internal/store"
	"github.com/plumbline/plumbline/internal/strictyaml"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return runContext(ctx, args, stdout, stderr, nil)
}

// listening is told the bound addresses once the server serves (tests).
type listening func(grpcAddr, webAddr string)

// runContext is run with the caller's context: the server stops when it
// is cancelled.
func runContext(ctx context.Context, args []string, stdout, stderr io.Writer, ready listening) int {
	if len(args) > 0 && args[0] == "inventory" {
		return runInventory(ctx, args[1:], stdout, stderr)
	}
	cfg, check, err := parseFlags(args, stdout, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if errors.Is(err, errVersion) {
		fmt.Fprintln(stdout, "plumbline server", version)
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "server: %v\n", err)
		return 2
	}
	logger := newLogger(stderr, cfg.Log)
	if check {
		if err := checkConfig(cfg); err != nil {
			fmt.Fprintf(stderr, "server: %v\n", err)
			return 1
		}
		fmt.Fprintln(stdout, "configuration OK")
		return 0
	}
	if err := serve(ctx, cfg, stdout, logger, ready); err != nil {
		logger.Error("server stopped", "err", err)
		return 1
	}
	return 0
}

var errVersion = errors.New("version")

// parseFlags builds the configuration: defaults, the --config file, then
// the flags given on the command line.
func parseFlags(args []string, stdout, stderr io.Writer) (Config, bool, error) {
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		configFile = fs.String("config", "", "YAML configuration `file` (unknown keys are errors)")
		check      = fs.Bool("config.check", false, "validate the configuration and its TLS files, then exit")
		dev        = fs.Bool("dev", false, "development mode: SQLite, a local CA and certificates and a ready agent config (DIR/dev/agent.yaml) under --data-dir; loopback listeners")
		showVer    = fs.Bool("version", false, "print the version and exit")
		d          = DefaultConfig()
		dataDir    = fs.String("data-dir", d.DataDir, "data `directory`: the SQLite database, and in --dev mode the CA, certificates and agent config")
		dsn        = fs.String("store.dsn", "", "store `DSN`: sqlite:///path/file.db or postgres://user@host/db (default: sqlite under --data-dir)")
		grpcAddr   = fs.String("grpc.listen-address", d.GRPC.ListenAddress, "agent gRPC listen `address` (--dev default: "+devGRPCAddress+")")
		certFile   = fs.String("grpc.tls.cert-file", "", "server certificate `file` (PEM)")
		keyFile    = fs.String("grpc.tls.key-file", "", "server key `file` (PEM)")
		clientCA   = fs.String("grpc.tls.client-ca-file", "", "`file` of the CA(s) that sign agent certificates (PEM)")
		webAddr    = fs.String("web.listen-address", d.Web.ListenAddress, "HTTP API listen `address` (--dev default: "+devWebAddress+")")
		webConfig  = fs.String("web.config.file", "", "exporter-toolkit web configuration `file`: TLS and basic auth for the HTTP listener")
		insecure   = fs.Bool("insecure", false, "serve gRPC in plaintext and trust each request's agent_id (testing only)")
		baseIval   = fs.Duration("baseline.interval", defaultBaselineInterval, "how often the baseline evaluator judges new probe results")
		logLevel   = fs.String("log.level", d.Log.Level, "log `level`: debug, info, warn, error")
		logFormat  = fs.String("log.format", d.Log.Format, "log `format`: text or json")
		pprofAddr  = fs.String("debug.pprof-listen-address", "", "serve net/http/pprof on this `address` (a separate listener, no authentication: keep it on loopback; default: off)")
	)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "usage: server --config FILE [flags]\n       server --dev --data-dir DIR\n       server inventory list|summary [--url URL] [--token-file FILE] [--verdict misaligned ...]\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return Config{}, false, err
	}
	if fs.NArg() > 0 {
		return Config{}, false, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *showVer {
		return Config{}, false, errVersion
	}
	cfg := DefaultConfig()
	var lines map[string]int // the file's lines by key path, for Validate's errors
	if *configFile != "" {
		var err error
		if cfg, lines, err = loadConfigLines(*configFile); err != nil {
			return Config{}, false, err
		}
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	cfg.Dev = *dev
	cfg.BaselineInterval = *baseIval
	cfg.PprofAddress = *pprofAddr
	if cfg.BaselineInterval <= 0 {
		return Config{}, false, fmt.Errorf("--baseline.interval %s: want a positive duration", cfg.BaselineInterval)
	}
	if cfg.Dev {
		// Loopback unless told otherwise.
		if !set["grpc.listen-address"] && cfg.GRPC.ListenAddress == defaultGRPCAddress {
			cfg.GRPC.ListenAddress = devGRPCAddress
		}
		if !set["web.listen-address"] && cfg.Web.ListenAddress == defaultWebAddress {
			cfg.Web.ListenAddress = devWebAddress
		}
		if !set["data-dir"] && cfg.DataDir == defaultDataDir {
			return Config{}, false, errors.New("--dev needs --data-dir DIR (where the database, the dev CA and DIR/dev/agent.yaml go)")
		}
	}
	// Each flag that overrides a key: its value applies, and a line of the
	// file no longer explains that key.
	for name, o := range map[string]struct {
		key   string
		apply func()
	}{
		"data-dir":                {"data_dir", func() { cfg.DataDir = *dataDir }},
		"store.dsn":               {"store.dsn", func() { cfg.Store.DSN = *dsn }},
		"grpc.listen-address":     {"grpc.listen_address", func() { cfg.GRPC.ListenAddress = *grpcAddr }},
		"grpc.tls.cert-file":      {"grpc.tls.cert_file", func() { cfg.GRPC.TLS.CertFile = *certFile }},
		"grpc.tls.key-file":       {"grpc.tls.key_file", func() { cfg.GRPC.TLS.KeyFile = *keyFile }},
		"grpc.tls.client-ca-file": {"grpc.tls.client_ca_file", func() { cfg.GRPC.TLS.ClientCAFile = *clientCA }},
		"web.listen-address":      {"web.listen_address", func() { cfg.Web.ListenAddress = *webAddr }},
		"web.config.file":         {"web.config_file", func() { cfg.Web.ConfigFile = *webConfig }},
		"insecure":                {"grpc.insecure", func() { cfg.GRPC.Insecure = *insecure }},
		"log.level":               {"log.level", func() { cfg.Log.Level = *logLevel }},
		"log.format":              {"log.format", func() { cfg.Log.Format = *logFormat }},
	} {
		if set[name] {
			o.apply()
			if lines != nil {
				lines[o.key] = 0 // the flag's value, not the file's
			}
		}
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, false, fmt.Errorf("configuration: %w", strictyaml.WithLines(err, lines))
	}
	return cfg, *check, nil
}

func newLogger(w io.Writer, c LogConfig) *slog.Logger {
	var level slog.Level
	level.UnmarshalText([]byte(c.Level)) // validated
	opts := &slog.HandlerOptions{Level: level}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// checkConfig is --config.check: what Validate checks, plus the TLS files
// and the bearer token file are readable and well-formed.
func checkConfig(cfg Config) error {
	if !cfg.Dev && !cfg.GRPC.Insecure {
		if _, err := ingest.ServerTLSConfig(cfg.GRPC.TLS.CertFile, cfg.GRPC.TLS.KeyFile, cfg.GRPC.TLS.ClientCAFile); err != nil {
			return err
		}
	}
	if _, err := apiTokens(cfg); err != nil {
		return err
	}
	return checkWebConfig(cfg)
}

// serve runs the server until ctx is cancelled, then stops it gracefully.
func serve(ctx context.Context, cfg Config, stdout io.Writer, logger *slog.Logger, ready listening) error {
	var dev devLayout
	if cfg.Dev {
		var err error
		if dev, err = prepareDev(&cfg); err != nil {
			return err
		}
	} else if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil && cfg.Store.DSN == "" {
		return fmt.Errorf("data dir: %w", err)
	}
	tokens, err := apiTokens(cfg)
	if err != nil {
		return err
	}
	if err := checkWebConfig(cfg); err != nil {
		return err
	}
	warnOpenAPI(cfg, tokens, logger)

	svcOpts := ingest.Options{
		Limits:                  ingest.Limits{MaxBatchRecords: cfg.GRPC.MaxBatch},
		MaxRecvMsgSize:          int(cfg.GRPC.MaxRecvSize),
		MaxConcurrentStreams:    cfg.GRPC.MaxConcurrentStreams,
		MaxInflightBytes:        int64(cfg.GRPC.MaxInflightBytes),
		MaxAgentInflightBytes:   int64(cfg.GRPC.MaxAgentInflightBytes),
		GeometryRefreshInterval: cfg.Agents.GeometryRefreshInterval,
		ReportInterval:          cfg.Agents.ReportInterval,
		RatePerSecond:           cfg.GRPC.RateLimit.CallsPerSecond,
		RateBurst:               cfg.GRPC.RateLimit.Burst,
		Insecure:                cfg.GRPC.Insecure,
		Logger:                  logger,
	}
	if svcOpts.RatePerSecond == 0 {
		svcOpts.RatePerSecond = -1 // 0 in the config: off
	}
	var tlsConf *tls.Config
	if !cfg.GRPC.Insecure {
		c, err := ingest.ServerTLSConfig(cfg.GRPC.TLS.CertFile, cfg.GRPC.TLS.KeyFile, cfg.GRPC.TLS.ClientCAFile)
		if err != nil {
			return err
		}
		tlsConf = c
	} else {
		logger.Warn("INSECURE: gRPC is served in PLAINTEXT without client certificates; any client can report as any agent. Never use --insecure outside a test.")
	}

	dsn := cfg.StoreDSN()
	openCtx, cancel := context.WithTimeout(ctx, time.Minute)
	st, err := store.Open(openCtx, dsn)
	cancel()
	if err != nil {
		return err
	}
	defer st.Close()
	logger.Info("store open", "engine", st.Engine())
	// Stored verdicts follow this server's rules, also for volumes whose
	// agents send no new snapshot.
	rejudgeStart := time.Now()
	if changed, failed, err := st.RejudgeVolumes(ctx, ingest.Rejudge); err != nil {
		logger.Warn("re-judging stored volumes with the current alignment rules failed; they keep their verdicts until their next snapshot", "err", err)
	} else if changed > 0 || failed > 0 {
		logger.Info("re-judged stored volumes with the current alignment rules", "changed", changed, "undecodable", failed, "took", time.Since(rejudgeStart).Round(time.Millisecond))
	}

	svc := ingest.New(st, svcOpts)
	gs, hs, err := ingest.NewGRPCServer(svc, tlsConf)
	if err != nil {
		return err
	}
	gl, err := net.Listen("tcp", cfg.GRPC.ListenAddress)
	if err != nil {
		return fmt.Errorf("grpc listener: %w", err)
	}
	wl, err := net.Listen("tcp", cfg.Web.ListenAddress)
	if err != nil {
		gl.Close()
		return fmt.Errorf("web listener: %w", err)
	}
	api := inventory.New(st, inventory.Options{Tokens: tokens, Logger: logger.With("component", "inventory")})
	eval, err := evaluator.New(st, evaluator.Options{Interval: cfg.BaselineInterval, Logger: logger.With("component", "evaluator")})
	if err != nil {
		gl.Close()
		wl.Close()
		return err
	}
	metrics, err := metricsHandler(st, eval, cfg, tokens, logger)
	if err != nil {
		gl.Close()
		wl.Close()
		return err
	}
	web := http.NewServeMux()
	web.Handle("GET /metrics", metrics)
	web.Handle("/", api)
	hsrv := &http.Server{Handler: web, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}

	evalCtx, stopEval := context.WithCancel(context.Background())
	evalDone := make(chan struct{})
	go func() { defer close(evalDone); eval.Run(evalCtx) }()
	defer func() { stopEval(); <-evalDone }()
	// The inventory's full sync (requests sync incrementally).
	syncCtx, stopSync := context.WithCancel(context.Background())
	syncDone := make(chan struct{})
	go func() { defer close(syncDone); api.Run(syncCtx) }()
	defer func() { stopSync(); <-syncDone }()

	if cfg.PprofAddress != "" {
		stopPprof, _, err := startPprof(cfg.PprofAddress, logger)
		if err != nil {
			gl.Close()
			wl.Close()
			return err
		}
		defer stopPprof()
	}
	errc := make(chan error, 2)
	go func() { errc <- gs.Serve(gl) }()
	go func() {
		if err := serveWeb(wl, hsrv, cfg, logger); !errors.Is(err, http.ErrServerClosed) {
			errc <- err
			return
		}
		errc <- nil
	}()
	grpcAddr, webAddr := gl.Addr().String(), wl.Addr().String()
	logger.Info("serving", "grpc", grpcAddr, "http", webAddr, "tls", !cfg.GRPC.Insecure, "version", version)
	if cfg.Dev {
		agentAddr := agentAddress(gl.Addr())
		agentWeb := devAgentWebAddress(wl.Addr())
		if err := writeDevAgentConfig(dev, agentAddr, agentWeb, cfg.GRPC.Insecure); err != nil {
			gs.Stop()
			hsrv.Close()
			return fmt.Errorf("dev agent config: %w", err)
		}
		fmt.Fprintf(stdout, `plumbline server (dev mode)
  gRPC:          %s (agents dial %s)
  HTTP:          http://%s/api/v1/volumes
  data dir:      %s
  agent config:  %s (your keys: %s, never rewritten)
  agent web:     %s
  run an agent:  agent run --config %s
  dev CA:        %s (certificate and key; agents trust %s)
`, grpcAddr, agentAddr, webAddr, dev.dir, dev.agentYAML, dev.agentLocalYAML, orOff(agentWeb), dev.agentYAML, dev.caDir, dev.agentCA)
	} else {
		fmt.Fprintf(stdout, "plumbline server: gRPC %s, HTTP %s\n", grpcAddr, webAddr)
	}
	if ready != nil {
		ready(grpcAddr, webAddr)
	}

	var serveErr error
	select {
	case <-ctx.Done():
		logger.Info("stopping")
	case serveErr = <-errc:
		logger.Error("listener failed", "err", serveErr)
	}
	hs.Shutdown() // health: NOT_SERVING, so balancers move agents away
	shutdownCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	stopped := make(chan struct{})
	go func() { gs.GracefulStop(); close(stopped) }()
	if err := hsrv.Shutdown(shutdownCtx); err != nil {
		hsrv.Close()
	}
	select {
	case <-stopped:
	case <-shutdownCtx.Done():
		logger.Warn("graceful stop timed out; closing connections", "timeout", cfg.ShutdownTimeout)
		gs.Stop()
		<-stopped
	}
	logger.Info("stopped")
	return serveErr
}

func orOff(addr string) string {
	if addr == "" {
		return "off (no free loopback port)"
	}
	return "http://" + addr + "/metrics"
}

// defaultBaselineInterval is --baseline.interval's default.
const defaultBaselineInterval = 30 * time.Second

// metricsHandler serves /metrics: the exporter over the store, behind the
// same bearer-token check as the inventory API (inventory.RequireToken:
// any token of web.bearer_tokens or web.bearer_token_file).
func metricsHandler(st *store.Store, eval *evaluator.Evaluator, cfg Config, tokens []inventory.Token, logger *slog.Logger) (http.Handler, error) {
	stale := 3 * cfg.Agents.ReportInterval
	if stale < time.Minute {
		stale = time.Minute
	}
	c, err := exporter.New(st, exporter.Options{
		AgentStaleAfter: stale,
		Evaluator: func() exporter.EvaluatorStatus {
			s := eval.Status()
			return exporter.EvaluatorStatus{LastSuccess: s.LastSuccess, Passes: s.Passes, Runs: s.Runs, Failures: s.Failures}
		},
		MaxAge: cfg.BaselineInterval, // a change nothing signals shows within one evaluator interval
		Logger: logger.With("component", "exporter"),
	})
	if err != nil {
		return nil, err
	}
	h, err := exporter.Handler(c)
	if err != nil {
		return nil, err
	}
	return inventory.RequireToken(tokens, h), nil
}
