package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"google.golang.org/grpc/credentials"

	"github.com/plumbline/plumbline/internal/agent"
	"github.com/plumbline/plumbline/internal/agent/config"
)

const runUsage = `usage: agent run --config FILE [--check | --print-config] [--path.sysfs DIR] [--path.procfs DIR]

Runs the agent: discovers geometry (at start, on mount-table change and every
intervals.geometry_refresh), runs the scheduled probes, spools every record
durably and reports to the server over gRPC with mutual TLS. SIGINT/SIGTERM
stop it cleanly. With --check it validates the configuration and exits:
0 valid, 1 invalid (the errors name the keys). With --print-config it prints
the effective configuration — the file merged with the central policy the
agent last received (kept in its spool directory) — and exits.

flags:
`

// runRun is `agent run`.
func runRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fl := newFlagSet("run", runUsage, stderr)
	var (
		configFile = fl.String("config", "", "agent config file (required)")
		check      = fl.Bool("check", false, "validate the config file and exit (0 valid, 1 invalid)")
		printCfg   = fl.Bool("print-config", false, "print the effective configuration (the file merged with the cached central policy) and exit")
		roots      = addHostRootFlags(fl)
	)
	if code, ok := parseFlags(fl, args); !ok {
		return code
	}
	if fl.NArg() > 0 || *configFile == "" {
		fl.Usage()
		return 2
	}
	cfg, err := config.LoadRun(*configFile)
	if err != nil {
		fmt.Fprintf(stderr, "agent run: %v\n", err)
		return 1
	}
	if *printCfg {
		b, err := agent.EffectiveConfig(cfg)
		if err != nil {
			fmt.Fprintf(stderr, "agent run: %v\n", err)
			return 1
		}
		stdout.Write(b)
		return 0
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	creds, renewer, id, err := identity(cfg, log)
	if err != nil {
		fmt.Fprintf(stderr, "agent run: %v\n", err)
		return 1
	}
	if *check {
		fmt.Fprintf(stdout, "%s: valid (agent %s, server %s)\n", *configFile, id, cfg.Server.Address)
		if off := agent.NotConfigured(cfg); len(off) > 0 {
			// What an unedited file leaves off (a central policy may add it).
			fmt.Fprintf(stdout, "not configured: %s\n", strings.Join(off, ", "))
		}
		return 0
	}
	if cfg.Server.Insecure {
		log.Warn("server.insecure: reporting in plaintext, without TLS (tests and dev only)")
	}
	opts := roots.options()
	a, err := agent.New(agent.Options{
		Config: cfg, AgentID: id, Version: version, Creds: creds, Renewer: renewer,
		Geometry: cfg.GeometryOptions(opts), ProcRoot: *roots.procfs, Logger: log,
	})
	if err != nil {
		fmt.Fprintf(stderr, "agent run: %v\n", err)
		return 1
	}
	log.Info("agent starting", "agent_id", id, "server", cfg.Server.Address, "spool", cfg.Spool.Dir, "version", version)
	if err := a.Run(ctx); err != nil {
		fmt.Fprintf(stderr, "agent run: %v\n", err)
		return 1
	}
	log.Info("agent stopped")
	return 0
}

// identity is the agent's transport credentials and certificate renewer
// (none with server.insecure) and its id: agent_id, else the client
// certificate's.
func identity(cfg config.Agent, log *slog.Logger) (credentials.TransportCredentials, agent.Renewer, string, error) {
	var creds credentials.TransportCredentials
	var renewer agent.Renewer
	id := cfg.AgentID
	if !cfg.Server.Insecure {
		tc, r, cn, err := agent.RenewingTLS(cfg.Server, log)
		if err != nil {
			return nil, nil, "", err
		}
		creds, renewer = credentials.NewTLS(tc), r
		if id == "" {
			id = cn
		}
	}
	if id == "" {
		return nil, nil, "", errors.New("agent_id: required with server.insecure (there is no client certificate to take it from)")
	}
	return creds, renewer, id, nil
}
