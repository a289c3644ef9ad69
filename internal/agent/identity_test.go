package agent

import (
	"context"
	"crypto/tls"
	"net"
	"os"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/plumbline/plumbline/internal/ingest"
	"github.com/plumbline/plumbline/internal/pgtest"
	"github.com/plumbline/plumbline/internal/store"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// realServer is the production ingest service (internal/ingest) over a
// real store, served over TCP with mutual TLS on a fixed loopback address
// so that it can be stopped and started again.
type realServer struct {
	t    *testing.T
	st   *store.Store
	addr string
	gs   *grpc.Server
	tls  *tls.Config
}

func startRealServer(t *testing.T, p *pki, dsn string) *realServer {
	t.Helper()
	st, err := store.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	s := &realServer{t: t, st: st, addr: "127.0.0.1:0", tls: &tls.Config{
		MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{p.serverCert},
		ClientCAs: p.pool, ClientAuth: tls.RequireAndVerifyClientCert,
	}}
	s.start()
	t.Cleanup(func() { s.stop(); st.Close() })
	return s
}

func (s *realServer) start() {
	s.t.Helper()
	gs, _, err := ingest.NewGRPCServer(ingest.New(s.st, ingest.Options{ReportInterval: 50 * time.Millisecond, RatePerSecond: -1}), s.tls)
	if err != nil {
		s.t.Fatal(err)
	}
	var ln net.Listener
	for range 50 { // the port may linger briefly after a stop
		if ln, err = net.Listen("tcp", s.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		s.t.Fatal(err)
	}
	s.addr, s.gs = ln.Addr().String(), gs
	go gs.Serve(ln)
}

func (s *realServer) stop() {
	if s.gs != nil {
		s.gs.Stop()
		s.gs = nil
	}
}

// storedRecords counts every record the store holds.
func (s *realServer) storedRecords() uint64 {
	s.t.Helper()
	counts, err := s.st.RecordCounts(context.Background())
	if err != nil {
		s.t.Fatal(err)
	}
	var n uint64
	for _, c := range counts {
		n += c
	}
	return n
}

// mountPoints are the present volumes the store lists for agent id.
func (s *realServer) mountPoints(id string) []string {
	s.t.Helper()
	vols, err := s.st.ListVolumes(context.Background())
	if err != nil {
		s.t.Fatal(err)
	}
	var out []string
	for _, v := range vols {
		if v.AgentID == id {
			out = append(out, v.MountPoint)
		}
	}
	return out
}

// runAgent runs an agent until stop is called; stop returns its spool's
// final counters.
func runAgent(t *testing.T, a *Agent) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var stopped bool
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	}
	t.Cleanup(stop)
	return stop
}

// settled is how many records of a stopped agent's spool were settled
// (acknowledged by the server): every sequence numbered minus those still
// held (the spool drops none in these tests).
func settled(a *Agent) uint64 {
	st := a.Spool().Stats()
	if st.Dropped != 0 {
		panic("the spool dropped records")
	}
	return st.NextSequence - 1 - uint64(st.Records)
}

// TestSpoolResetKeepsRecords is issue 11 §1's reproduction, against the
// production server over gRPC+TLS on SQLite and PostgreSQL: an agent runs,
// stops; its spool directory is deleted and its geometry changes; the
// server is down while the new spool fills (its sequences start at 1
// again, below the server's high-water mark of the old spool); the server
// comes back. Every record the new spool settled must be stored — none
// deleted unsent as "already delivered" — and the server must hold the new
// geometry.
func TestSpoolResetKeepsRecords(t *testing.T) {
	pgtest.ForEachEngine(t, func(t *testing.T, dsn string) {
		p := newPKI(t, "db1")
		srv := startRealServer(t, p, dsn)
		dir := t.TempDir()
		c := testConfig(srv.addr, p, dir)
		fp := &fakeProber{sleep: time.Millisecond}

		a1 := newTestAgent(t, c, p, fp.run, fakeInventory("/data1"))
		stop := runAgent(t, a1)
		waitFor(t, "40 records of the first spool stored", func() bool { return srv.storedRecords() >= 40 })
		stop()
		// A batch in flight at the stop may be stored yet unacknowledged.
		first := srv.storedRecords()
		if s, n := settled(a1), a1.Spool().Stats().NextSequence-1; first < s || first > n {
			t.Fatalf("first spool: %d records settled of %d, the server stored %d", s, n, first)
		}

		if err := os.RemoveAll(c.Spool.Dir); err != nil {
			t.Fatal(err)
		}
		srv.stop()
		a2 := newTestAgent(t, c, p, fp.run, fakeInventory("/data1", "/data9"))
		stop = runAgent(t, a2)
		waitFor(t, "25 records in the new spool while the server is down", func() bool { return a2.Spool().Stats().Records >= 25 })
		srv.start()
		spooled := a2.Spool().Stats().NextSequence - 1
		waitFor(t, "the new spool's records to be settled", func() bool { return settled(a2) >= spooled })
		deadline := time.Now().Add(10 * time.Second)
		for !slices.Contains(srv.mountPoints("db1"), "/data9") && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		stop()
		if got := srv.mountPoints("db1"); !slices.Equal(got, []string{"/data1", "/data9"}) {
			t.Errorf("volumes the server holds after the reset = %v, want [/data1 /data9] (the new spool's start snapshot)", got)
		}
		second, numbered := settled(a2), a2.Spool().Stats().NextSequence-1
		switch got := srv.storedRecords(); {
		case got < first+second:
			t.Errorf("stored %d records, want at least %d (%d of the first spool + %d the new spool settled): %d settled without being stored",
				got, first+second, first, second, first+second-got)
		case got > first+numbered:
			t.Errorf("stored %d records, more than the %d both spools numbered: duplicates", got, first+numbered)
		}
		t.Logf("first spool %d records, new spool %d settled, server holds %d", first, second, srv.storedRecords())
	})
}
