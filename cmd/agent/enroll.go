package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/plumbline/plumbline/internal/enroll"
	"github.com/plumbline/plumbline/internal/labels"
)

const enrollUsage = `usage: agent enroll --server ADDR --token-file FILE --ca-hash sha256:HEX --dir DIR [--agent-id ID]

Joins this host to a Plumbline server (docs/install.md): checks that
the server holds a certificate from the CA with the pinned hash (as
'server token create' printed it) before the token leaves this host,
generates a key here, and writes DIR/ca.crt, DIR/agent.crt and
DIR/agent.key (0600). It prints an agent config that names them (a
complete one: save it as the agent's config, or copy its server keys into
yours); the running agent renews the certificate by itself.

flags:
`

// runEnroll is `agent enroll`.
func runEnroll(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fl := newFlagSet("enroll", enrollUsage, stderr)
	var (
		server     = fl.String("server", "", "the server's gRPC `address` (host:port)")
		serverName = fl.String("server-name", "", "the `name` the server certificate must carry (default: the host of --server)")
		tokenFile  = fl.String("token-file", "", "`file` holding the join token")
		caHash     = fl.String("ca-hash", "", "the CA pin, sha256:HEX")
		dir        = fl.String("dir", "", "`directory` for ca.crt, agent.crt and agent.key")
		agentID    = fl.String("agent-id", "", "the identity to enroll as (default: this host's name)")
		timeout    = fl.Duration("timeout", 30*time.Second, "bound of each call to the server")
		spoolDir   = fl.String("spool-dir", defaultSpoolDir, "the spool `directory` the printed agent config names")
	)
	if code, ok := parseFlags(fl, args); !ok {
		return code
	}
	if fl.NArg() > 0 || *server == "" || *tokenFile == "" || *caHash == "" || *dir == "" {
		fl.Usage()
		return 2
	}
	tok, err := enroll.ReadTokenFile(*tokenFile)
	if err != nil {
		fmt.Fprintf(stderr, "agent enroll: %v\n", err)
		return 1
	}
	res, err := enroll.Enroll(ctx, enroll.Options{
		Server: *server, ServerName: *serverName, Token: tok, Pin: *caHash, Dir: *dir, AgentID: *agentID, Timeout: *timeout,
	})
	if err != nil {
		fmt.Fprintf(stderr, "agent enroll: %v\n", err)
		return 1
	}
	printed, err := enrolledConfig(res, *server, *serverName, *spoolDir)
	if err != nil {
		fmt.Fprintf(stderr, "agent enroll: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "# enrolled as agent %s (certificate valid until %s, renewed automatically)\n# labels: %s\n# agent config (agent run --config FILE --check accepts it as it is):\n%s",
		res.AgentID, res.NotAfter.UTC().Format(time.RFC3339), labels.Format(res.Labels), printed)
	return 0
}

// defaultSpoolDir is the packaged agent's spool: its unit's state
// directory (StateDirectory=plumbline-agent).
const defaultSpoolDir = "/var/lib/plumbline-agent/spool"

// enrolledConfig is the agent config that uses the enrolled files: a
// complete one (the keys `agent run --check` requires), absolute paths.
func enrolledConfig(res enroll.Result, server, serverName, spoolDir string) (string, error) {
	type tlsKeys struct {
		CAFile     string `yaml:"ca_file"`
		CertFile   string `yaml:"cert_file"`
		KeyFile    string `yaml:"key_file"`
		ServerName string `yaml:"server_name,omitempty"`
	}
	var c struct {
		Server struct {
			Address string  `yaml:"address"`
			TLS     tlsKeys `yaml:"tls"`
		} `yaml:"server"`
		Spool struct {
			Dir string `yaml:"dir"`
		} `yaml:"spool"`
	}
	c.Server.Address, c.Spool.Dir = server, abs(spoolDir)
	c.Server.TLS = tlsKeys{CAFile: abs(res.CAFile), CertFile: abs(res.CertFile), KeyFile: abs(res.KeyFile), ServerName: serverName}
	var b strings.Builder
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&c); err != nil {
		return "", err
	}
	return b.String(), enc.Close()
}

func abs(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}
