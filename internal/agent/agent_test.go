package agent

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/plumbline/plumbline/internal/agent/config"
	"github.com/plumbline/plumbline/internal/agent/probe"
	"github.com/plumbline/plumbline/internal/histogram"
	"github.com/plumbline/plumbline/internal/vocab"
	"github.com/plumbline/plumbline/internal/wire"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// --- certificates ---------------------------------------------------------

type pki struct {
	dir                       string
	ca, caKey                 any
	caCert                    *x509.Certificate
	caFile, certFile, keyFile string
	serverCert                tls.Certificate
	pool                      *x509.CertPool
}

func newPKI(t *testing.T, agentCN string) *pki {
	t.Helper()
	p := &pki{dir: t.TempDir(), pool: x509.NewCertPool()}
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	p.caCert, _ = x509.ParseCertificate(der)
	p.pool.AddCert(p.caCert)
	p.caFile = p.write(t, "ca.crt", "CERTIFICATE", der)
	leaf := func(cn string, serial int64, usage x509.ExtKeyUsage, ips []net.IP) ([]byte, *ecdsa.PrivateKey) {
		k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tm := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: ips, DNSNames: []string{"localhost"},
		}
		d, err := x509.CreateCertificate(rand.Reader, tm, p.caCert, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return d, k
	}
	sDER, sKey := leaf("localhost", 2, x509.ExtKeyUsageServerAuth, []net.IP{net.ParseIP("127.0.0.1")})
	p.serverCert = tls.Certificate{Certificate: [][]byte{sDER}, PrivateKey: sKey}
	cDER, cKey := leaf(agentCN, 3, x509.ExtKeyUsageClientAuth, nil)
	p.certFile = p.write(t, "agent.crt", "CERTIFICATE", cDER)
	kb, _ := x509.MarshalECPrivateKey(cKey)
	p.keyFile = p.write(t, "agent.key", "EC PRIVATE KEY", kb)
	return p
}

