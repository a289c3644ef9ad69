package agent

import (
	"context"
	"net"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"

	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// TestFailoverAcrossAddresses: an agent given two server replicas (one
// store behind both, as replicas share one PostgreSQL) keeps reporting
// when the one it uses stops — to the other — and again when that one
// stops and the first is back; every record is stored exactly once.
func TestFailoverAcrossAddresses(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	p := newPKI(t, "db1")
	one := newTestServer(t, p) // replica one, and the shared store
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	two := &replicaListener{addr: ln.Addr().String(), srv: grpc.NewServer(grpc.Creds(one.creds))}
	plumblinev1.RegisterAgentServiceServer(two.srv, one)
	go two.srv.Serve(ln)

	c := testConfig(one.addr, p, t.TempDir())
	c.Server.Address, c.Server.Addresses = "", []string{one.addr, two.addr}
	a := newTestAgent(t, c, p, (&fakeProber{sleep: time.Millisecond}).run, fakeInventory("/data1", "/data2"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()

	stored := func() int { s, _, _ := one.snapshot(); return len(s) }
	waitFor(t, "20 records", func() bool { return stored() >= 20 })
	one.stop() // the agent is on either: now only two serves
	n := stored()
	waitFor(t, "20 more records through replica two", func() bool { return stored() >= n+20 })
	one.restart(t)
	two.srv.Stop()
	n = stored()
	waitFor(t, "20 more records through replica one", func() bool { return stored() >= n+20 })
	target := a.Spool().Stats().NextSequence + 5
	waitFor(t, "the server to catch up", func() bool { _, hw, _ := one.snapshot(); return hw >= target })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	one.stop()
	s, hw, received := one.snapshot()
	checkExactlyOnce(t, s)
	if uint64(len(s)) != hw {
		t.Errorf("stored %d records, high water %d", len(s), hw)
	}
	one.mu.Lock()
	hellos := len(one.hellos)
	one.mu.Unlock()
	if hellos < 2 {
		t.Errorf("%d Hellos; want one per connection, at least 2 across the failovers", hellos)
	}
	t.Logf("%d records stored exactly once (%d received), %d Hellos", len(s), received, hellos)
}

// replicaListener is a second gRPC server in front of a testServer's state.
type replicaListener struct {
	addr string
	srv  *grpc.Server
}
