package ingest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"database/sql"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/plumbline/plumbline/internal/histogram"
	"github.com/plumbline/plumbline/internal/lab/pgtest"
	"github.com/plumbline/plumbline/internal/server/devca"
	"github.com/plumbline/plumbline/internal/server/store"
	"github.com/plumbline/plumbline/internal/wire"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// engines: every store-backed test runs against a real SQLite file and a
// real PostgreSQL.
var engines = pgtest.Engines()

var forEachEngine = pgtest.ForEachEngine

// pki is a dev CA with a server certificate on disk, as the server uses it.
type pki struct {
	ca                        *devca.CA
	certFile, keyFile, caFile string
}

func newPKI(t testing.TB) *pki {
	t.Helper()
	dir := t.TempDir()
	ca, err := devca.Create(filepath.Join(dir, "ca"))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := ca.IssueServer("localhost", "127.0.0.1", "::1")
	if err != nil {
		t.Fatal(err)
	}
	p := &pki{ca: ca, certFile: filepath.Join(dir, "server.crt"), keyFile: filepath.Join(dir, "server.key"), caFile: ca.CertPath()}
	if err := srv.WriteFiles(p.certFile, p.keyFile); err != nil {
		t.Fatal(err)
	}
	return p
}

// env is one in-process server on 127.0.0.1:0 over a real store.
type env struct {
	addr  string
	pki   *pki
	store *store.Store
	svc   *Service
	gs    *grpc.Server
	dsn   string
}

// startServer serves over TLS (or plaintext with opts.Insecure) until the
// test ends.
func startServer(t testing.TB, dsn string, p *pki, opts Options) *env {
	t.Helper()
	st, err := store.Open(context.Background(), dsn)
	if err != nil {
		t.Fatalf("store.Open: %v", err)
	}
	var tc *tls.Config
	if !opts.Insecure {
		if tc, err = ServerTLSConfig(p.certFile, p.keyFile, p.caFile); err != nil {
			t.Fatal(err)
		}
	}
	svc := New(st, opts)
	gs, _, err := NewGRPCServer(svc, tc)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go gs.Serve(l)
	e := &env{addr: l.Addr().String(), pki: p, store: st, svc: svc, gs: gs, dsn: dsn}
	t.Cleanup(func() { gs.Stop(); st.Close() })
	return e
}

// clientTLS is an agent's TLS configuration: trust roots and, unless
// leaf is nil, a client certificate.
func clientTLS(roots *x509.CertPool, leaf *devca.Leaf) *tls.Config {
	c := &tls.Config{RootCAs: roots, ServerName: "localhost", MinVersion: tls.VersionTLS13}
	if leaf != nil {
		c.Certificates = []tls.Certificate{leaf.TLSCertificate()}
	}
	return c
}

func dial(t testing.TB, addr string, creds credentials.TransportCredentials) plumblinev1.AgentServiceClient {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds), grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return plumblinev1.NewAgentServiceClient(cc)
}

// agent dials e as agent id with a certificate from e's CA.
func (e *env) agent(t testing.TB, id string) plumblinev1.AgentServiceClient {
	t.Helper()
	leaf, err := e.pki.ca.IssueAgent(id)
	if err != nil {
		t.Fatal(err)
	}
	return dial(t, e.addr, credentials.NewTLS(clientTLS(e.pki.ca.Pool(), leaf)))
}

func listen(t testing.TB) (net.Listener, error) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return l, nil
}

func parseURL(s string) (*url.URL, error) { return url.Parse(s) }

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func hello(t testing.TB, c plumblinev1.AgentServiceClient, id string) *plumblinev1.HelloResponse {
	t.Helper()
	resp, err := c.Hello(ctxT(t), &plumblinev1.HelloRequest{
		AgentId:      id,
		Host:         &plumblinev1.Host{Hostname: id + ".example", Os: "linux", Kernel: "6.1.0", MachineId: "m-" + id},
		AgentVersion: "0.1.0-test",
	})
	if err != nil {
		t.Fatalf("Hello(%q): %v", id, err)
	}
	return resp
}

