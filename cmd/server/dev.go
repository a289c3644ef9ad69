package main

import (
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/plumbline/plumbline/internal/devca"
	"github.com/plumbline/plumbline/internal/ingest"
)

// Dev mode lays out DIR (--data-dir) like this:
//
//	DIR/plumbline.db         the SQLite store
//	DIR/ca/ca.crt, ca.key    the dev CA (devca.Load(DIR/ca) mints more agent certificates)
//	DIR/tls/server.crt, .key the server certificate (localhost, 127.0.0.1, ::1, hostname)
//	DIR/dev/agent.yaml       a ready agent config pointed at this server
//	DIR/dev/agent.local.yaml the developer's own agent keys (override_files of agent.yaml)
//	DIR/dev/ca.crt           the CA certificate, for agents
//	DIR/dev/agent.crt, .key  the agent's client certificate (id: this host's name)
//	DIR/dev/probe/           the probe directory
//	DIR/dev/spool/           the agent's spool
//
// Everything but agent.yaml is reused when already there and still valid;
// agent.yaml is rewritten at every start (the listen address may change).
// agent.local.yaml is written once, as a commented example, and never
// again: agent.yaml names it in override_files, so its keys (declared RAID,
// other probes) replace agent.yaml's and survive restarts.
type devLayout struct {
	dir                        string
	caDir                      string
	serverCert, serverKey      string
	devDir                     string
	agentYAML, agentLocalYAML  string
	agentCA, agentCert, agentK string
	probeDir, spoolDir         string
}

// DevCADir is where a dev server keeps its CA, relative to the dev
// directory DIR/dev that fleetsim is pointed at: DIR/dev/../ca.
const DevCADir = "../ca"

func newDevLayout(dataDir string) (devLayout, error) {
	dir, err := filepath.Abs(dataDir)
	if err != nil {
		return devLayout{}, err
	}
	dev := filepath.Join(dir, "dev")
	return devLayout{
		dir:            dir,
		caDir:          filepath.Join(dir, "ca"),
		serverCert:     filepath.Join(dir, "tls", "server.crt"),
		serverKey:      filepath.Join(dir, "tls", "server.key"),
		devDir:         dev,
		agentYAML:      filepath.Join(dev, "agent.yaml"),
		agentLocalYAML: filepath.Join(dev, "agent.local.yaml"),
		agentCA:        filepath.Join(dev, "ca.crt"),
		agentCert:      filepath.Join(dev, "agent.crt"),
		agentK:         filepath.Join(dev, "agent.key"),
		probeDir:       filepath.Join(dev, "probe"),
		spoolDir:       filepath.Join(dev, "spool"),
	}, nil
}

// devHosts are the names the dev server certificate covers.
func devHosts() []string {
	hosts := []string{"localhost", "127.0.0.1", "::1"}
	if h, err := os.Hostname(); err == nil && h != "" && h != "localhost" {
		hosts = append(hosts, h)
	}
	return hosts
}

// devAgentID is the dev agent's identity: this host's name.
func devAgentID() string {
	h, err := os.Hostname()
	if err != nil || ingest.CheckAgentID(h) != nil {
		return "localhost"
	}
	return h
}

// prepareDev creates (or reuses) the CA and the certificates, and the
// directories, and points cfg's TLS settings at them. It returns the
// layout; writeDevAgentConfig writes agent.yaml once the address is known.
func prepareDev(cfg *Config) (devLayout, error) {
	l, err := newDevLayout(cfg.DataDir)
	if err != nil {
		return l, err
	}
	for _, d := range []string{l.dir, l.devDir, l.probeDir, l.spoolDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return l, fmt.Errorf("dev: %w", err)
		}
	}
	ca, _, err := devca.LoadOrCreate(l.caDir)
	if err != nil {
		return l, fmt.Errorf("dev: %w", err)
	}
	if err := reuseOrIssue(ca, l.serverCert, l.serverKey, x509.ExtKeyUsageServerAuth, func(c *x509.Certificate) bool {
		for _, h := range devHosts() {
			if c.VerifyHostname(h) != nil {
				return false
			}
		}
		return true
	}, func() (*devca.Leaf, error) { return ca.IssueServer(devHosts()...) }); err != nil {
		return l, fmt.Errorf("dev: server certificate: %w", err)
	}
	id := devAgentID()
	if err := reuseOrIssue(ca, l.agentCert, l.agentK, x509.ExtKeyUsageClientAuth, func(c *x509.Certificate) bool {
		got, err := ingest.AgentIdentity(c)
		return err == nil && got == id
	}, func() (*devca.Leaf, error) { return ca.IssueAgent(id) }); err != nil {
		return l, fmt.Errorf("dev: agent certificate: %w", err)
	}
	if err := writeFileAtomic(l.agentCA, ca.CertPEM, 0o644); err != nil {
		return l, fmt.Errorf("dev: %w", err)
	}
	cfg.GRPC.TLS = TLSConfig{CertFile: l.serverCert, KeyFile: l.serverKey, ClientCAFile: ca.CertPath()}
	return l, nil
}

