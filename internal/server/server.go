// Package server is Plumbline's central server: it ingests agent reports
// over gRPC with mutual TLS, keeps the fleet's inventory in a store and
// serves the inventory API and /metrics over HTTP. A Server owns its
// listeners and goroutines: Run returns when all of them have stopped.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"

	"github.com/plumbline/plumbline/internal/policy"
	"github.com/plumbline/plumbline/internal/selfmetrics"
	"github.com/plumbline/plumbline/internal/server/authority"
	"github.com/plumbline/plumbline/internal/server/config"
	"github.com/plumbline/plumbline/internal/server/evaluator"
	"github.com/plumbline/plumbline/internal/server/exporter"
	"github.com/plumbline/plumbline/internal/server/ingest"
	"github.com/plumbline/plumbline/internal/server/inventory"
	"github.com/plumbline/plumbline/internal/server/leader"
	"github.com/plumbline/plumbline/internal/server/members"
	"github.com/plumbline/plumbline/internal/server/projection"
	"github.com/plumbline/plumbline/internal/server/store"
)

// Options are what a Server needs besides its configuration.
type Options struct {
	// Stdout gets the start banner (addresses, in dev mode the paths of
	// the agent config and the dev CA); nil: none.
	Stdout io.Writer
	// Version is logged when the server serves.
	Version string
	// Ready is told the bound addresses once the server serves (tests).
	Ready func(grpcAddr, webAddr string)
}

// Server is one configured server; Run serves it.
type Server struct {
	cfg    config.Config
	logger *slog.Logger
	opts   Options
}

// New checks what can be checked before serving. cfg must be valid
// (config.Config.Validate).
func New(cfg config.Config, logger *slog.Logger, opts Options) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("configuration: %w", err)
	}
	if opts.Stdout == nil {
		opts.Stdout = io.Discard
	}
	return &Server{cfg: cfg, logger: logger, opts: opts}, nil
}

// Check is --config.check: what Validate checks, plus the TLS files and
// the bearer token files are readable and well-formed.
func Check(cfg config.Config) error {
	if !cfg.Dev && !cfg.GRPC.Insecure {
		if _, err := ingest.ServerTLSConfig(cfg.GRPC.TLS.CertFile, cfg.GRPC.TLS.KeyFile, cfg.GRPC.TLS.ClientCAFile); err != nil {
			return err
		}
	}
	if _, err := apiTokens(cfg); err != nil {
		return err
	}
	if cfg.Enrollment.CACertFile != "" {
		files, _ := EnrollmentFiles(cfg)
		if _, err := authority.LoadCA(files); err != nil {
			return fmt.Errorf("enrollment: %w", err)
		}
	}
	return checkWebConfig(cfg)
}

