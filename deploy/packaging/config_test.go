//go:build linux

package packaging

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// checkSafeAgentConfig: the agent config a package installs sets the
// server and its certificates, the spool, and nothing else: no probes on a
// path that may not exist, no declared RAID, no labels that pull a fresh
// host into a policy, no maintenance window.
func checkSafeAgentConfig(t *testing.T, name string, b []byte) {
	t.Helper()
	var top map[string]any
	if err := yaml.Unmarshal(b, &top); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	for k := range top {
		if k != "server" && k != "spool" {
			t.Errorf("%s sets %s: a package's config must set only server and spool (the rest as comments)", name, k)
		}
	}
	var cfg struct {
		Spool  struct{ Dir string }
		Server struct {
			TLS struct {
				CAFile   string `yaml:"ca_file"`
				CertFile string `yaml:"cert_file"`
				KeyFile  string `yaml:"key_file"`
			}
		}
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Spool.Dir != "/var/lib/plumbline-agent/spool" {
		t.Errorf("%s: spool.dir %q, want the unit's state directory /var/lib/plumbline-agent/spool", name, cfg.Spool.Dir)
	}
	// Where `runuser -u plumbline -- plumbline-agent enroll --dir
	// /var/lib/plumbline-agent/tls` writes: the agent renews them there.
	tls := cfg.Server.TLS
	got := []string{tls.CAFile, tls.CertFile, tls.KeyFile}
	want := []string{"/var/lib/plumbline-agent/tls/ca.crt", "/var/lib/plumbline-agent/tls/agent.crt", "/var/lib/plumbline-agent/tls/agent.key"}
	if !slices.Equal(got, want) {
		t.Errorf("%s: server.tls %v, want what enroll writes in the state directory: %v", name, got, want)
	}
}

// checkSafeServerConfig: the server config a package installs serves its
// HTTP API (inventory, /metrics) on loopback unless a token guards it, and
// names the files `plumbline-server ca init --dir /etc/plumbline/pki` makes.
func checkSafeServerConfig(t *testing.T, name string, b []byte) {
	t.Helper()
	var cfg struct {
		Web struct {
			ListenAddress   string `yaml:"listen_address"`
			BearerTokenFile string `yaml:"bearer_token_file"`
			BearerTokens    []any  `yaml:"bearer_tokens"`
		}
		GRPC struct {
			TLS struct {
				CertFile     string `yaml:"cert_file"`
				KeyFile      string `yaml:"key_file"`
				ClientCAFile string `yaml:"client_ca_file"`
			}
		} `yaml:"grpc"`
		Enrollment struct {
			CACertFile string `yaml:"ca_cert_file"`
			CAKeyFile  string `yaml:"ca_key_file"`
		}
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	host, _, err := net.SplitHostPort(cfg.Web.ListenAddress)
	ip := net.ParseIP(host)
	loopback := err == nil && (host == "localhost" || ip != nil && ip.IsLoopback())
	if !loopback && cfg.Web.BearerTokenFile == "" && len(cfg.Web.BearerTokens) == 0 {
		t.Errorf("%s: web.listen_address %q is not loopback and no API token is set: the inventory is open to the network", name, cfg.Web.ListenAddress)
	}
	got := []string{cfg.GRPC.TLS.CertFile, cfg.GRPC.TLS.KeyFile, cfg.GRPC.TLS.ClientCAFile, cfg.Enrollment.CACertFile, cfg.Enrollment.CAKeyFile}
	want := []string{"/etc/plumbline/pki/server.crt", "/etc/plumbline/pki/server.key", "/etc/plumbline/pki/ca.crt", "/etc/plumbline/pki/ca.crt", "/etc/plumbline/pki/ca.key"}
	if !slices.Equal(got, want) {
		t.Errorf("%s: TLS and enrollment files %v, want what ca init makes: %v", name, got, want)
	}
}

// TestPackagedConfigsSafe checks deploy/packaging/etc, what the packages
// install in /etc/plumbline, and that each passes its binary's check with
// the certificates in place (paths moved to a temporary directory).
func TestPackagedConfigsSafe(t *testing.T) {
	t.Parallel()
	agentYAML, err := os.ReadFile("etc/agent.yaml")
	if err != nil {
		t.Fatal(err)
	}
	serverYAML, err := os.ReadFile("etc/server.yaml")
	if err != nil {
		t.Fatal(err)
	}
	checkSafeAgentConfig(t, "etc/agent.yaml", agentYAML)
	checkSafeServerConfig(t, "etc/server.yaml", serverYAML)

	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin+"/", "../../cmd/agent", "../../cmd/server")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	dir := t.TempDir()
	writePKI(t, filepath.Join(dir, "pki"), filepath.Join(dir, "state/plumbline-agent/tls"))
	moved := strings.NewReplacer("/etc/plumbline/", dir+"/", "/var/lib/", dir+"/state/")
	agentFile, serverFile := filepath.Join(dir, "agent.yaml"), filepath.Join(dir, "server.yaml")
	writeFile(t, agentFile, moved.Replace(string(agentYAML)))
	writeFile(t, serverFile, moved.Replace(string(serverYAML)))
	checkConfigs(t, filepath.Join(bin, "agent"), agentFile, filepath.Join(bin, "server"), serverFile)
}

// checkConfigs runs `agent run --config A --check` and
// `server --config S --config.check`.
func checkConfigs(t *testing.T, agentBin, agentFile, serverBin, serverFile string) {
	t.Helper()
	if out, err := exec.Command(agentBin, "run", "--config", agentFile, "--check").CombinedOutput(); err != nil {
		t.Errorf("agent run --config %s --check: %v\n%s", agentFile, err, out)
	}
	if out, err := exec.Command(serverBin, "--config", serverFile, "--config.check").CombinedOutput(); err != nil {
		t.Errorf("server --config %s --config.check: %v\n%s", serverFile, err, out)
	}
}

// writePKI writes what `plumbline-server ca init` makes (pki: ca.crt,
// ca.key, server.crt, server.key) and what `plumbline-agent enroll` makes
// (tlsDir: ca.crt, agent.crt, agent.key), from one throwaway CA.
func writePKI(t *testing.T, pki, tlsDir string) {
	t.Helper()
	caKey, caDER := newCert(t, &x509.Certificate{
		Subject: pkix.Name{CommonName: "test enrollment CA"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}, nil, nil)
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	srvKey, srvDER := newCert(t, &x509.Certificate{
		Subject: pkix.Name{CommonName: "plumbline"}, DNSNames: []string{"plumbline"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, ca, caKey)
	agKey, agDER := newCert(t, &x509.Certificate{
		Subject: pkix.Name{CommonName: "db01"}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, ca, caKey)
	for _, d := range []string{pki, tlsDir} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			t.Fatal(err)
		}
	}
	certPEM := func(der []byte) string {
		return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	}
	writeFile(t, filepath.Join(pki, "ca.crt"), certPEM(caDER))
	writeFile(t, filepath.Join(pki, "ca.key"), keyPEM(t, caKey))
	writeFile(t, filepath.Join(pki, "server.crt"), certPEM(srvDER))
	writeFile(t, filepath.Join(pki, "server.key"), keyPEM(t, srvKey))
	writeFile(t, filepath.Join(tlsDir, "ca.crt"), certPEM(caDER))
	writeFile(t, filepath.Join(tlsDir, "agent.crt"), certPEM(agDER))
	writeFile(t, filepath.Join(tlsDir, "agent.key"), keyPEM(t, agKey))
}

// newCert signs tmpl with parent's key (self-signed when parent is nil).
func newCert(t *testing.T, tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*ecdsa.PrivateKey, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl.SerialNumber = big.NewInt(time.Now().UnixNano())
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	return key, der
}

func keyPEM(t *testing.T, key *ecdsa.PrivateKey) string {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o640); err != nil {
		t.Fatal(err)
	}
}
