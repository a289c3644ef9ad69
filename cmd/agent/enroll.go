package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/plumbline/plumbline/internal/enroll"
)

const enrollUsage = `usage: agent enroll --server ADDR --token-file FILE --ca-hash sha256:HEX --dir DIR [--agent-id ID]

Joins this host to a Plumbline server (docs/install.md): checks that
the server holds a certificate from the CA with the pinned hash (as
'server token create' printed it) before the token leaves this host,
generates a key here, and writes DIR/ca.crt, DIR/agent.crt and
DIR/agent.key (0600). Name them in the agent config's server.tls; the
running agent renews the certificate by itself.

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
	fmt.Fprintf(stdout, `enrolled as agent %s (certificate valid until %s, renewed automatically)
labels: %s
agent config:
server:
  address: %s
  tls:
    ca_file: %s
    cert_file: %s
    key_file: %s
`, res.AgentID, res.NotAfter.UTC().Format(time.RFC3339), enroll.FormatLabels(res.Labels), *server, res.CAFile, res.CertFile, res.KeyFile)
	return 0
}
