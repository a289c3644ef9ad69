package server

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"

	"github.com/prometheus/exporter-toolkit/web"
	"go.yaml.in/yaml/v3"

	"github.com/plumbline/plumbline/internal/server/config"
	"github.com/plumbline/plumbline/internal/server/inventory"
)

// apiTokens reads the inventory API's bearer tokens. Configured tokens
// are enforced in every mode, --dev included; with none the API is open
// (and warnOpenAPI says so beyond loopback).
func apiTokens(cfg config.Config) ([]inventory.Token, error) {
	var out []inventory.Token
	read := func(name, key, file string) error {
		b, err := os.ReadFile(file)
		if err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		tok := strings.TrimSpace(string(b))
		if tok == "" {
			return fmt.Errorf("%s %s is empty", key, file)
		}
		out = append(out, inventory.Token{Name: name, Secret: tok})
		return nil
	}
	if f := cfg.Web.BearerTokenFile; f != "" {
		if err := read("default", "web.bearer_token_file", f); err != nil {
			return nil, err
		}
	}
	for i, t := range cfg.Web.BearerTokens {
		if err := read(t.Name, fmt.Sprintf("web.bearer_tokens[%d].token_file", i), t.TokenFile); err != nil {
			return nil, err
		}
	}
	if cfg.Web.ConfigFile != "" && len(out) > 0 {
		users, err := basicAuthUsers(cfg.Web.ConfigFile)
		if err != nil {
			return nil, err
		}
		if users > 0 {
			return nil, errors.New("web.config_file has basic_auth_users and web.bearer_tokens are set: both need the Authorization header; choose one")
		}
	}
	return out, nil
}

// basicAuthUsers counts the basic_auth_users of an exporter-toolkit web
// configuration file.
func basicAuthUsers(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("web.config_file: %w", err)
	}
	var c struct {
		Users map[string]string `yaml:"basic_auth_users"`
	}
	if err := yaml.Unmarshal(b, &c); err != nil {
		return 0, fmt.Errorf("web.config_file %s: %w", path, err)
	}
	return len(c.Users), nil
}

// checkWebConfig validates the exporter-toolkit web configuration file
// (TLS files readable, bcrypt hashes well-formed).
func checkWebConfig(cfg config.Config) error {
	if cfg.Web.ConfigFile == "" {
		return nil
	}
	if err := web.Validate(cfg.Web.ConfigFile); err != nil {
		return fmt.Errorf("web.config_file %s: %w", cfg.Web.ConfigFile, err)
	}
	return nil
}

// warnOpenAPI logs when the inventory API is reachable beyond loopback
// without any authentication.
func warnOpenAPI(cfg config.Config, tokens []inventory.Token, logger *slog.Logger) {
	if len(tokens) > 0 || config.Loopback(cfg.Web.ListenAddress) {
		return
	}
	if cfg.Web.ConfigFile != "" {
		if n, err := basicAuthUsers(cfg.Web.ConfigFile); err == nil && n > 0 {
			return
		}
	}
	logger.Warn("the HTTP API and /metrics answer anyone who can reach "+cfg.Web.ListenAddress+" (no authentication): "+
		"give clients a token (web.bearer_tokens: [{name: grafana, token_file: FILE}], or web.bearer_token_file: FILE), "+
		"or set basic_auth_users in web.config_file, or listen on loopback only (web.listen_address: 127.0.0.1:9464)",
		"address", cfg.Web.ListenAddress)
}

// serveWeb serves the HTTP listener through exporter-toolkit: TLS and basic
// auth from web.config_file when set, plain HTTP otherwise.
func serveWeb(l net.Listener, srv *http.Server, cfg config.Config, logger *slog.Logger) error {
	file := cfg.Web.ConfigFile
	systemd := false
	addrs := []string{cfg.Web.ListenAddress}
	return web.Serve(l, srv, &web.FlagConfig{WebListenAddresses: &addrs, WebSystemdSocket: &systemd, WebConfigFile: &file}, logger)
}
