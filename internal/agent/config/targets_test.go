package config

import (
	"slices"
	"testing"
)

// TestServerTargets: server.address and server.addresses together are the
// replicas the agent may report to; addresses alone satisfy `agent run`.
func TestServerTargets(t *testing.T) {
	s := Server{Address: "a.example:7443", Addresses: []string{"b.example:7443", "c.example:7443"}}
	if got, want := s.Targets(), []string{"a.example:7443", "b.example:7443", "c.example:7443"}; !slices.Equal(got, want) {
		t.Errorf("Targets() = %v, want %v", got, want)
	}
	a := Default()
	a.Server = Server{Addresses: []string{"b.example:7443"}, Insecure: true}
	a.Spool.Dir = t.TempDir()
	if err := a.ValidateRun(); err != nil {
		t.Errorf("ValidateRun with server.addresses only: %v", err)
	}
	a.Server.Addresses = nil
	if err := a.ValidateRun(); err == nil {
		t.Error("ValidateRun without any server address: nil error")
	}
}