func reuseOrIssue(ca *devca.CA, certPath, keyPath string, usage x509.ExtKeyUsage, fits func(*x509.Certificate) bool, issue func() (*devca.Leaf, error)) error {
	if leaf, err := ca.LoadLeaf(certPath, keyPath, usage); err == nil && fits(leaf.Cert) {
		return nil
	}
	leaf, err := issue()
	if err != nil {
		return err
	}
	return leaf.WriteFiles(certPath, keyPath)
}

// agentAddress is the address an agent on this host dials for a listener
// bound to addr: the unspecified address becomes loopback.
func agentAddress(addr net.Addr) string {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok {
		return addr.String()
	}
	host := tcp.IP.String()
	if tcp.IP == nil || tcp.IP.IsUnspecified() {
		host = "127.0.0.1"
		if tcp.IP != nil && tcp.IP.To4() == nil && !tcp.IP.Equal(net.IPv6unspecified) {
			host = "::1"
		}
	}
	return net.JoinHostPort(host, fmt.Sprint(tcp.Port))
}

// devAgentWebAddress is the dev agent's /healthz and /metrics address:
// the port after the server's HTTP port when it is free (9465 next to the
// default 9464), else any free loopback port, so that dev servers side by
// side give their agents different ports; "" (off) when none is free. (A
// port found free may be taken before the agent binds it: dev only.)
func devAgentWebAddress(web net.Addr) string {
	if tcp, ok := web.(*net.TCPAddr); ok && tcp.Port > 0 && tcp.Port < 65535 {
		if a, ok := freeLoopback(tcp.Port + 1); ok {
			return a
		}
	}
	a, _ := freeLoopback(0)
	return a
}

// freeLoopback reports whether 127.0.0.1:port can be bound now, and the
// address bound (port 0: one the system picks).
func freeLoopback(port int) (string, bool) {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return "", false
	}
	defer l.Close()
	return l.Addr().String(), true
}

// devAgentLocalExample is DIR/dev/agent.local.yaml as first written.
const devAgentLocalExample = `# Your keys for the dev agent. 'server --dev' wrote this file once and
# never rewrites it; agent.yaml (rewritten at every start) names it in
# override_files. A key here replaces agent.yaml's; a list
# (declared_devices, probes) replaces agent.yaml's whole list. Check with:
#   agent run --config agent.yaml --check
#
# Hardware RAID the OS cannot see, for example:
# declared_devices:
#   - device: /dev/sdb
#     raid: {level: raid10, stripe_unit: 64KiB, disks: 4}
`

// writeDevAgentConfig writes DIR/dev/agent.yaml for an agent on this host,
// and DIR/dev/agent.local.yaml when it does not exist.
func writeDevAgentConfig(l devLayout, grpcAddr, webAddr string, insecure bool) error {
	mp := mountPointOf(l.probeDir)
	text := fmt.Sprintf(`# Written by 'server --dev' at every start; edits are overwritten.
# Put your own keys (declared_devices, probes, ...) in agent.local.yaml:
# it is never rewritten, and its keys replace these.
# Run an agent with it:  agent run --config %[1]s
agent_id: %[2]s              # optional; defaults to the certificate CN
server:
  address: %[3]s
  tls:
    ca_file: %[4]s
    cert_file: %[5]s
    key_file: %[6]s
    server_name: localhost        # optional
  insecure: %[7]t
spool:
  dir: %[8]s
  max_bytes: 64MiB
intervals:
  geometry_refresh: 15m
  report: 10s
probes:
  - mount_point: %[9]s                # path.Match glob of the volume's mount point
    dir: %[10]s            # the probe directory on that volume
    kinds: [random-read, random-write, log-write]
    every: 5m
    ops: 200
    iops: 50
    max_duration: 30s
    file_size: 64MiB
    allow_cached: true            # dev only: tmpfs/overlay data dirs
web:
  listen_address: %[11]s  # agent /healthz and /metrics (a free port); empty = off
override_files: [agent.local.yaml]
`, yamlScalar(l.agentYAML), yamlScalar(devAgentID()), yamlScalar(grpcAddr), yamlScalar(l.agentCA), yamlScalar(l.agentCert),
		yamlScalar(l.agentK), insecure, yamlScalar(l.spoolDir), yamlScalar(globQuote(mp)), yamlScalar(l.probeDir), yamlScalar(webAddr))
	if _, err := os.Lstat(l.agentLocalYAML); errors.Is(err, os.ErrNotExist) {
		if err := writeFileAtomic(l.agentLocalYAML, []byte(devAgentLocalExample), 0o600); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	return writeFileAtomic(l.agentYAML, []byte(text), 0o600)
}

var plainYAML = regexp.MustCompile(`^[A-Za-z0-9_./][A-Za-z0-9_./:@-]*$`)

// yamlScalar is s as a YAML scalar: plain when that reads back as the same
// string, double-quoted (JSON syntax, which YAML accepts) otherwise.
func yamlScalar(s string) string {
	if plainYAML.MatchString(s) && !strings.HasSuffix(s, ":") && !isYAMLKeyword(s) {
		return s
	}
	b, _ := json.Marshal(s)
	return string(b)
}

func isYAMLKeyword(s string) bool {
	switch strings.ToLower(s) {
	case "true", "false", "yes", "no", "on", "off", "null", "~", "y", "n":
		return true
	}
	return false
}

// globQuote escapes path.Match metacharacters so that a mount point
// matches only itself.
func globQuote(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
