package config

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const exampleConfig = "../../../deploy/examples/server.yaml"

func TestExampleConfig(t *testing.T) {
	cfg, err := Load(exampleConfig)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("%s: %v", exampleConfig, err)
	}
	// The example lists every default: it must read back as DefaultConfig
	// plus its TLS paths.
	want := Default()
	want.GRPC.TLS = TLSConfig{CertFile: "/etc/plumbline/tls/server.crt", KeyFile: "/etc/plumbline/tls/server.key", ClientCAFile: "/etc/plumbline/tls/agents-ca.crt"}
	want.File = exampleConfig
	if diff := cmp.Diff(want, cfg); diff != "" {
		t.Errorf("example config differs from the defaults (-want +got):\n%s", diff)
	}
	// Every key of Config is in the example (documented).
	b, _ := os.ReadFile(exampleConfig)
	for _, key := range []string{"data_dir:", "listen_address:", "cert_file:", "key_file:", "client_ca_file:", "insecure:", "max_recv_msg_size:",
		"max_batch_records:", "calls_per_second:", "burst:", "bearer_token_file:", "bearer_tokens:", "token_file:", "role:", "config_file:", "dsn:", "geometry_refresh_interval:", "report_interval:",
		"level:", "format:", "shutdown_timeout:", "ca_cert_file:", "ca_key_file:", "trust_bundle_file:", "cert_ttl:",
		"policies:", "policy_reload_interval:", "retention:", "classic_histogram_buckets:",
		"max_anonymous_inflight_bytes:", "message_read_timeout:", "rate_limit_per_address:", "renew_rate_limit_per_agent:"} {
		if !bytes.Contains(b, []byte(key)) {
			t.Errorf("%s does not document %s", exampleConfig, key)
		}
	}
}

func TestBadConfig(t *testing.T) {
	tests := []struct{ name, yaml, want string }{
		{"unknown key", "grpc:\n  listen_adress: :1\n", `line 2: grpc: unknown key "listen_adress" (did you mean "listen_address"?); valid keys in grpc: listen_address, tls, insecure,`},
		{"unknown top-level key", "storage:\n  dsn: x\n", `line 1: unknown key "storage" (did you mean "store"?); valid keys at the top level: data_dir, grpc, web, store, agents, log, enrollment, shutdown_timeout`},
		{"nested list key", "web:\n  bearer_tokens:\n    - {name: a, tokenfile: /x}\n", `line 3: web.bearer_tokens[0]: unknown key "tokenfile" (did you mean "token_file"?)`},
		{"bad duration", "agents:\n  report_interval: often\n", `line 2: agents.report_interval: "often" is not a duration`},
		{"bad size", "grpc:\n  max_recv_msg_size: 4 megs\n", `line 2: grpc.max_recv_msg_size: invalid size "4 megs"`},
		{"size spellings", "grpc:\n  insecure: true\n  max_recv_msg_size: 16mb\n  max_batch_records: 0\n", "max_batch_records 0"},
		{"two documents", "data_dir: /a\n---\ndata_dir: /b\n", "line 2: a second YAML document"},
		{"no TLS", "data_dir: /tmp/x\n", "grpc.tls.cert_file, key_file and client_ca_file are required"},
		{"tiny message limit", "grpc:\n  insecure: true\n  max_recv_msg_size: 1KiB\n", "max_recv_msg_size 1KiB"},
		{"batch limit", "grpc:\n  insecure: true\n  max_batch_records: 0\n", "max_batch_records 0"},
		{"report interval", "grpc:\n  insecure: true\nagents:\n  report_interval: 10ms\n", "report_interval 10ms"},
		{"log level", "grpc:\n  insecure: true\nlog:\n  level: loud\n", `log.level "loud"`},
		{"listen address", "grpc:\n  insecure: true\n  listen_address: 7443\n", "grpc.listen_address"},
		{"short retention", "grpc:\n  insecure: true\nstore:\n  retention: 10m\n", "store.retention 10m0s: want 0 (keep for ever) or at least 1h"},
		{"negative retention", "grpc:\n  insecure: true\nstore:\n  retention: -1h\n", "store.retention -1h0m0s"},
		{"classic buckets", "grpc:\n  insecure: true\nmetrics:\n  classic_histogram_buckets: medium\n", `metrics.classic_histogram_buckets "medium": want one of coarse, fine, none`},
		{"same addresses", "grpc:\n  insecure: true\n  listen_address: :1\nweb:\n  listen_address: :1\n", "both"},
		{"anonymous pool too small", "grpc:\n  insecure: true\n  max_anonymous_inflight_bytes: 512KiB\n", "grpc.max_anonymous_inflight_bytes 512KiB: want 1MiB to 1GiB"},
		{"anonymous pool too big", "grpc:\n  insecure: true\n  max_anonymous_inflight_bytes: 2GiB\n", "grpc.max_anonymous_inflight_bytes 2GiB"},
		{"read timeout", "grpc:\n  insecure: true\n  message_read_timeout: 100ms\n", "grpc.message_read_timeout 100ms: want 1s to 10m"},
		{"renew rate", "grpc:\n  insecure: true\nenrollment:\n  renew_rate_limit_per_agent: {calls_per_second: -1}\n", "enrollment.renew_rate_limit_per_agent.calls_per_second -1: want 0 (off) to 1000"},
		{"renew burst", "grpc:\n  insecure: true\nenrollment:\n  renew_rate_limit_per_agent: {calls_per_second: 1, burst: 0}\n", "enrollment.renew_rate_limit_per_agent.burst 0: want 1 to 100000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "server.yaml")
			os.WriteFile(path, []byte(tt.yaml), 0o600)
			cfg, err := Load(path)
			if err == nil {
				err = cfg.Validate()
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("LoadConfig+Validate(%q) = %v, want an error saying %q", tt.yaml, err, tt.want)
			}
			if err != nil && strings.Contains(err.Error(), "config.") {
				t.Errorf("error names a Go type: %v", err)
			}
		})
	}
}

