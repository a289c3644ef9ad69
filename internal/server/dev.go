package server

import (
	"bytes"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/plumbline/plumbline/internal/agentkeys"
	"github.com/plumbline/plumbline/internal/atomicfile"
	"github.com/plumbline/plumbline/internal/bytesize"
	"github.com/plumbline/plumbline/internal/identity"
	"github.com/plumbline/plumbline/internal/server/config"
	"github.com/plumbline/plumbline/internal/server/devca"
	"github.com/plumbline/plumbline/internal/vocab"
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

// DevAgentID is the dev agent's identity: this host's name.
func DevAgentID() string {
	h, err := os.Hostname()
	if err != nil || identity.CheckAgentID(h) != nil {
		return "localhost"
	}
	return h
}

// prepareDev creates (or reuses) the CA and the certificates, and the
// directories, and points cfg's TLS settings at them. It returns the
// layout; writeDevAgentConfig writes agent.yaml once the address is known.
func prepareDev(cfg *config.Config) (devLayout, error) {
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
	id := DevAgentID()
	if err := reuseOrIssue(ca, l.agentCert, l.agentK, x509.ExtKeyUsageClientAuth, func(c *x509.Certificate) bool {
		got, err := identity.FromCertificate(c)
		return err == nil && got == id
	}, func() (*devca.Leaf, error) { return ca.IssueAgent(id) }); err != nil {
		return l, fmt.Errorf("dev: agent certificate: %w", err)
	}
	if err := atomicfile.Write(l.agentCA, ca.CertPEM, 0o644); err != nil {
		return l, fmt.Errorf("dev: %w", err)
	}
	cfg.GRPC.TLS = config.TLSConfig{CertFile: l.serverCert, KeyFile: l.serverKey, ClientCAFile: ca.CertPath()}
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
#
# Labels the server's central policy selects this host by, and maintenance
# windows in which no probe runs:
# labels: {role: postgres}
# maintenance_windows:
#   - {name: nightly, schedule: "0 2 * * *", duration: 1h, time_zone: UTC}
`

// devAgentHeader heads DIR/dev/agent.yaml.
const devAgentHeader = `# Written by 'server --dev' at every start; edits are overwritten.
# Put your own keys (declared_devices, probes, labels, maintenance_windows,
# ...) in agent.local.yaml: it is never rewritten, and its keys replace
# these. Run an agent with it:  agent run --config %s
# agent_id is optional (default: the certificate's name); web is the
# agent's /healthz and /metrics (a free port; empty: off); allow_cached is
# for dev only (tmpfs/overlay data directories).
`

// devAgentFile is the part of the agent's configuration file (the agent's
// internal/agent/config) that agent.yaml sets, written here without linking the
// agent's configuration package; a test loads the file with the agent's
// own loader, so the two cannot drift. The keys it leaves out take the
// agent's defaults.
type devAgentFile struct {
	AgentID       string                    `yaml:"agent_id"`
	Server        devAgentServer            `yaml:"server"`
	Spool         devAgentSpool             `yaml:"spool"`
	Probes        []agentkeys.ProbeSchedule `yaml:"probes"`
	Web           devAgentWeb               `yaml:"web"`
	OverrideFiles []string                  `yaml:"override_files"`
}

type devAgentServer struct {
	Address  string      `yaml:"address"`
	TLS      devAgentTLS `yaml:"tls"`
	Insecure bool        `yaml:"insecure,omitempty"`
}

type devAgentTLS struct {
	CAFile     string `yaml:"ca_file"`
	CertFile   string `yaml:"cert_file"`
	KeyFile    string `yaml:"key_file"`
	ServerName string `yaml:"server_name"`
}

type devAgentSpool struct {
	Dir string `yaml:"dir"`
}

type devAgentWeb struct {
	ListenAddress string `yaml:"listen_address,omitempty"`
}

// devAgentConfig is the dev agent's configuration: this server, the dev
// certificates, and probes of the probe directory's volume.
func devAgentConfig(l devLayout, grpcAddr, webAddr string, insecure bool) devAgentFile {
	iops := 50.0
	return devAgentFile{
		AgentID: DevAgentID(),
		Server: devAgentServer{Address: grpcAddr, Insecure: insecure,
			TLS: devAgentTLS{CAFile: l.agentCA, CertFile: l.agentCert, KeyFile: l.agentK, ServerName: "localhost"}},
		Spool: devAgentSpool{Dir: l.spoolDir},
		Probes: []agentkeys.ProbeSchedule{{
			MountPoint: globQuote(mountPointOf(l.probeDir)), Dir: l.probeDir, Kinds: vocab.DefaultProbeKinds(),
			Every: 5 * time.Minute, Ops: 200, IOPS: &iops, MaxDuration: 30 * time.Second, FileSize: 64 * bytesize.MiB, AllowCached: true,
		}},
		Web:           devAgentWeb{ListenAddress: webAddr},
		OverrideFiles: []string{filepath.Base(l.agentLocalYAML)},
	}
}

// writeDevAgentConfig writes DIR/dev/agent.yaml for an agent on this host
// (devAgentFile), and
// DIR/dev/agent.local.yaml when it does not exist.
func writeDevAgentConfig(l devLayout, grpcAddr, webAddr string, insecure bool) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, devAgentHeader, l.agentYAML)
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(devAgentConfig(l, grpcAddr, webAddr, insecure)); err != nil {
		return err
	}
	if _, err := os.Lstat(l.agentLocalYAML); errors.Is(err, os.ErrNotExist) {
		if err := atomicfile.Write(l.agentLocalYAML, []byte(devAgentLocalExample), 0o600); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	return atomicfile.Write(l.agentYAML, b.Bytes(), 0o600)
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
