package agent

import (
	"fmt"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"

	"github.com/plumbline/plumbline/internal/agent/config"
)

// serversScheme is the resolver scheme of a list of server addresses.
const serversScheme = "plumbline-servers"

// serviceConfig spreads agents over the server replicas: pick_first
// connects to one address at a time — the first that answers, in an order
// shuffled per agent — and, when that connection is lost, to the next
// (every session starts with a Hello, see session).
const serviceConfig = `{"loadBalancingConfig":[{"pick_first":{"shuffleAddressList":true}}]}`

// dialServer returns the connection to the server replicas: server.address
// alone (a DNS name resolves to every A record), or it and
// server.addresses as a fixed list. Connection attempts back off
// exponentially from base to ceiling with jitter (gRPC's reconnect
// backoff), across the whole list. extra are more options (the
// certificate renewer's).
func dialServer(c config.Server, creds credentials.TransportCredentials, base, ceiling time.Duration, extra ...grpc.DialOption) (*grpc.ClientConn, error) {
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultServiceConfig(serviceConfig),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: base, Multiplier: 1.6, Jitter: 0.2, MaxDelay: ceiling},
			MinConnectTimeout: 5 * time.Second, // a replica whose host vanished (no RST) costs this, then the next
		}),
	}
	opts = append(opts, extra...)
	targets := c.Targets()
	if len(targets) == 0 {
		return nil, fmt.Errorf("server.address: none")
	}
	target := targets[0]
	if len(targets) > 1 {
		r := manual.NewBuilderWithScheme(serversScheme)
		r.InitialState(resolver.State{Addresses: serverAddresses(targets)})
		opts = append(opts, grpc.WithResolvers(r))
		target = serversScheme + ":///servers"
	}
	conn, err := grpc.NewClient(target, opts...)
	if err != nil {
		return nil, fmt.Errorf("server.address: %w", err)
	}
	return conn, nil
}

// serverAddresses are the resolver addresses of host:port targets, each
// checked in TLS against its own host name (unless server.tls.server_name
// names one for all, see ClientTLS).
func serverAddresses(targets []string) []resolver.Address {
	out := make([]resolver.Address, 0, len(targets))
	for _, t := range targets {
		host, _, _ := net.SplitHostPort(t)
		out = append(out, resolver.Address{Addr: t, ServerName: host})
	}
	return out
}