func TestBadWebConfig(t *testing.T) {
	tests := []struct{ yaml, want string }{
		{"grpc:\n  insecure: true\nweb:\n  bearer_tokens:\n  - token_file: /x\n", "web.bearer_tokens[0].name is empty"},
		{"grpc:\n  insecure: true\nweb:\n  bearer_tokens:\n  - name: a\n", "web.bearer_tokens[0].token_file is empty"},
		{"grpc:\n  insecure: true\nweb:\n  bearer_tokens:\n  - {name: a, token_file: /x, role: admin}\n", `role "admin": want read-only`},
		{"grpc:\n  insecure: true\nweb:\n  bearer_tokens:\n  - {name: a, token_file: /x}\n  - {name: a, token_file: /y}\n", "used twice"},
		{"grpc:\n  insecure: true\nweb:\n  bearer_tokenz: []\n", `line 4: web: unknown key "bearer_tokenz" (did you mean "bearer_tokens"?)`},
	}
	for _, tt := range tests {
		cfg := Default()
		err := Decode([]byte(tt.yaml), &cfg)
		if err == nil {
			err = cfg.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: %v, want an error with %q", tt.yaml, err, tt.want)
		}
	}
	cfg := Default()
	cfg.Dev, cfg.Web.ListenAddress = true, "0.0.0.0:9464"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "not a loopback address") {
		t.Errorf("--dev on 0.0.0.0 without tokens: %v, want an error", err)
	}
}

// The commented policies example of the example config is valid once
// uncommented: operators copy it.
func TestExamplePolicies(t *testing.T) {
	b, err := os.ReadFile(exampleConfig)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "# policies:\n")
	if !ok {
		t.Fatal("no commented policies example")
	}
	text := "policies:\n"
	for _, l := range strings.Split(rest, "\n") {
		if !strings.HasPrefix(l, "#   ") {
			break
		}
		text += strings.TrimPrefix(l, "# ") + "\n"
	}
	cfg := Default()
	cfg.GRPC.Insecure = true
	if err := Decode([]byte(text), &cfg); err != nil {
		t.Fatalf("%s: %v", text, err)
	}
	if err := cfg.Validate(); err != nil || len(cfg.Policies) != 1 || len(cfg.Policies[0].Policy.MaintenanceWindows) != 1 {
		t.Errorf("example policies: %v, %+v", err, cfg.Policies)
	}
}

// A configuration valid before the admission keys existed stays valid:
// a message limit above the anonymous pool's default, a server-wide
// enrollment rate below the per-address default.
func TestAdmissionKeyDefaultsKeepOldConfigsValid(t *testing.T) {
	t.Parallel()
	cfg := Default()
	if err := Decode([]byte("grpc:\n  insecure: true\n  max_recv_msg_size: 64MiB\n  max_inflight_bytes: 256MiB\nenrollment:\n  rate_limit: {calls_per_second: 1, burst: 5}\n"), &cfg); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("an old configuration is refused: %v", err)
	}
}
