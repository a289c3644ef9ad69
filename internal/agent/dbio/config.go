package dbio

import (
	"fmt"
	"net"

	"github.com/plumbline/plumbline/internal/agentkeys"
)

// Config is one database source, as the agent's configuration states it
// (defaults applied, validated).
type Config = agentkeys.DatabaseSource

func splitHostPort(addr string) (host, port string, err error) {
	host, port, err = net.SplitHostPort(addr)
	if err != nil {
		return "", "", fmt.Errorf("address %q: %w", addr, err)
	}
	return host, port, nil
}