// now is the clock of the records the tests build.
var testNow = time.Now().UTC().Truncate(time.Second)

func u64(v uint64) *uint64 { return &v }

// misalignedVolume is a SQL Server data volume on a RAID 10 with a 64 KiB
// stripe and a partition at 31.5 KiB: misaligned by the server's rules.
// Its agent-side verdict claims "aligned" — the server must not believe it.
func misalignedVolume(mp string) *plumblinev1.Volume {
	return &plumblinev1.Volume{
		MountPoint: mp, Device: "/dev/sdb1",
		Filesystem: &plumblinev1.Filesystem{Type: "xfs", BlockSizeBytes: 4096},
		Layers: []*plumblinev1.Layer{
			{Kind: "filesystem", Device: "/dev/sdb1", FsType: "xfs", BlockSizeBytes: 4096, OffsetBytes: u64(0), Source: "superblock"},
			{Kind: "partition", Device: "sdb1", OffsetBytes: u64(32256), LogicalSectorBytes: 512, Source: "sysfs"},
			{Kind: "raid", Device: "sdb", RaidLevel: "raid10", StripeUnitBytes: 64 << 10, RaidDisks: 4, RaidDataDisks: 2,
				LogicalSectorBytes: 512, PhysicalSectorBytes: 512, OffsetBytes: u64(0), Source: "declared"},
		},
		Alignment: &plumblinev1.Alignment{Verdict: "aligned"},
	}
}

func geometryRecord(seq uint64, vols ...*plumblinev1.Volume) *plumblinev1.Record {
	return &plumblinev1.Record{
		Sequence:   seq,
		ProducedAt: timestamppb.New(testNow),
		Payload: &plumblinev1.Record_Geometry{Geometry: &plumblinev1.GeometrySnapshot{
			Trigger:   "start",
			Inventory: &plumblinev1.Inventory{Host: &plumblinev1.Host{Hostname: "db1", Os: "linux"}, Volumes: vols},
		}},
	}
}

func probeResult() *plumblinev1.ProbeResult {
	h := &histogram.Histogram{}
	for i := range 100 {
		h.Observe(time.Duration(100+i) * time.Microsecond)
	}
	return &plumblinev1.ProbeResult{
		MountPoint: "/data", Device: "sdb", Kind: "random-read", BlockSizeBytes: 8192, QueueDepth: 4,
		Ops: 100, Bytes: 100 * 8192, Duration: durationpb.New(2 * time.Second), StartedAt: timestamppb.New(testNow.Add(-time.Minute)),
		CacheBypass: true, Latency: wire.HistogramToProto(h), ProbeFile: "/data/.plumbline-probe", ProbeFileSizeBytes: 1 << 30,
		OpsBudget: 100, IopsCap: 50, BusyGuard: "on",
	}
}

func probeRecord(seq uint64) *plumblinev1.Record {
	return &plumblinev1.Record{Sequence: seq, ProducedAt: timestamppb.New(testNow), Payload: &plumblinev1.Record_Probe{Probe: probeResult()}}
}

func probeRecords(from, to uint64) []*plumblinev1.Record {
	var out []*plumblinev1.Record
	for s := from; s <= to; s++ {
		out = append(out, probeRecord(s))
	}
	return out
}

// dbRows runs a query on the store's database through a connection of
// its own: what is really stored, not what the service says.
func dbRows(t testing.TB, dsn, query string, args ...any) [][]string {
	t.Helper()
	driver, source := "pgx", dsn
	if path, ok := strings.CutPrefix(dsn, "sqlite://"); ok {
		driver, source = "sqlite", path
	} else {
		query = pgPlaceholders(query)
	}
	db, err := sql.Open(driver, source)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.QueryContext(context.Background(), query, args...)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out [][]string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		row := make([]string, len(cols))
		for i, v := range vals {
			row[i] = v.String
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func pgPlaceholders(q string) string {
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			b.WriteString("$")
			b.WriteString(string(rune('0' + n)))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
