package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/plumbline/plumbline/internal/agent/config"
	"github.com/plumbline/plumbline/internal/server/devca"
)

// devTarget reads DIR/dev/agent.yaml (server address, CA file, server
// name) and loads the dev CA at DIR/dev/../ca to mint agent certificates.
func devTarget(c Config) (Target, Issuer, error) {
	ac, err := config.Load(filepath.Join(c.DevDir, "agent.yaml"))
	if err != nil {
		return Target{}, nil, fmt.Errorf("dev dir: %w", err)
	}
	ca, err := devca.Load(filepath.Join(c.DevDir, "..", "ca"))
	if err != nil {
		return Target{}, nil, fmt.Errorf("dev dir: %w (fleetsim mints agent certificates with the dev CA in DIR/ca)", err)
	}
	roots := x509.NewCertPool()
	caFile := ac.Server.TLS.CAFile
	if caFile == "" {
		caFile = filepath.Join(c.DevDir, "ca.crt")
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return Target{}, nil, fmt.Errorf("dev dir: server CA: %w", err)
	}
	if !roots.AppendCertsFromPEM(pem) {
		return Target{}, nil, fmt.Errorf("dev dir: %s holds no PEM certificate", caFile)
	}
	addr := ac.Server.Address
	if c.Address != "" {
		addr = c.Address
	}
	if addr == "" {
		return Target{}, nil, errors.New("dev dir: agent.yaml names no server.address (and no --server)")
	}
	addrs := strings.Split(addr, ",")
	name := ac.Server.TLS.ServerName
	if name == "" {
		name, _, _ = net.SplitHostPort(addrs[0])
	}
	t := Target{Address: addrs[0], ServerName: name, Roots: roots}
	if len(addrs) > 1 {
		t.Addresses = addrs
	}
	return t, caIssuer(ca), nil
}

// caIssuer mints agent certificates with ca.
func caIssuer(ca *devca.CA) Issuer {
	return func(id string) (tls.Certificate, error) {
		leaf, err := ca.IssueAgent(id)
		if err != nil {
			return tls.Certificate{}, err
		}
		return leaf.TLSCertificate(), nil
	}
}
