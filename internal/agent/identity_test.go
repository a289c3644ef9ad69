package agent

import (
	"context"
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/plumbline/plumbline/internal/agent/spool"
	"github.com/plumbline/plumbline/internal/lab/pgtest"
	"github.com/plumbline/plumbline/internal/server/ingest"
	"github.com/plumbline/plumbline/internal/server/store"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// realServer is the production ingest service (internal/server/ingest) over a
// real store, served over TCP with mutual TLS on a fixed loopback address
// so that it can be stopped and started again.
type realServer struct {
	t    *testing.T
	st   *store.Store
	addr string
	gs   *grpc.Server
	tls  *tls.Config
	opts ingest.Options
	svc  *ingest.Service
}

func startRealServer(t *testing.T, p *pki, dsn string) *realServer {
	t.Helper()
	return startRealServerWith(t, p, dsn, ingest.Options{ReportInterval: 50 * time.Millisecond, RatePerSecond: -1})
}

// startRealServerWith is startRealServer with the ingest options given.
func startRealServerWith(t *testing.T, p *pki, dsn string, opts ingest.Options) *realServer {
	t.Helper()
	st, err := store.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	s := &realServer{t: t, st: st, addr: "127.0.0.1:0", tls: &tls.Config{
		MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{p.serverCert},
		ClientCAs: p.pool, ClientAuth: tls.RequireAndVerifyClientCert,
	}, opts: opts}
	s.start()
	t.Cleanup(func() { s.stop(); st.Close() })
	return s
}

func (s *realServer) start() {
	s.t.Helper()
	s.svc = ingest.New(s.st, s.opts)
	gs, _, err := ingest.NewGRPCServer(s.svc, s.tls)
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

// stop stops the server at once: calls in flight are cut.
func (s *realServer) stop() {
	if s.gs != nil {
		s.gs.Stop()
		s.gs = nil
	}
}

// drain stops the server once its handlers have returned (call it with
// no agent connected), so that a batch in flight when the agent stopped
// is stored, or not, before the caller counts what the store holds.
func (s *realServer) drain() {
	if s.gs != nil {
		s.gs.GracefulStop()
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
		srv.drain()
		// A batch in flight at the stop may be stored yet unacknowledged;
		// with the server stopped, nothing more arrives.
		first := srv.storedRecords()
		if s, n := settled(a1), a1.Spool().Stats().NextSequence-1; first < s || first > n {
			t.Fatalf("first spool: %d records settled of %d, the server stored %d", s, n, first)
		}

		if err := os.RemoveAll(c.Spool.Dir); err != nil {
			t.Fatal(err)
		}
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

// TestTwoAgentsOneIdentity: two hosts share one certificate (two spools,
// two incarnations). Neither loses a record or has one counted twice, and
// the server says there is a conflict (store, hosts API, metric).
func TestTwoAgentsOneIdentity(t *testing.T) {
	pgtest.ForEachEngine(t, func(t *testing.T, dsn string) {
		p := newPKI(t, "db1")
		srv := startRealServer(t, p, dsn)
		fp := &fakeProber{sleep: time.Millisecond}
		ca, cb := testConfig(srv.addr, p, t.TempDir()), testConfig(srv.addr, p, t.TempDir())
		a := newTestAgent(t, ca, p, fp.run, fakeInventory("/data1"))
		b := newTestAgent(t, cb, p, fp.run, fakeInventory("/dataB"))
		if a.Spool().Incarnation() == b.Spool().Incarnation() {
			t.Fatal("two spools, one incarnation")
		}
		stopA := runAgent(t, a)
		waitFor(t, "the first host's records", func() bool { return srv.storedRecords() >= 10 })
		stopB := runAgent(t, b)
		conflicts := func() uint64 {
			hosts, err := srv.st.ListHosts(context.Background())
			if err != nil || len(hosts) != 1 {
				t.Fatalf("ListHosts = %v, %v", hosts, err)
			}
			return hosts[0].IdentityConflicts
		}
		waitFor(t, "an identity conflict", func() bool { return conflicts() > 0 })
		waitFor(t, "both hosts' records", func() bool { return settled(a) >= 30 && settled(b) >= 30 })
		stopA()
		stopB()
		for _, ag := range []*Agent{a, b} {
			inc := ag.Spool().Incarnation()
			hw, err := srv.st.HighWater(context.Background(), "db1", inc)
			if err != nil {
				t.Fatal(err)
			}
			if s, n := settled(ag), ag.Spool().Stats().NextSequence-1; hw < s || hw > n {
				t.Errorf("incarnation %s: high water %d, want %d settled to %d numbered", inc, hw, s, n)
			}
		}
		got := srv.storedRecords()
		lo, hi := settled(a)+settled(b), a.Spool().Stats().NextSequence-1+b.Spool().Stats().NextSequence-1
		if got < lo || got > hi {
			t.Errorf("stored %d records, want %d (settled) to %d (numbered)", got, lo, hi)
		}
		t.Logf("two hosts on one certificate: %d records stored, %d conflicts counted", got, conflicts())
	})
}

// TestServerLostGeometryResync: the server's copy of an agent's geometry
// is replaced behind the agent's back (a database restored from a backup,
// or another writer); on its next connection the agent sees another
// digest in Hello and sends its snapshot again.
func TestServerLostGeometryResync(t *testing.T) {
	dsn := "sqlite://" + t.TempDir() + "/plumbline.db"
	p := newPKI(t, "db1")
	srv := startRealServer(t, p, dsn)
	c := testConfig(srv.addr, p, t.TempDir())
	c.Probes = nil
	a := newTestAgent(t, c, p, (&fakeProber{}).run, fakeInventory("/data1"))
	runAgent(t, a)
	waitFor(t, "the start snapshot", func() bool { return slices.Equal(srv.mountPoints("db1"), []string{"/data1"}) })
	srv.stop()
	other := store.Record{Sequence: 1, Kind: store.KindGeometry, ProducedAt: time.Now(), Payload: []byte{},
		Volumes: []store.Volume{{MountPoint: "/restored", Verdict: "unknown", Geometry: []byte{}}}}
	if _, err := srv.st.AppendBatchFrom(context.Background(), "db1", "from-a-backup", 0, []store.Record{other}); err != nil {
		t.Fatal(err)
	}
	if got := srv.mountPoints("db1"); !slices.Equal(got, []string{"/restored"}) {
		t.Fatalf("volumes after the injected snapshot = %v", got)
	}
	srv.start()
	waitFor(t, "the agent's geometry again", func() bool { return slices.Equal(srv.mountPoints("db1"), []string{"/data1"}) })
	if n := testutilCount(t, a, "resync"); n != 1 {
		t.Errorf("resync snapshots = %v, want 1", n)
	}
}

// TestUpgradedSpoolLegacyRecords: a spool written by an agent from before
// incarnations holds records 1..8, of which the server had stored 1..5
// (the old agent died before their acknowledgement reached its spool).
// The upgraded agent sends 1..8 with the legacy incarnation (1..5 are
// recognised as replays) and its new records in its new incarnation.
func TestUpgradedSpoolLegacyRecords(t *testing.T) {
	dsn := "sqlite://" + t.TempDir() + "/plumbline.db"
	p := newPKI(t, "db1")
	srv := startRealServer(t, p, dsn)
	c := testConfig(srv.addr, p, t.TempDir())
	c.Probes = nil
	inv, _ := fakeInventory("/data1")(context.Background())
	legacy := make([]*plumblinev1.Record, 8)
	sp, err := spool.Open(spool.Options{Dir: c.Spool.Dir})
	if err != nil {
		t.Fatal(err)
	}
	for i := range legacy {
		if _, err := sp.Append(func(seq uint64) ([]byte, error) {
			legacy[i] = &plumblinev1.Record{Sequence: seq, ProducedAt: timestamppb.Now(),
				Payload: &plumblinev1.Record_Geometry{Geometry: &plumblinev1.GeometrySnapshot{Inventory: inv.Inventory, Trigger: "interval"}}}
			return proto.Marshal(legacy[i])
		}); err != nil {
			t.Fatal(err)
		}
	}
	sp.Close()
	// As an old agent left it: segments without headers (their two
	// 48-byte copies cut off), no incarnation file.
	segs, _ := filepath.Glob(filepath.Join(c.Spool.Dir, "*.seg"))
	for _, p := range segs {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b[96:], 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// The old agent's delivery of 1..5: no incarnation.
	tc, _, err := ClientTLS(c.Server)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient(srv.addr, grpc.WithTransportCredentials(credentials.NewTLS(tc)))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	old := plumblinev1.NewAgentServiceClient(cc)
	if _, err := old.Hello(context.Background(), &plumblinev1.HelloRequest{AgentId: "db1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := old.Report(context.Background(), &plumblinev1.ReportRequest{AgentId: "db1", Records: legacy[:5]}); err != nil {
		t.Fatal(err)
	}

	a := newTestAgent(t, c, p, (&fakeProber{}).run, fakeInventory("/data1"))
	if a.Spool().LegacyThrough() != 8 {
		t.Fatalf("legacy through %d, want 8", a.Spool().LegacyThrough())
	}
	stop := runAgent(t, a)
	waitFor(t, "the spool to drain", func() bool { return a.Spool().Stats().Records == 0 && a.Spool().Stats().NextSequence > 9 })
	stop()
	if hw, err := srv.st.HighWater(context.Background(), "db1", ""); err != nil || hw != 8 {
		t.Errorf("legacy incarnation high water %d, %v; want 8", hw, err)
	}
	numbered := a.Spool().Stats().NextSequence - 1
	if hw, err := srv.st.HighWater(context.Background(), "db1", a.Spool().Incarnation()); err != nil || hw != numbered {
		t.Errorf("new incarnation high water %d, %v; want %d", hw, err, numbered)
	}
	if got := srv.storedRecords(); got != numbered {
		t.Errorf("stored %d records, want %d: each of the spool's records once", got, numbered)
	}
}

// testutilCount is the agent's snapshots counter for one trigger.
func testutilCount(t *testing.T, a *Agent, trigger string) float64 {
	t.Helper()
	var m dto.Metric
	if err := a.metrics.snapshots.WithLabelValues(trigger).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