// Run serves until ctx is cancelled or a listener fails, then stops
// gracefully (bounded by shutdown_timeout) and returns once every
// goroutine it started has returned.
func (s *Server) Run(ctx context.Context) error {
	cfg, logger := s.cfg, s.logger
	dev, tokens, tlsConf, err := prepare(&cfg, logger)
	if err != nil {
		return err
	}
	st, err := openStore(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer st.Close()

	p, err := assemble(st, cfg, tokens, tlsConf, s.opts.Version, logger)
	if err != nil {
		return err
	}
	gl, wl, closeListeners, err := listen(cfg)
	if err != nil {
		return err
	}
	defer closeListeners() // closing a listener a server has closed is harmless
	if cfg.PprofAddress != "" {
		stopPprof, _, err := startPprof(cfg.PprofAddress, logger)
		if err != nil {
			return err
		}
		defer stopPprof()
	}

	// The background loops stop after the listeners, when Run returns.
	bg, stopBG := context.WithCancel(context.Background())
	var loops sync.WaitGroup
	loops.Go(func() { p.elector.Run(bg, p.loops...) })
	for _, run := range p.everywhere {
		loops.Go(func() { run(bg) })
	}
	defer func() { stopBG(); loops.Wait() }()

	return s.serve(ctx, cfg, dev, p, gl, wl)
}

// parts are what a running server is made of.
type parts struct {
	gs         *grpc.Server
	hs         *health.Server
	hsrv       *http.Server
	elector    *leader.Elector
	loops      []leader.Loop           // on the elected replica
	everywhere []func(context.Context) // on every replica
}

// assemble builds the gRPC ingest service (with enrollment), the HTTP
// side and the background loops with their election.
// version is the binary's, for plumbline_build_info.
func assemble(st *store.Store, cfg config.Config, tokens []inventory.Token, tlsConf *tls.Config, version string, logger *slog.Logger) (parts, error) {
	var p parts
	enr, err := newEnrollment(cfg, st, tlsConf, logger)
	if err != nil {
		return p, err
	}
	pol := policy.NewSource(cfg.Policies)
	judge, err := ingest.NewJudge(st, ingest.JudgeOptions{Logger: logger.With("component", "judge")})
	if err != nil {
		return p, err
	}
	io := ingestOptions(cfg, logger, pol)
	io.Judge = judge
	svc := ingest.New(st, enr.ingestOptions(io))
	if p.gs, p.hs, err = ingest.NewGRPCServer(svc, tlsConf); err != nil {
		return p, err
	}
	enr.register(p.gs)
	p.elector = elector(st, cfg, logger)
	// The inventory's read model: ingest writes it; the projection's repair
	// loop runs on the elected replica; every replica's API keeps its own
	// summary index, built off the request path.
	proj := projection.New(st, projection.Options{Logger: logger.With("component", "projection")})
	api := inventory.New(st, inventory.Options{Tokens: tokens, Projection: proj, Logger: logger.With("component", "inventory"), ReadyChecks: enr.readyChecks()})
	pruner := newPruner(st, cfg, logger)
	memberJudge := members.New(st, members.Options{Logger: logger.With("component", "members")})
	// The server's own series beside the exporter's: the election's, the
	// loops', admission's and the process's.
	own := append([]prometheus.Collector{p.elector, pruner, memberJudge, proj, svc.AdmissionCollector()}, selfmetrics.Collectors(version)...)
	own = append(own, enr.collectors()...)
	own = append(own, newCertExpiry(cfg))
	evals, hsrv, err := webServer(st, cfg, tokens, api, policy.Handler(pol, svc.PolicyReports), own, logger)
	if err != nil {
		return p, err
	}
	p.hsrv = hsrv
	p.loops = []leader.Loop{
		{Name: LoopEvaluator, Run: evals.run},
		{Name: LoopInventory, Run: proj.Run},
		{Name: LoopJudge, Run: judge.Run},
		{Name: LoopRetention, Run: pruner.Run},
		{Name: LoopMembers, Run: memberJudge.Run},
	}
	p.everywhere = []func(context.Context){
		api.Run,           // this replica's cached summaries
		svc.RunHeartbeats, // this replica's connected agents are up
		func(ctx context.Context) { watchPolicies(ctx, cfg, pol, logger) }, // each replica serves its own configuration's policies
	}
	return p, nil
}

// listen opens the gRPC and the web listeners; close closes both.
func listen(cfg config.Config) (grpcL, webL net.Listener, close func(), err error) {
	gl, err := net.Listen("tcp", cfg.GRPC.ListenAddress)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("grpc listener: %w", err)
	}
	wl, err := net.Listen("tcp", cfg.Web.ListenAddress)
	if err != nil {
		gl.Close()
		return nil, nil, nil, fmt.Errorf("web listener: %w", err)
	}
	return gl, wl, func() { gl.Close(); wl.Close() }, nil
}

