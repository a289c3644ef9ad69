package ingest

import (
	"testing"

	"google.golang.org/grpc/codes"

	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// Host facts with control characters are refused (issue 11: ESC, CR and
// NUL in a hostname reached operators' terminals through `server
// inventory list` and the CSV); the agent is not registered. Printable
// non-ASCII text is fine.
func TestHelloRefusesControlCharacters(t *testing.T) {
	t.Parallel()
	e := startServer(t, sqliteDSN(t), newPKI(t), Options{})
	c := e.agent(t, "db1")
	for _, tc := range []struct {
		name string
		host *plumblinev1.Host
		ver  string
		want string
	}{
		{"escape", &plumblinev1.Host{Hostname: "db1\x1b[2J\x1b[31mOK"}, "1.0", "host.hostname"},
		{"carriage return", &plumblinev1.Host{Hostname: "db1", Kernel: "6.1\rfake"}, "1.0", "host.kernel"},
		{"nul", &plumblinev1.Host{Hostname: "db1", MachineId: "m\x00"}, "1.0", "host.machine_id"},
		{"os", &plumblinev1.Host{Hostname: "db1", Os: "linux\n"}, "1.0", "host.os"},
		{"agent version", &plumblinev1.Host{Hostname: "db1"}, "1.0\u009b31m", "agent_version"},
		{"bidi override", &plumblinev1.Host{Hostname: "db1\u202egpj.exe"}, "1.0", "host.hostname"},
		{"bidi isolate", &plumblinev1.Host{Hostname: "db1", Os: "linux\u2067"}, "1.0", "host.os"},
		{"right-to-left mark", &plumblinev1.Host{Hostname: "db1", Kernel: "6.1\u200f"}, "1.0", "host.kernel"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Hello(ctxT(t), &plumblinev1.HelloRequest{AgentId: "db1", Host: tc.host, AgentVersion: tc.ver})
			wantCode(t, "Hello", err, codes.InvalidArgument, tc.want)
		})
	}
	if n := len(dbRows(t, e.dsn, `SELECT agent_id FROM agents`)); n != 0 {
		t.Fatalf("%d agents registered by refused Hellos, want 0", n)
	}
	if _, err := c.Hello(ctxT(t), &plumblinev1.HelloRequest{AgentId: "db1", Host: &plumblinev1.Host{Hostname: "bücher-db1", Os: "linux"}, AgentVersion: "1.0"}); err != nil {
		t.Fatalf("Hello with a printable non-ASCII hostname: %v", err)
	}
}
