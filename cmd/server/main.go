// Command server is Plumbline's central server: it ingests agent reports
// over gRPC with mutual TLS, keeps the fleet's inventory in a store
// (SQLite by default, PostgreSQL at scale) and serves it over HTTP.
//
//	server --config FILE [flags]
//	server --dev --data-dir DIR      a local CA, certificates and a ready agent config under DIR
//	server ca init --dir DIR --name NAME  the production CA and server certificate (internal/server/pki)
//	server token create|list|revoke  join tokens for `agent enroll` (docs/install.md, "Enrollment")
//	server agent list|revoke         enrolled agents
//	server inventory list|summary    a running server's inventory, as tables
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
// only for itself (identity.FromCertificate).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/plumbline/plumbline/internal/command"
	"github.com/plumbline/plumbline/internal/server"
	"github.com/plumbline/plumbline/internal/server/config"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	command.Main(func(ctx context.Context, args []string, stdout, stderr io.Writer) int {
		return runContext(ctx, args, stdout, stderr, nil)
	})
}

// listening is told the bound addresses once the server serves (tests).
type listening = func(grpcAddr, webAddr string)

// runContext is the server command: it stops when ctx is cancelled.
func runContext(ctx context.Context, args []string, stdout, stderr io.Writer, ready listening) int {
	if len(args) > 0 && args[0] == "inventory" {
		return runInventory(ctx, args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "ca" {
		return runCA(args[1:], stdout, stderr)
	}
	if len(args) > 0 && (args[0] == "token" || args[0] == "agent") {
		return runEnrollment(ctx, args[0], args[1:], stdout, stderr)
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
		if err := server.Check(cfg); err != nil {
			fmt.Fprintf(stderr, "server: %v\n", err)
			return 1
		}
		fmt.Fprintln(stdout, "configuration OK")
		return 0
	}
	srv, err := server.New(cfg, logger, server.Options{Stdout: stdout, Version: version, Ready: ready})
	if err == nil {
		err = srv.Run(ctx)
	}
	if err != nil {
		logger.Error("server stopped", "err", err)
		return 1
	}
	return 0
}

func newLogger(w io.Writer, c config.LogConfig) *slog.Logger {
	var level slog.Level
	level.UnmarshalText([]byte(c.Level)) // validated
	opts := &slog.HandlerOptions{Level: level}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