// serve serves the listeners until ctx is done or one fails (the first
// to fail stops the others), then stops both servers.
func (s *Server) serve(ctx context.Context, cfg config.Config, dev devLayout, p parts, gl, wl net.Listener) error {
	logger := s.logger
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return p.gs.Serve(gl) })
	g.Go(func() error {
		if err := serveWeb(wl, p.hsrv, cfg, logger); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	serveErr := s.announce(cfg, dev, gl.Addr(), wl.Addr())
	failed := false // a listener failed (not asked to stop)
	if serveErr == nil {
		<-gctx.Done()
		if failed = ctx.Err() == nil; !failed {
			logger.Info("stopping")
		}
	}
	p.hs.Shutdown() // health: NOT_SERVING, so balancers move agents away
	s.stop(p.gs.GracefulStop, p.gs.Stop, p.hsrv)
	// Once asked to stop, a listener's error is the stop's (gRPC's Serve
	// says ErrServerStopped when the stop came first): only a failure
	// before it is the server's.
	if err := g.Wait(); failed {
		logger.Error("listener failed", "err", err)
		serveErr = err
	}
	logger.Info("stopped")
	return serveErr
}

// prepare is what comes before the store: in dev mode the CA,
// certificates and directories (and cfg's TLS files pointed at them), the
// data directory, the API tokens, the web config check and the gRPC TLS
// configuration.
func prepare(cfg *config.Config, logger *slog.Logger) (devLayout, []inventory.Token, *tls.Config, error) {
	var dev devLayout
	if cfg.Dev {
		var err error
		if dev, err = prepareDev(cfg); err != nil {
			return dev, nil, nil, err
		}
	} else if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil && cfg.Store.DSN == "" {
		return dev, nil, nil, fmt.Errorf("data dir: %w", err)
	}
	tokens, err := apiTokens(*cfg)
	if err != nil {
		return dev, nil, nil, err
	}
	if err := checkWebConfig(*cfg); err != nil {
		return dev, nil, nil, err
	}
	warnOpenAPI(*cfg, tokens, logger)
	tlsConf, err := grpcTLS(*cfg, logger)
	return dev, tokens, tlsConf, err
}

// webServer is the HTTP side: the inventory API, the policy API and
// /metrics (the exporter, fed by the evaluators' status, and the
// election's gauges), and the loops they need run.
func webServer(st *store.Store, cfg config.Config, tokens []inventory.Token, api *inventory.API, policyAPI http.Handler, own []prometheus.Collector, logger *slog.Logger) (*evaluators, *http.Server, error) {
	evals, err := newEvaluators(st, evaluator.Options{Interval: cfg.BaselineInterval, Logger: logger.With("component", "evaluator")})
	if err != nil {
		return nil, nil, err
	}
	metrics, err := metricsHandler(st, evals, own, cfg, tokens, logger)
	if err != nil {
		return nil, nil, err
	}
	web := webRoutes(tokens, api, metrics, policyAPI)
	return evals, &http.Server{Handler: web, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}, nil
}

// webRoutes is the web listener's router: /metrics, the policy API and
// the inventory API (which serves /healthz, /readyz and the index too).
func webRoutes(tokens []inventory.Token, api *inventory.API, metrics, policyAPI http.Handler) *webMux {
	web := newWebMux(tokens)
	web.handle("/metrics", true, metrics, http.MethodGet)
	web.handle("/api/v1/hosts/{host}/policy", true, policyAPI, http.MethodGet)
	web.handle("/api/v1/policies", true, policyAPI, http.MethodGet)
	web.fallback(api)
	return web
}

// watchPolicies re-reads the configuration file's policies until ctx
// ends (no file: nothing to re-read).
func watchPolicies(ctx context.Context, cfg config.Config, pol *policy.Source, logger *slog.Logger) {
	if cfg.File != "" {
		pol.WatchFile(ctx, cfg.File, cfg.PolicyReloadInterval, config.LoadPolicies, logger)
	}
}

// grpcTLS is the gRPC listener's mutual TLS configuration; nil (and a
// warning) with grpc.insecure.
func grpcTLS(cfg config.Config, logger *slog.Logger) (*tls.Config, error) {
	if cfg.GRPC.Insecure {
		logger.Warn("INSECURE: gRPC is served in PLAINTEXT without client certificates (grpc.insecure: true or --insecure); any client can report as any agent. "+
			"Never use it outside a test: create a CA and a server certificate (server ca init --dir /etc/plumbline/pki --name $(hostname -f)) and set grpc.tls.cert_file, key_file, client_ca_file and enrollment.ca_cert_file, ca_key_file as it prints",
			"address", cfg.GRPC.ListenAddress)
		return nil, nil
	}
	return ingest.ServerTLSConfig(cfg.GRPC.TLS.CertFile, cfg.GRPC.TLS.KeyFile, cfg.GRPC.TLS.ClientCAFile)
}

// ingestOptions are the ingest service's limits from the configuration,
// and the central policy it hands agents.
func ingestOptions(cfg config.Config, logger *slog.Logger, pol *policy.Source) ingest.Options {
	o := ingest.Options{
		Policy:                    pol,
		Limits:                    ingest.Limits{MaxBatchRecords: cfg.GRPC.MaxBatch},
		Quota:                     cfg.GRPC.Quota.Ingest(),
		MaxRecvMsgSize:            int(cfg.GRPC.MaxRecvSize),
		MaxConcurrentStreams:      cfg.GRPC.MaxConcurrentStreams,
		MaxInflightBytes:          int64(cfg.GRPC.MaxInflightBytes),
		MaxAgentInflightBytes:     int64(cfg.GRPC.MaxAgentInflightBytes),
		MaxPendingReports:         cfg.GRPC.MaxPendingReports,
		MaxLongPolls:              cfg.GRPC.MaxLongPolls,
		MaxAnonymousInflightBytes: int64(cfg.GRPC.MaxAnonymousInflightBytes),
		MessageReadTimeout:        cfg.GRPC.MessageReadTimeout,
		RenewRatePerSecond:        config.Off(cfg.Enrollment.RenewRateLimitPerAgent.CallsPerSecond),
		RenewBurst:                cfg.Enrollment.RenewRateLimitPerAgent.Burst,
		AddressRatePerSecond:      config.Off(cfg.Enrollment.RateLimitPerAddress.CallsPerSecond),
		AddressBurst:              cfg.Enrollment.RateLimitPerAddress.Burst,
		GeometryRefreshInterval:   cfg.Agents.GeometryRefreshInterval,
		ReportInterval:            cfg.Agents.ReportInterval,
		AgentDownAfter:            cfg.Agents.DownThreshold(),
		RatePerSecond:             cfg.GRPC.RateLimit.CallsPerSecond,
		RateBurst:                 cfg.GRPC.RateLimit.Burst,
		Insecure:                  cfg.GRPC.Insecure,
		Logger:                    logger,
	}
	o.RatePerSecond = config.Off(o.RatePerSecond)
	return o
}

// openStore opens the store. (The judge's loop, on the elected replica,
// judges the stored volumes again under this server's rules.)
func openStore(ctx context.Context, cfg config.Config, logger *slog.Logger) (*store.Store, error) {
	openCtx, cancel := context.WithTimeout(ctx, time.Minute)
	st, err := store.Open(openCtx, cfg.StoreDSN())
	cancel()
	if err != nil {
		return nil, err
	}
	logger.Info("store open", "engine", st.Engine())
	return st, nil
}

// announce logs and prints the bound addresses, in dev mode writes the
// agent config for them, and tells Options.Ready.
func (s *Server) announce(cfg config.Config, dev devLayout, gAddr, wAddr net.Addr) error {
	grpcAddr, webAddr := gAddr.String(), wAddr.String()
	s.logger.Info("serving", "grpc", grpcAddr, "http", webAddr, "tls", !cfg.GRPC.Insecure, "version", s.opts.Version)
	if cfg.Dev {
		agentAddr := agentAddress(gAddr)
		agentWeb := devAgentWebAddress(wAddr)
		if err := writeDevAgentConfig(dev, agentAddr, agentWeb, cfg.GRPC.Insecure); err != nil {
			return fmt.Errorf("dev agent config: %w", err)
		}
		fmt.Fprintf(s.opts.Stdout, `plumbline server (dev mode)
  gRPC:          %s (agents dial %s)
  HTTP:          http://%s/api/v1/volumes
  data dir:      %s
  agent config:  %s (your keys: %s, never rewritten)
  agent web:     %s
  run an agent:  agent run --config %s
  dev CA:        %s (certificate and key; agents trust %s)
`, grpcAddr, agentAddr, webAddr, dev.dir, dev.agentYAML, dev.agentLocalYAML, orOff(agentWeb), dev.agentYAML, dev.caDir, dev.agentCA)
	} else {
		fmt.Fprintf(s.opts.Stdout, "plumbline server: gRPC %s, HTTP %s\n", grpcAddr, webAddr)
	}
	if s.opts.Ready != nil {
		s.opts.Ready(grpcAddr, webAddr)
	}
	return nil
}

// stop stops the gRPC and HTTP servers gracefully within shutdown_timeout,
// then closes the connections left.
func (s *Server) stop(gracefulStop, hardStop func(), hsrv *http.Server) {
	shutdownCtx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	stopped := make(chan struct{})
	go func() { gracefulStop(); close(stopped) }()
	if err := hsrv.Shutdown(shutdownCtx); err != nil {
		hsrv.Close()
	}
	select {
	case <-stopped:
	case <-shutdownCtx.Done():
		s.logger.Warn("graceful stop timed out; closing connections", "timeout", s.cfg.ShutdownTimeout)
		hardStop()
		<-stopped
	}
}

func orOff(addr string) string {
	if addr == "" {
		return "off (no free loopback port)"
	}
	return "http://" + addr + "/metrics"
}

// metricsHandler serves /metrics: the exporter over the store and the
// server's own collectors (own: in shard 0 only), behind the
// same bearer-token check as the inventory API (inventory.RequireToken:
// any token of web.bearer_tokens or web.bearer_token_file).
func metricsHandler(st exporter.Store, evals *evaluators, own []prometheus.Collector, cfg config.Config, tokens []inventory.Token, logger *slog.Logger) (http.Handler, error) {
	classic, err := exporter.ClassicBucketsNamed(cfg.Metrics.ClassicHistogramBuckets) // checked by Validate
	if err != nil {
		return nil, err
	}
	c, err := exporter.New(st, exporter.Options{
		ClassicBuckets:  classic,
		AgentStaleAfter: cfg.Agents.DownThreshold(),
		Evaluator: func() exporter.EvaluatorStatus {
			s := evals.status()
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
	extra := prometheus.NewRegistry()
	for _, c := range own {
		if err := extra.Register(c); err != nil {
			return nil, err
		}
	}
	withOwn := appendFamilies(h, extra, logger)
	return inventory.RequireToken(tokens, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if exporter.WithFleetSeries(r.URL.Query()) { // the server's own series go with the fleet-wide ones: shard 0
			withOwn.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})), nil
}
