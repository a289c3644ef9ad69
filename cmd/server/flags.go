package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/plumbline/plumbline/internal/server/config"
	"github.com/plumbline/plumbline/internal/strictyaml"
)

var errVersion = errors.New("version")

// parseFlags builds the configuration: defaults, the --config file, then
// the flags given on the command line.
func parseFlags(args []string, stdout, stderr io.Writer) (config.Config, bool, error) {
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		configFile = fs.String("config", "", "YAML configuration `file` (unknown keys are errors)")
		check      = fs.Bool("config.check", false, "validate the configuration and its TLS files, then exit")
		dev        = fs.Bool("dev", false, "development mode: SQLite, a local CA and certificates and a ready agent config (DIR/dev/agent.yaml) under --data-dir; loopback listeners")
		showVer    = fs.Bool("version", false, "print the version and exit")
		d          = config.Default()
		dataDir    = fs.String("data-dir", d.DataDir, "data `directory`: the SQLite database, and in --dev mode the CA, certificates and agent config")
		dsn        = fs.String("store.dsn", "", "store `DSN`: sqlite:///path/file.db or postgres://user@host/db (default: sqlite under --data-dir)")
		grpcAddr   = fs.String("grpc.listen-address", d.GRPC.ListenAddress, "agent gRPC listen `address` (--dev default: "+config.DevGRPCAddress+")")
		certFile   = fs.String("grpc.tls.cert-file", "", "server certificate `file` (PEM)")
		keyFile    = fs.String("grpc.tls.key-file", "", "server key `file` (PEM)")
		clientCA   = fs.String("grpc.tls.client-ca-file", "", "`file` of the CA(s) that sign agent certificates (PEM)")
		webAddr    = fs.String("web.listen-address", d.Web.ListenAddress, "HTTP API listen `address` (--dev default: "+config.DevWebAddress+")")
		webConfig  = fs.String("web.config.file", "", "exporter-toolkit web configuration `file`: TLS and basic auth for the HTTP listener")
		insecure   = fs.Bool("insecure", false, "serve gRPC in plaintext and trust each request's agent_id (testing only)")
		baseIval   = fs.Duration("baseline.interval", config.DefaultBaselineInterval, "how often the baseline evaluator judges new probe results")
		logLevel   = fs.String("log.level", d.Log.Level, "log `level`: debug, info, warn, error")
		logFormat  = fs.String("log.format", d.Log.Format, "log `format`: text or json")
		pprofAddr  = fs.String("debug.pprof-listen-address", "", "serve net/http/pprof on this `address` (a separate listener, no authentication: keep it on loopback; default: off)")
	)
	fs.Usage = func() { usage(fs) }
	if err := fs.Parse(args); err != nil {
		return config.Config{}, false, err
	}
	if fs.NArg() > 0 {
		return config.Config{}, false, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *showVer {
		return config.Config{}, false, errVersion
	}
	cfg, lines, err := loadFile(*configFile) // lines: the file's lines by key path, for Validate's errors
	if err != nil {
		return config.Config{}, false, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	cfg.Dev = *dev
	cfg.BaselineInterval = *baseIval
	cfg.PprofAddress = *pprofAddr
	if cfg.BaselineInterval <= 0 {
		return config.Config{}, false, fmt.Errorf("--baseline.interval %s: want a positive duration", cfg.BaselineInterval)
	}
	if err := devDefaults(&cfg, set); err != nil {
		return config.Config{}, false, err
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
		return config.Config{}, false, fmt.Errorf("configuration: %w", strictyaml.WithLines(err, lines))
	}
	return cfg, *check, nil
}

// usage prints the server's usage lines, its subcommands and its flags.
func usage(fs *flag.FlagSet) {
	fmt.Fprint(fs.Output(), `usage: server --config FILE [flags]     run the server
       server --dev --data-dir DIR       run a development server: local CA, certificates and an agent config under DIR

subcommands (each takes --help):
  server ca init|renew --dir DIR --name NAME    create the production CA and this server's TLS certificate (renew: a new certificate)
  server token create|list|revoke               join tokens that agents enroll with (agent enroll)
  server agent list|revoke ID                   enrolled agents; revoke refuses an agent's certificates
  server inventory list|summary [--url URL]     query a running server's inventory API

flags:
`)
	fs.PrintDefaults()
}

// devDefaults is --dev's part of the configuration: loopback listeners
// unless told otherwise, and --data-dir required.
func devDefaults(cfg *config.Config, set map[string]bool) error {
	if !cfg.Dev {
		return nil
	}
	if !set["grpc.listen-address"] && cfg.GRPC.ListenAddress == config.DefaultGRPCAddress {
		cfg.GRPC.ListenAddress = config.DevGRPCAddress
	}
	if !set["web.listen-address"] && cfg.Web.ListenAddress == config.DefaultWebAddress {
		cfg.Web.ListenAddress = config.DevWebAddress
	}
	if !set["data-dir"] && cfg.DataDir == config.DefaultDataDir {
		return errors.New("--dev needs --data-dir DIR (where the database, the dev CA and DIR/dev/agent.yaml go)")
	}
	return nil
}

// loadFile is the --config file over the defaults (none: the defaults).
func loadFile(path string) (config.Config, map[string]int, error) {
	if path == "" {
		return config.Default(), nil, nil
	}
	return config.LoadLines(path)
}