func (p *pki) write(t *testing.T, name, typ string, der []byte) string {
	f := filepath.Join(p.dir, name)
	if err := os.WriteFile(f, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// --- the in-test server ---------------------------------------------------

// testServer is a minimal AgentService: mTLS, identity from the client
// certificate, dedup by sequence, the high-water mark with first_sequence.
type testServer struct {
	plumblinev1.UnimplementedAgentServiceServer
	mu       sync.Mutex
	stored   map[uint64]*plumblinev1.Record
	received int // records received, resends included
	hw       uint64
	dropped  map[uint64]bool // declared dropped via first_sequence
	order    []uint64        // sequences in the order they were first stored
	hellos   []*plumblinev1.HelloRequest
	maxBatch uint32
	srv      *grpc.Server
	addr     string
	creds    credentials.TransportCredentials
}

func newTestServer(t *testing.T, p *pki) *testServer {
	s := &testServer{stored: map[uint64]*plumblinev1.Record{}, dropped: map[uint64]bool{}, maxBatch: 7}
	s.creds = credentials.NewTLS(&tls.Config{
		MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{p.serverCert},
		ClientCAs: p.pool, ClientAuth: tls.RequireAndVerifyClientCert,
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = ln.Addr().String()
	s.serve(ln)
	return s
}

func (s *testServer) serve(ln net.Listener) {
	s.srv = grpc.NewServer(grpc.Creds(s.creds))
	plumblinev1.RegisterAgentServiceServer(s.srv, s)
	go s.srv.Serve(ln)
}

func (s *testServer) stop() { s.srv.Stop() }

func (s *testServer) restart(t *testing.T) {
	var ln net.Listener
	var err error
	for range 50 { // the port may linger briefly
		if ln, err = net.Listen("tcp", s.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	s.serve(ln)
}

func peerIdentity(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return ""
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(ti.State.PeerCertificates) == 0 {
		return ""
	}
	return ti.State.PeerCertificates[0].Subject.CommonName
}

func (s *testServer) Hello(ctx context.Context, r *plumblinev1.HelloRequest) (*plumblinev1.HelloResponse, error) {
	if r.GetAgentId() != peerIdentity(ctx) {
		return nil, status.Errorf(codes.PermissionDenied, "agent %q is not %q", r.GetAgentId(), peerIdentity(ctx))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hellos = append(s.hellos, r)
	return &plumblinev1.HelloResponse{
		HighWaterSequence: s.hw, MaxBatchRecords: s.maxBatch,
		ReportInterval: durationpb.New(50 * time.Millisecond),
	}, nil
}

func (s *testServer) Report(ctx context.Context, r *plumblinev1.ReportRequest) (*plumblinev1.ReportResponse, error) {
	if r.GetAgentId() != peerIdentity(ctx) {
		return nil, status.Error(codes.PermissionDenied, "wrong identity")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := len(r.GetRecords()); n == 0 || uint32(n) > s.maxBatch {
		return nil, status.Errorf(codes.InvalidArgument, "batch of %d", n)
	}
	var last uint64
	for _, rec := range r.GetRecords() {
		if rec.GetSequence() <= last || rec.GetSequence() < r.GetFirstSequence() {
			return nil, status.Errorf(codes.InvalidArgument, "sequence %d out of order", rec.GetSequence())
		}
		last = rec.GetSequence()
	}
	for q := s.hw + 1; q < r.GetFirstSequence(); q++ {
		if s.stored[q] == nil {
			s.dropped[q] = true
		}
	}
	resp := &plumblinev1.ReportResponse{}
	for _, rec := range r.GetRecords() {
		s.received++
		q := rec.GetSequence()
		if s.stored[q] == nil && q > s.hw {
			s.stored[q] = rec
			s.order = append(s.order, q)
		}
	}
	for s.stored[s.hw+1] != nil || s.dropped[s.hw+1] {
		s.hw++
	}
	for _, rec := range r.GetRecords() {
		if rec.GetSequence() > s.hw {
			resp.AckedSequences = append(resp.AckedSequences, rec.GetSequence())
		}
	}
	resp.HighWaterSequence = s.hw
	return resp, nil
}

func (s *testServer) snapshot() (stored []uint64, hw uint64, received int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]uint64(nil), s.order...), s.hw, s.received
}

// --- fakes ----------------------------------------------------------------

func fakeInventory(vols ...string) DiscoverFunc {
	return func(context.Context) (Discovery, error) {
		inv := &plumblinev1.Inventory{Host: &plumblinev1.Host{Hostname: "db1", Os: "linux"}}
		for i, m := range vols {
			inv.Volumes = append(inv.Volumes, &plumblinev1.Volume{
				MountPoint: m, Device: fmt.Sprintf("/dev/sdb%d", i+1),
				Layers: []*plumblinev1.Layer{{Kind: "partition", Device: fmt.Sprintf("sdb%d", i+1)}, {Kind: "disk", Device: "sdb"}},
			})
		}
		return Discovery{Inventory: inv}, nil
	}
}

// fakeProber completes every run after a short sleep and watches how many
// runs overlap on one directory's device.
type fakeProber struct {
	mu      sync.Mutex
	active  int
	maxSeen int
	runs    int
	sleep   time.Duration
}

func (f *fakeProber) run(ctx context.Context, o probe.Options) (probe.Result, error) {
	f.mu.Lock()
	f.active++
	f.runs++
	f.maxSeen = max(f.maxSeen, f.active)
	f.mu.Unlock()
	select {
	case <-time.After(f.sleep):
	case <-ctx.Done():
	}
	f.mu.Lock()
	f.active--
	f.mu.Unlock()
	var h histogram.Histogram
	h.Observe(100 * time.Microsecond)
	h.Observe(300 * time.Microsecond)
	return probe.Result{Kind: o.Kind, BlockSize: o.BlockSize, QueueDepth: 1, Ops: 2, Bytes: int64(2 * o.BlockSize),
		Duration: 0.001, StartedAt: time.Now(), OpsBudget: o.Ops, Histogram: &h, File: filepath.Join(o.Dir, probe.DefaultFileName)}, nil
}

func testConfig(addr string, p *pki, dir string) config.Agent {
	c := config.Default()
	c.Server = config.Server{Address: addr, TLS: config.ClientTLS{CAFile: p.caFile, CertFile: p.certFile, KeyFile: p.keyFile}}
	c.Spool.Dir = filepath.Join(dir, "spool")
	c.Intervals.Report = 50 * time.Millisecond
	zero := 0.0
	c.Probes = []config.ProbeSchedule{{
		MountPoint: "/data*", Dir: dir, Kinds: []probe.Kind{probe.RandomRead, probe.LogWrite},
		Every: 10 * time.Millisecond, Ops: 10, IOPS: &zero, MaxDuration: time.Second, FileSize: 2 << 20,
		BlockSize: 8 << 10, QueueDepth: 1, Sync: probe.SyncDsync, BusyThreshold: &zero, Jitter: 5 * time.Millisecond,
	}}
	return c
}

func newTestAgent(t *testing.T, c config.Agent, p *pki, prober ProbeFunc, discover DiscoverFunc) *Agent {
	t.Helper()
	tc, id, err := ClientTLS(c.Server)
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(Options{
		Config: c, AgentID: id, Version: "test", Creds: credentials.NewTLS(tc),
		Discover: discover, Probe: prober, MountPoll: 20 * time.Millisecond,
		BackoffBase: 10 * time.Millisecond, BackoffMax: 100 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// checkExactlyOnce asserts the server stored 1..n, each once, in order.
func checkExactlyOnce(t *testing.T, stored []uint64) {
	t.Helper()
	for i, q := range stored {
		if q != uint64(i+1) {
			t.Fatalf("stored sequences %v…: position %d holds %d, want %d (gap, duplicate or reorder)", stored[:min(len(stored), 20)], i, q, i+1)
		}
	}
}

// --- tests ----------------------------------------------------------------

// TestEndToEndOutage runs the agent against a real gRPC server over TCP with
// mutual TLS 1.3, stops the server while probes keep producing, restarts it,
// and checks that every record arrives exactly once and in order, and that
// no goroutine outlives Run.
func TestEndToEndOutage(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	p := newPKI(t, "db1")
	srv := newTestServer(t, p)
	dir := t.TempDir()
	fp := &fakeProber{sleep: time.Millisecond}
	a := newTestAgent(t, testConfig(srv.addr, p, dir), p, fp.run, fakeInventory("/data1", "/data2", "/other"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()

	waitFor(t, "30 records at the server", func() bool { s, _, _ := srv.snapshot(); return len(s) >= 30 })
	srv.stop()
	before := a.Spool().Stats().NextSequence
	waitFor(t, "40 records spooled during the outage", func() bool { return a.Spool().Stats().NextSequence > before+40 })
	if st := a.Spool().Stats(); st.Records < 20 {
		t.Errorf("spool during the outage: %+v, want records accumulating", st)
	}
	srv.restart(t)
	target := a.Spool().Stats().NextSequence + 10
	waitFor(t, "the server to catch up", func() bool { _, hw, _ := srv.snapshot(); return hw >= target })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	srv.stop()

	stored, hw, received := srv.snapshot()
	checkExactlyOnce(t, stored)
	if uint64(len(stored)) != hw {
		t.Errorf("stored %d records, high water %d", len(stored), hw)
	}
	// The first record is the start snapshot.
	srv.mu.Lock()
	if g := srv.stored[1].GetGeometry(); g == nil || g.GetTrigger() != "start" || len(g.GetInventory().GetVolumes()) != 3 {
		t.Errorf("record 1 = %v, want the start geometry snapshot", srv.stored[1])
	}
	probes := 0
	for _, r := range srv.stored {
		if pr := r.GetProbe(); pr != nil {
			probes++
			if pr.GetMountPoint() != "/data1" && pr.GetMountPoint() != "/data2" {
				t.Errorf("probe of %q: not scheduled", pr.GetMountPoint())
			}
			if _, err := wire.HistogramFromProto(pr.GetLatency()); err != nil {
				t.Errorf("probe record %d: %v", r.GetSequence(), err)
			}
		}
	}
	srv.mu.Unlock()
	if probes == 0 {
		t.Error("no probe results arrived")
	}
	// Two volumes on the same disk (sdb): never two probes at once.
	if fp.maxSeen != 1 {
		t.Errorf("up to %d probes ran at once on sdb, want 1", fp.maxSeen)
	}
	t.Logf("%d records stored exactly once (%d received, resends included), %d probe runs; spool at exit %+v", len(stored), received, fp.runs, a.Spool().Stats())
}

// TestRestartResumesSequence stops an agent with records unsent, starts a
// new one on the same spool and checks that nothing is lost or repeated.
func TestRestartResumesSequence(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	p := newPKI(t, "db1")
	srv := newTestServer(t, p)
	srv.stop() // down at first: everything stays in the spool
	dir := t.TempDir()
	c := testConfig(srv.addr, p, dir)
	fp := &fakeProber{sleep: time.Millisecond}
	run := func(until func(*Agent) bool) {
		a := newTestAgent(t, c, p, fp.run, fakeInventory("/data1"))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- a.Run(ctx) }()
		waitFor(t, "agent progress", func() bool { return until(a) })
		cancel()
		<-done
	}
	run(func(a *Agent) bool { return a.Spool().Stats().Records >= 15 })
	srv.restart(t)
	run(func(*Agent) bool { _, hw, _ := srv.snapshot(); return hw >= 30 })
	srv.stop()
	stored, _, _ := srv.snapshot()
	checkExactlyOnce(t, stored)
	starts := 0
	srv.mu.Lock()
	for _, r := range srv.stored {
		if r.GetGeometry().GetTrigger() == "start" {
			starts++
		}
	}
	srv.mu.Unlock()
	if starts != 2 {
		t.Errorf("%d start snapshots, want one per agent start (2)", starts)
	}
}

// TestWrongIdentityRefused: a client certificate for db1 reporting as db2
// never gets a session; the records stay spooled.
func TestWrongIdentityRefused(t *testing.T) {
	p := newPKI(t, "db1")
	srv := newTestServer(t, p)
	defer srv.stop()
	c := testConfig(srv.addr, p, t.TempDir())
	tc, _, err := ClientTLS(c.Server)
	if err != nil {
		t.Fatal(err)
	}
	fp := &fakeProber{sleep: time.Millisecond}
	a, err := New(Options{Config: c, AgentID: "db2", Creds: credentials.NewTLS(tc), Discover: fakeInventory("/data1"), Probe: fp.run,
		BackoffBase: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	waitFor(t, "records spooled", func() bool { return a.Spool().Stats().Records >= 5 })
	cancel()
	<-done
	if stored, _, _ := srv.snapshot(); len(stored) != 0 {
		t.Errorf("server stored %d records for the wrong identity", len(stored))
	}
}

// TestRealProbe runs the real probe engine on a file in t.TempDir() (page
// cache allowed where O_DIRECT is refused) and checks the result's wire form.
func TestRealProbe(t *testing.T) {
	p := newPKI(t, "db1")
	srv := newTestServer(t, p)
	defer srv.stop()
	dir := t.TempDir()
	c := testConfig(srv.addr, p, dir)
	c.Probes[0].Every = time.Hour
	c.Probes[0].AllowCached = true
	a := newTestAgent(t, c, p, probe.Run, fakeInventory("/data1"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var got []*plumblinev1.ProbeResult
	waitFor(t, "two real probe results", func() bool {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		got = got[:0]
		for _, r := range srv.stored {
			if r.GetProbe() != nil {
				got = append(got, r.GetProbe())
			}
		}
		return len(got) == 2
	})
	cancel()
	<-done
	for _, pr := range got {
		if pr.GetSkipped() || pr.GetOps() != 10 || pr.GetLatency().GetCount() != 10 || pr.GetProbeFileSizeBytes() != 2<<20 || pr.GetBlockSizeBytes() != 8192 {
			t.Errorf("probe result = %v", pr)
		}
		if (pr.GetKind() == "log-write") != (pr.GetSync() == "dsync") {
			t.Errorf("kind %s with sync %q", pr.GetKind(), pr.GetSync())
		}
	}
}

func TestMetricsEndpoint(t *testing.T) {
	p := newPKI(t, "db1")
	c := testConfig("127.0.0.1:1", p, t.TempDir())
	fp := &fakeProber{sleep: time.Millisecond}
	a := newTestAgent(t, c, p, fp.run, fakeInventory("/data1"))
	defer a.Spool().Close()
	h := a.Handler()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	if rec.Code != 200 {
		t.Errorf("/healthz = %d", rec.Code)
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	for _, name := range []string{"plumbline_agent_spool_bytes", "plumbline_agent_spool_records", "plumbline_agent_spool_dropped_records_total",
		"plumbline_agent_spool_corrupt_records_total", `plumbline_agent_spool_lost_records_total{reason="disk-full"} 0`,
		`plumbline_agent_spool_damage_total{problem="ack-damaged"} 0`, "plumbline_agent_records_sent_total", "plumbline_agent_records_acked_total",
		"plumbline_agent_records_rejected_total", "plumbline_agent_last_report_success_timestamp_seconds",
		// The process's own, as every Prometheus exporter has them.
		`plumbline_build_info{branch="`, `,version="test"} 1`, "process_start_time_seconds", "process_resident_memory_bytes", "go_goroutines", "go_gc_duration_seconds"} {
		if !strings.Contains(rec.Body.String(), name) {
			t.Errorf("/metrics lacks %s", name)
		}
	}
}

func TestBackoff(t *testing.T) {
	base, ceiling := time.Second, time.Minute
	for _, tc := range []struct {
		n    int
		r    float64
		want time.Duration
	}{
		{1, 0, 0},
		{1, 0.5, 500 * time.Millisecond},
		{2, 0.5, time.Second},
		{3, 0.999999, 4*time.Second - 4*time.Microsecond},
		{6, 0.5, 16 * time.Second},
		{7, 0.5, 30 * time.Second}, // 64 s capped at 60 s
		{7, 1.0, 60*time.Second - 60*time.Microsecond},
		{100, 0.5, 30 * time.Second}, // no overflow
		{0, 0.5, 500 * time.Millisecond},
		{3, -1, 0},
	} {
		if got := Backoff(tc.n, base, ceiling, tc.r); got != tc.want {
			t.Errorf("Backoff(%d, 1s, 1m, %v) = %v, want %v", tc.n, tc.r, got, tc.want)
		}
	}
	// Bounds: always in [0, min(cap, base·2^(n-1))).
	for n := 1; n < 70; n++ {
		hi := ceiling
		if n < 8 {
			hi = min(ceiling, base<<(n-1))
		}
		for _, r := range []float64{0, 0.25, 0.999999} {
			if got := Backoff(n, base, ceiling, r); got < 0 || got >= hi {
				t.Errorf("Backoff(%d, r=%v) = %v, outside [0, %v)", n, r, got, hi)
			}
		}
	}
}

func TestDeviceLocks(t *testing.T) {
	l := newDeviceLocks()
	rel, err := l.acquire(context.Background(), []string{"sda", "sdb"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := l.acquire(ctx, []string{"sdb"}); err == nil {
		t.Fatal("sdb taken twice")
	}
	other, err := l.acquire(context.Background(), []string{"sdc"})
	if err != nil {
		t.Fatal("sdc should be free:", err)
	}
	other()
	got := make(chan struct{})
	go func() {
		r, _ := l.acquire(context.Background(), []string{"sdb"})
		r()
		close(got)
	}()
	rel()
	<-got
}

func TestTargetsFor(t *testing.T) {
	d, _ := fakeInventory("/data1", "/other")(context.Background())
	inv := d.Inventory
	s := []config.ProbeSchedule{
		{MountPoint: "/data*", Dir: "/data1/p", Kinds: []probe.Kind{probe.RandomRead}},
		{MountPoint: "/data1", Dir: "/x", Kinds: []probe.Kind{probe.RandomRead, probe.LogWrite}},
	}
	got := targetsFor(inv.Volumes, s)
	if len(got) != 2 || got[0].sched.Dir != "/data1/p" || got[1].kind != probe.LogWrite || got[1].sched.Dir != "/x" {
		t.Errorf("targetsFor = %+v", got)
	}
	if fmt.Sprint(got[0].lockKeys) != "[sdb]" {
		t.Errorf("lock keys = %v, want [sdb]", got[0].lockKeys)
	}
}

// Windows volumes report D:\ and C:\MountPoints\Data\; schedules name
// them D:/ and C:/MountPoints/*.
func TestTargetsForWindows(t *testing.T) {
	vol := func(mp, guid string, disk int) *plumblinev1.Volume {
		return &plumblinev1.Volume{MountPoint: mp, Device: guid, Layers: []*plumblinev1.Layer{
			{Kind: "filesystem", Device: guid}, {Kind: "disk", Device: fmt.Sprintf("PhysicalDrive%d", disk)},
		}}
	}
	vols := []*plumblinev1.Volume{
		vol(`C:\`, `\\?\Volume{c}\`, 0),
		vol(`D:\`, `\\?\Volume{d}\`, 1),
		vol(`C:\MountPoints\Data\`, `\\?\Volume{m}\`, 2),
	}
	for _, tc := range []struct {
		glob string
		want []string
	}{
		{"D:/", []string{`D:\`}},
		{"d:/", []string{`D:\`}},
		{"C:/MountPoints/*", []string{`C:\MountPoints\Data\`}},
		{"C:/", []string{`C:\`}},
		{"?:/", []string{`C:\`, `D:\`}},
		{"/data", nil},
	} {
		t.Run(tc.glob, func(t *testing.T) {
			var got []string
			for _, tg := range targetsFor(vols, []config.ProbeSchedule{{MountPoint: tc.glob, Dir: `D:\p`, Kinds: []probe.Kind{probe.RandomRead}}}) {
				got = append(got, tg.mount)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("targetsFor(%q) mounts (-want +got):\n%s", tc.glob, diff)
			}
		})
	}
}

func TestProbeResultToProto(t *testing.T) {
	var h histogram.Histogram
	h.Observe(time.Millisecond)
	r := probe.Result{Kind: probe.RandomRead, Sync: probe.SyncDsync, BlockSize: 8192, QueueDepth: 4, Ops: 1, Bytes: 8192, Duration: 0.5,
		StoppedReason: vocab.StopMaxDuration, Histogram: &h, Device: "sdb", BusyGuard: "on", BusyPercent: 12.5, OpsBudget: 10, IOPSCap: 100}
	p := ProbeResultToProto("/data", r)
	if p.GetSync() != "" || p.GetDuration().AsDuration() != 500*time.Millisecond || p.GetLatency().GetCount() != 1 ||
		p.GetDevice() != "sdb" || p.GetQueueDepth() != 4 || p.GetStoppedReason() != "max-duration" || p.GetIopsCap() != 100 || p.GetStripeScan() != nil {
		t.Errorf("ProbeResultToProto = %v", p)
	}
	if p.GetBusyIo() != nil {
		t.Errorf("busy_io = %v without a guard's sample, want none", p.GetBusyIo())
	}
	r.BusyIO = &probe.DeviceActivity{Window: time.Second, IOs: 40, Sectors: 320, IOTicks: 900 * time.Millisecond, TimeInQueue: 2400 * time.Millisecond}
	if b := ProbeResultToProto("/data", r).GetBusyIo(); b.GetWindow().AsDuration() != time.Second || b.GetIos() != 40 || b.GetSectors() != 320 ||
		b.GetIoTicks().AsDuration() != 900*time.Millisecond || b.GetTimeInQueue().AsDuration() != 2400*time.Millisecond {
		t.Errorf("busy_io = %v, want the guard's sample", b)
	}
	r.Kind, r.StripeScan = probe.StripeScan, &probe.StripeScanResult{Placed: 2000, Placement: probe.Placement{Device: "sdb", Basis: "disk", Known: true, Offset: 1 << 20}}
	r.StripeScan.Unit, r.StripeScan.Confidence = 64<<10, 0.999
	s := ProbeResultToProto("/data", r).GetStripeScan()
	if s.GetInferredStripeUnitBytes() != 64<<10 || s.GetConfidence() != 0.999 || s.GetPlaced() != 2000 || s.GetPlacementOffsetBytes() != 1<<20 {
		t.Errorf("stripe scan = %v", s)
	}
}

// TestHelloCarriesHost: the first Hello names the host's os and kernel
// even when geometry discovery has not succeeded (here: it always fails).
func TestHelloCarriesHost(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	p := newPKI(t, "db1")
	srv := newTestServer(t, p)
	defer srv.stop()
	dir := t.TempDir()
	c := testConfig(srv.addr, p, dir)
	failing := func(context.Context) (Discovery, error) { return Discovery{}, errors.New("no geometry here") }
	fp := &fakeProber{sleep: time.Millisecond}
	a := newTestAgent(t, c, p, fp.run, failing)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	waitFor(t, "a Hello", func() bool { srv.mu.Lock(); defer srv.mu.Unlock(); return len(srv.hellos) > 0 })
	cancel()
	<-done
	srv.mu.Lock()
	h := srv.hellos[0].GetHost()
	srv.mu.Unlock()
	if h.GetOs() != runtime.GOOS {
		t.Errorf("Hello host.os = %q, want %q", h.GetOs(), runtime.GOOS)
	}
	if h.GetHostname() == "" {
		t.Error("Hello host.hostname is empty")
	}
	if runtime.GOOS == "linux" && h.GetKernel() == "" {
		t.Error("Hello host.kernel is empty on linux")
	}
	if h.GetAgentVersion() != "test" {
		t.Errorf("Hello host.agent_version = %q, want %q", h.GetAgentVersion(), "test")
	}
}
