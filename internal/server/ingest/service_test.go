package ingest

import (
	"context"
	"crypto/tls"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/plumbline/plumbline/internal/server/store"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

func sqliteDSN(t testing.TB) string {
	return "sqlite://" + filepath.Join(t.TempDir(), "plumbline.db")
}

func wantCode(t *testing.T, what string, err error, want codes.Code, substr string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error, want %v", what, want)
	}
	st, _ := status.FromError(err)
	if st.Code() != want {
		t.Fatalf("%s: %v, want code %v", what, err, want)
	}
	if substr != "" && !strings.Contains(st.Message(), substr) {
		t.Fatalf("%s: message %q does not say %q", what, st.Message(), substr)
	}
}

func TestHelloAndReport(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, dsn string) {
		e := startServer(t, dsn, newPKI(t), Options{GeometryRefreshInterval: 7 * time.Minute, ReportInterval: 3 * time.Second})
		c := e.agent(t, "db1")
		resp := hello(t, c, "db1")
		if resp.GetHighWaterSequence() != 0 || resp.GetMaxBatchRecords() != 1000 ||
			resp.GetGeometryRefreshInterval().AsDuration() != 7*time.Minute || resp.GetReportInterval().AsDuration() != 3*time.Second {
			t.Errorf("Hello() = %v", resp)
		}
		if d := time.Since(resp.GetServerTime().AsTime()); d < 0 || d > time.Minute {
			t.Errorf("server_time %v is not now", resp.GetServerTime().AsTime())
		}
		rep, err := c.Report(ctxT(t), &plumblinev1.ReportRequest{AgentId: "db1",
			Records: append([]*plumblinev1.Record{geometryRecord(1, misalignedVolume("/data"))}, probeRecords(2, 5)...)})
		if err != nil {
			t.Fatalf("Report: %v", err)
		}
		if rep.GetHighWaterSequence() != 5 || len(rep.GetAckedSequences()) != 0 || len(rep.GetRejections()) != 0 {
			t.Errorf("Report() = %v, want high water 5, nothing else", rep)
		}
		if resp := hello(t, c, "db1"); resp.GetHighWaterSequence() != 5 {
			t.Errorf("Hello after a report: high water %d, want 5", resp.GetHighWaterSequence())
		}
		// The server's verdict, not the agent's "aligned".
		vols, err := e.store.ListVolumes(ctxT(t))
		if err != nil || len(vols) != 1 {
			t.Fatalf("ListVolumes() = %v, %v", vols, err)
		}
		// xfs with 4 KiB blocks at 31.5 KiB on 64 KiB: of the 12.5% of 8 KiB
		// I/Os that split, the offset causes half (the column's figure).
		if vols[0].Verdict != "misaligned" || vols[0].SplitFraction[0] == nil || *vols[0].SplitFraction[0] != 0.0625 {
			t.Errorf("stored volume: verdict %q, split 8K %v; want misaligned, 0.0625", vols[0].Verdict, vols[0].SplitFraction[0])
		}
		// The verdict is stored once: in the judged record, with its
		// findings; the stored geometry has no alignment (not the agent's).
		var pv plumblinev1.Volume
		if err := proto.Unmarshal(vols[0].Geometry, &pv); err != nil || pv.GetAlignment() != nil {
			t.Errorf("stored geometry alignment = %v (%v), want none", pv.GetAlignment(), err)
		}
		if iv, err := e.store.InventoryVolumeByID(ctxT(t), store.VolumeID("db1", "/data")); err != nil || iv.Verdict != "misaligned" || iv.TopFinding == nil {
			t.Errorf("judged record = %+v, %v; want the server's misaligned verdict with findings", iv, err)
		}
		if got := dbRows(t, dsn, `SELECT COUNT(*) FROM probe_results WHERE agent_id = ?`, "db1"); got[0][0] != "4" {
			t.Errorf("probe_results rows = %s, want 4", got[0][0])
		}
		hosts, _ := e.store.ListHosts(ctxT(t))
		if len(hosts) != 1 || hosts[0].Hostname != "db1.example" || hosts[0].AgentVersion != "0.1.0-test" || hosts[0].MachineID != "m-db1" {
			t.Errorf("ListHosts() = %+v", hosts)
		}
	})
}

func TestHealthService(t *testing.T) {
	t.Parallel()
	e := startServer(t, sqliteDSN(t), newPKI(t), Options{})
	leaf, _ := e.pki.ca.IssueAgent("monitor")
	cc, err := grpc.NewClient(e.addr, grpc.WithTransportCredentials(credentials.NewTLS(clientTLS(e.pki.ca.Pool(), leaf))))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	for _, svc := range []string{"", plumblinev1.AgentService_ServiceDesc.ServiceName} {
		resp, err := healthpb.NewHealthClient(cc).Check(ctxT(t), &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health Check(%q) = %v, %v; want SERVING", svc, resp, err)
		}
	}
}

func TestTransportSecurity(t *testing.T) {
	t.Parallel()
	e := startServer(t, sqliteDSN(t), newPKI(t), Options{})
	other := newPKI(t) // another CA
	otherLeaf, _ := other.ca.IssueAgent("db1")
	good, _ := e.pki.ca.IssueAgent("db1")
	tests := []struct {
		name  string
		creds credentials.TransportCredentials
	}{
		{"no client certificate", credentials.NewTLS(clientTLS(e.pki.ca.Pool(), nil))},
		{"certificate from another CA", credentials.NewTLS(clientTLS(e.pki.ca.Pool(), otherLeaf))},
		{"plaintext", insecure.NewCredentials()},
		{"TLS 1.2 only", credentials.NewTLS(func() *tls.Config {
			c := clientTLS(e.pki.ca.Pool(), good)
			c.MinVersion, c.MaxVersion = tls.VersionTLS12, tls.VersionTLS12
			return c
		}())},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := dial(t, e.addr, tt.creds)
			_, err := c.Hello(ctxT(t), &plumblinev1.HelloRequest{AgentId: "db1"})
			wantCode(t, "Hello", err, codes.Unavailable, "")
		})
	}
	if n := len(dbRows(t, e.dsn, `SELECT agent_id FROM agents`)); n != 0 {
		t.Errorf("%d agents registered through refused connections", n)
	}
	// And the good certificate works on the same server.
	hello(t, dial(t, e.addr, credentials.NewTLS(clientTLS(e.pki.ca.Pool(), good))), "db1")
}

func TestImpersonation(t *testing.T) {
	t.Parallel()
	e := startServer(t, sqliteDSN(t), newPKI(t), Options{})
	a := e.agent(t, "agent-a")
	hello(t, e.agent(t, "agent-b"), "agent-b") // B exists
	_, err := a.Hello(ctxT(t), &plumblinev1.HelloRequest{AgentId: "agent-b"})
	wantCode(t, "Hello as B with A's certificate", err, codes.PermissionDenied, `"agent-a"`)
	hello(t, a, "agent-a")
	_, err = a.Report(ctxT(t), &plumblinev1.ReportRequest{AgentId: "agent-b", Records: probeRecords(1, 1)})
	wantCode(t, "Report as B with A's certificate", err, codes.PermissionDenied, "may report only for itself")
	if hw, _ := e.store.HighWater(ctxT(t), "agent-b", ""); hw != 0 {
		t.Errorf("agent-b high water %d after A's report in its name", hw)
	}
}

func TestOversizedMessage(t *testing.T) {
	t.Parallel()
	e := startServer(t, sqliteDSN(t), newPKI(t), Options{MaxRecvMsgSize: 64 << 10})
	c := e.agent(t, "db1")
	hello(t, c, "db1")
	big := probeRecord(1)
	big.GetProbe().FirstError = strings.Repeat("x", 100<<10)
	_, err := c.Report(ctxT(t), &plumblinev1.ReportRequest{AgentId: "db1", Records: []*plumblinev1.Record{big}})
	wantCode(t, "Report of 100 KiB to a 64 KiB limit", err, codes.ResourceExhausted, "")
	// The connection and the agent are fine afterwards.
	if _, err := c.Report(ctxT(t), &plumblinev1.ReportRequest{AgentId: "db1", Records: probeRecords(1, 1)}); err != nil {
		t.Fatalf("Report after an oversized one: %v", err)
	}
}

func TestInsecureOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	if _, _, err := NewGRPCServer(New(nil, Options{}), nil); err == nil {
		t.Fatal("NewGRPCServer(no TLS, not insecure) succeeded")
	}
	e := startServer(t, sqliteDSN(t), nil, Options{Insecure: true})
	c := dial(t, e.addr, insecure.NewCredentials())
	hello(t, c, "db1")
	if _, err := c.Report(ctxT(t), &plumblinev1.ReportRequest{AgentId: "db1", Records: probeRecords(1, 2)}); err != nil {
		t.Fatalf("plaintext Report with --insecure: %v", err)
	}
}

func TestRateLimit(t *testing.T) {
	t.Parallel()
	e := startServer(t, sqliteDSN(t), newPKI(t), Options{RatePerSecond: 0.01, RateBurst: 2})
	a, b := e.agent(t, "a"), e.agent(t, "b")
	hello(t, a, "a")
	hello(t, a, "a")
	_, err := a.Hello(ctxT(t), &plumblinev1.HelloRequest{AgentId: "a"})
	wantCode(t, "third call in a burst of 2", err, codes.ResourceExhausted, "rate limit")
	hello(t, b, "b") // another agent has a bucket of its own
}

func TestReportBeforeHello(t *testing.T) {
	t.Parallel()
	e := startServer(t, sqliteDSN(t), newPKI(t), Options{})
	c := e.agent(t, "db1")
	_, err := c.Report(ctxT(t), &plumblinev1.ReportRequest{AgentId: "db1", Records: probeRecords(1, 1)})
	wantCode(t, "Report before Hello", err, codes.FailedPrecondition, "Hello")
}

func TestReplayStoredOnce(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, dsn string) {
		e := startServer(t, dsn, newPKI(t), Options{})
		c := e.agent(t, "db1")
		hello(t, c, "db1")
		bad := probeRecord(3)
		bad.GetProbe().Kind = "sideways"
		req := &plumblinev1.ReportRequest{AgentId: "db1", Records: append(probeRecords(1, 2), bad, probeRecord(4))}
		first, err := c.Report(ctxT(t), req)
		if err != nil {
			t.Fatal(err)
		}
		again, err := c.Report(ctxT(t), req)
		if err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(first, again) {
			t.Errorf("replayed batch answered %v, first time %v", again, first)
		}
		if first.GetHighWaterSequence() != 4 || len(first.GetRejections()) != 1 {
			t.Errorf("Report() = %v, want high water 4 and one rejection", first)
		}
		got := dbRows(t, dsn, `SELECT sequence, kind FROM records WHERE agent_id = ? ORDER BY sequence`, "db1")
		want := [][]string{{"1", "probe"}, {"2", "probe"}, {"3", "rejected"}, {"4", "probe"}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("stored records (-want +got):\n%s", diff)
		}
		if n := dbRows(t, dsn, `SELECT COUNT(*) FROM probe_results`)[0][0]; n != "3" {
			t.Errorf("probe_results = %s rows after a replay, want 3", n)
		}
		// Out of order across batches: 6 before 5.
		r6, err := c.Report(ctxT(t), &plumblinev1.ReportRequest{AgentId: "db1", Records: probeRecords(6, 6)})
		if err != nil || r6.GetHighWaterSequence() != 4 || !slices.Equal(r6.GetAckedSequences(), []uint64{6}) {
			t.Errorf("Report(6) = %v, %v; want high water 4, acked [6]", r6, err)
		}
		r5, err := c.Report(ctxT(t), &plumblinev1.ReportRequest{AgentId: "db1", Records: probeRecords(5, 5)})
		if err != nil || r5.GetHighWaterSequence() != 6 || len(r5.GetAckedSequences()) != 0 {
			t.Errorf("Report(5) = %v, %v; want high water 6", r5, err)
		}
	})
}

func TestFirstSequenceSettlesDropped(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, dsn string) {
		e := startServer(t, dsn, newPKI(t), Options{})
		c := e.agent(t, "db1")
		hello(t, c, "db1")
		// The agent's spool dropped 1..9 (size cap); it still holds 10..12.
		rep, err := c.Report(ctxT(t), &plumblinev1.ReportRequest{AgentId: "db1", FirstSequence: 10, Records: probeRecords(10, 12)})
		if err != nil || rep.GetHighWaterSequence() != 12 {
			t.Fatalf("Report(first 10, 10..12) = %v, %v; want high water 12", rep, err)
		}
		if h := hello(t, c, "db1"); h.GetHighWaterSequence() != 12 {
			t.Errorf("Hello high water %d, want 12", h.GetHighWaterSequence())
		}
		// A settle-only report (no records).
		rep, err = c.Report(ctxT(t), &plumblinev1.ReportRequest{AgentId: "db1", FirstSequence: 20})
		if err != nil || rep.GetHighWaterSequence() != 19 {
			t.Errorf("Report(first 20, no records) = %v, %v; want high water 19", rep, err)
		}
	})
}

// TestRestartKeepsAcked: every acknowledged batch survives the server going
// away (its gRPC server stopped hard, its store closed) and a new server
// opening the same SQLite file.
func TestRestartKeepsAcked(t *testing.T) {
	t.Parallel()
	dsn := sqliteDSN(t)
	p := newPKI(t)
	st, err := store.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	tc, _ := ServerTLSConfig(p.certFile, p.keyFile, p.caFile)
	gs, _, _ := NewGRPCServer(New(st, Options{}), tc)
	l, _ := listen(t)
	go gs.Serve(l)
	e := &env{addr: l.Addr().String(), pki: p}
	c := e.agent(t, "db1")
	hello(t, c, "db1")
	var acked uint64
	for b := range uint64(5) {
		rep, err := c.Report(ctxT(t), &plumblinev1.ReportRequest{AgentId: "db1", Records: probeRecords(b*10+1, b*10+10)})
		if err != nil {
			t.Fatal(err)
		}
		acked = rep.GetHighWaterSequence()
	}
	gs.Stop() // no graceful drain
	st.Close()

	e2 := startServer(t, dsn, p, Options{})
	c2 := e2.agent(t, "db1")
	if h := hello(t, c2, "db1"); h.GetHighWaterSequence() != acked || acked != 50 {
		t.Fatalf("after restart: high water %d, acknowledged before %d (want 50)", h.GetHighWaterSequence(), acked)
	}
	if n := dbRows(t, dsn, `SELECT COUNT(*) FROM records`)[0][0]; n != "50" {
		t.Errorf("records after restart = %s, want 50", n)
	}
}

func TestPermissionBeforeValidation(t *testing.T) {
	t.Parallel()
	// A malformed report in someone else's name is refused for the name.
	e := startServer(t, sqliteDSN(t), newPKI(t), Options{})
	c := e.agent(t, "a")
	_, err := c.Report(ctxT(t), &plumblinev1.ReportRequest{AgentId: "b", Records: []*plumblinev1.Record{{Sequence: 0}}})
	wantCode(t, "bad report as another agent", err, codes.PermissionDenied, "")
}

// TestBadInput: every malformed envelope is InvalidArgument with a message
// saying what is wrong (and stores nothing); every malformed record is a
// Rejection with a reason, stored as rejected, while the good records of
// its batch are stored.
func TestBadInput(t *testing.T) {
	t.Parallel()
	envelope := []struct {
		name string
		req  *plumblinev1.ReportRequest
		want string
	}{
		{"sequence 0", &plumblinev1.ReportRequest{Records: []*plumblinev1.Record{probeRecord(1), probeRecord(0)}}, "records[1]: sequence 0"},
		{"sequence above 2^63-1", &plumblinev1.ReportRequest{Records: []*plumblinev1.Record{probeRecord(1 << 63)}}, "want 1 to 2^63-1"},
		{"descending", &plumblinev1.ReportRequest{Records: []*plumblinev1.Record{probeRecord(2), probeRecord(1)}}, "strictly ascending"},
		{"duplicate", &plumblinev1.ReportRequest{Records: []*plumblinev1.Record{probeRecord(1), probeRecord(1)}}, "strictly ascending"},
		{"too many records", &plumblinev1.ReportRequest{Records: probeRecords(1, 11)}, "11 records in one batch: want at most 10"},
		{"first_sequence above the batch", &plumblinev1.ReportRequest{FirstSequence: 5, Records: probeRecords(3, 4)}, "first_sequence 5 above"},
		{"first_sequence above 2^63-1", &plumblinev1.ReportRequest{FirstSequence: 1 << 63}, "first_sequence"},
		{"empty agent id", &plumblinev1.ReportRequest{AgentId: "-", Records: probeRecords(1, 1)}, "agent_id"},
	}
	mod := func(f func(*plumblinev1.ProbeResult)) *plumblinev1.Record {
		r := probeRecord(2)
		f(r.GetProbe())
		return r
	}
	geo := func(f func(*plumblinev1.GeometrySnapshot)) *plumblinev1.Record {
		r := geometryRecord(2, misalignedVolume("/data"))
		f(r.GetGeometry())
		return r
	}
	vol := func(f func(*plumblinev1.Volume)) *plumblinev1.Record {
		return geo(func(g *plumblinev1.GeometrySnapshot) { f(g.GetInventory().GetVolumes()[0]) })
	}
	records := []struct {
		name string
		rec  *plumblinev1.Record
		want string
	}{
		{"no payload", &plumblinev1.Record{Sequence: 2, ProducedAt: timestamppb.New(testNow)}, "no payload"},
		{"no produced_at", func() *plumblinev1.Record { r := probeRecord(2); r.ProducedAt = nil; return r }(), "produced_at missing"},
		{"produced_at in 1970", func() *plumblinev1.Record {
			r := probeRecord(2)
			r.ProducedAt = timestamppb.New(time.Unix(5, 0))
			return r
		}(), "before 2000-01-01"},
		{"produced_at next week", func() *plumblinev1.Record {
			r := probeRecord(2)
			r.ProducedAt = timestamppb.New(time.Now().Add(7 * 24 * time.Hour))
			return r
		}(), "ahead of the server's clock"},
		{"produced_at invalid", func() *plumblinev1.Record {
			r := probeRecord(2)
			r.ProducedAt = &timestamppb.Timestamp{Seconds: 1_700_000_000, Nanos: -1}
			return r
		}(), "produced_at"},
		{"probe kind", mod(func(p *plumblinev1.ProbeResult) { p.Kind = "sequential-read" }), `kind "sequential-read": want one of random-read, random-write, log-write`},
		{"probe block size", mod(func(p *plumblinev1.ProbeResult) { p.BlockSizeBytes = 3000 }), "block_size_bytes 3000"},
		{"probe queue depth 0", mod(func(p *plumblinev1.ProbeResult) { p.QueueDepth = 0 }), "queue_depth 0: want 1 to 256"},
		{"probe log-write queue depth", mod(func(p *plumblinev1.ProbeResult) { p.Kind, p.Sync, p.QueueDepth = "log-write", "dsync", 4 }), "queue_depth 4: want 1 for log-write"},
		{"probe log-write sync", mod(func(p *plumblinev1.ProbeResult) { p.Kind, p.Sync, p.QueueDepth = "log-write", "fsync", 1 }), `sync "fsync"`},
		{"probe sync on a read", mod(func(p *plumblinev1.ProbeResult) { p.Sync = "dsync" }), "want empty for random-read"},
		{"probe stopped reason", mod(func(p *plumblinev1.ProbeResult) { p.StoppedReason = "bored" }), `stopped_reason "bored"`},
		{"probe relative mount point", mod(func(p *plumblinev1.ProbeResult) { p.MountPoint = "data" }), `mount_point "data": want an absolute path`},
		{"probe device with slash", mod(func(p *plumblinev1.ProbeResult) { p.Device = "/dev/sdb" }), `device "/dev/sdb"`},
		{"probe ops above the histogram", mod(func(p *plumblinev1.ProbeResult) { p.Ops, p.Bytes = 101, 101*8192 }), "100 observations for 101 ops"},
		{"probe bytes", mod(func(p *plumblinev1.ProbeResult) { p.Bytes = 1 << 40 }), "more than ops × block_size_bytes"},
		{"probe skipped with ops", mod(func(p *plumblinev1.ProbeResult) { p.Skipped = true }), "skipped with ops 100"},
		{"probe negative duration", mod(func(p *plumblinev1.ProbeResult) { p.Duration = durationpb.New(-time.Second) }), "duration -1s"},
		{"probe no started_at", mod(func(p *plumblinev1.ProbeResult) { p.StartedAt = nil }), "started_at missing"},
		{"probe no histogram", mod(func(p *plumblinev1.ProbeResult) { p.Latency = nil }), "latency: invalid histogram: missing"},
		{"probe histogram schema", mod(func(p *plumblinev1.ProbeResult) { p.Latency.Schema = 5 }), "latency: invalid histogram"},
		{"probe histogram count", mod(func(p *plumblinev1.ProbeResult) { p.Latency.Count++ }), "latency: invalid histogram"},
		{"probe NaN busy percent", mod(func(p *plumblinev1.ProbeResult) { p.BusyPercent = nan() }), "busy_percent: NaN: want a finite number"},
		{"probe busy percent", mod(func(p *plumblinev1.ProbeResult) { p.BusyPercent = 150 }), "busy_percent 150"},
		{"probe busy guard", mod(func(p *plumblinev1.ProbeResult) { p.BusyGuard = "maybe" }), `busy_guard "maybe"`},
		{"probe huge string", mod(func(p *plumblinev1.ProbeResult) { p.FirstError = strings.Repeat("e", 5000) }), "first_error: 5000 bytes: want at most 4096"},
		{"geometry trigger", geo(func(g *plumblinev1.GeometrySnapshot) { g.Trigger = "whim" }), `trigger "whim"`},
		{"geometry no inventory", geo(func(g *plumblinev1.GeometrySnapshot) { g.Inventory = nil }), "inventory missing"},
		{"geometry host os", geo(func(g *plumblinev1.GeometrySnapshot) { g.Inventory.Host.Os = "plan9" }), `host.os "plan9"`},
		{"geometry relative mount point", vol(func(v *plumblinev1.Volume) { v.MountPoint = "var/lib" }), `mount_point "var/lib": want an absolute path`},
		{"geometry unclean mount point", vol(func(v *plumblinev1.Volume) { v.MountPoint = "/data/../etc" }), "clean absolute path"},
		{"geometry no mount point", vol(func(v *plumblinev1.Volume) { v.MountPoint = "" }), "volumes[0]: mount_point missing"},
		{"geometry duplicate volume", geo(func(g *plumblinev1.GeometrySnapshot) {
			g.Inventory.Volumes = append(g.Inventory.Volumes, misalignedVolume("/data"))
		}), `volume "/data" listed twice`},
		{"geometry layer kind", vol(func(v *plumblinev1.Volume) { v.Layers[1].Kind = "zfs-vdev" }), `layers[1] (sdb1): kind "zfs-vdev"`},
		{"geometry raid level", vol(func(v *plumblinev1.Volume) { v.Layers[2].RaidLevel = "raid7" }), `raid_level "raid7"`},
		{"geometry sector size", vol(func(v *plumblinev1.Volume) { v.Layers[2].PhysicalSectorBytes = 1000 }), "physical_sector_bytes 1000"},
		{"geometry offset above 2^63-1", vol(func(v *plumblinev1.Volume) { v.Layers[1].OffsetBytes = u64(1 << 63) }), "offset_bytes 9223372036854775808"},
		{"geometry offsets overflow", vol(func(v *plumblinev1.Volume) {
			v.Layers[0].OffsetBytes = u64(1<<63 - 1)
			v.Layers[1].OffsetBytes = u64(1<<63 - 1)
		}), "data offset"},
		{"geometry block size", vol(func(v *plumblinev1.Volume) { v.Filesystem.BlockSizeBytes = 4095 }), "filesystem.block_size_bytes 4095"},
		{"geometry raid disks", vol(func(v *plumblinev1.Volume) { v.Layers[2].RaidDataDisks = 9 }), "raid_data_disks 9"},
		{"geometry too many volumes", geo(func(g *plumblinev1.GeometrySnapshot) {
			for i := range 5000 {
				g.Inventory.Volumes = append(g.Inventory.Volumes, &plumblinev1.Volume{MountPoint: fmt.Sprintf("/v%d", i)})
			}
		}), "volumes: 5001 entries: want at most 4096"},
		{"geometry too many layers", vol(func(v *plumblinev1.Volume) {
			for range 300 {
				v.Layers = append(v.Layers, &plumblinev1.Layer{Kind: "dm"})
			}
		}), "layers: 303 entries: want at most 256"},
	}

	forEachEngine(t, func(t *testing.T, dsn string) {
		e := startServer(t, dsn, newPKI(t), Options{Limits: Limits{MaxBatchRecords: 10}})
		agent := 0
		for _, tt := range envelope {
			t.Run("envelope/"+tt.name, func(t *testing.T) {
				agent++
				id := fmt.Sprintf("env-%d", agent)
				c := e.agent(t, id)
				hello(t, c, id)
				req := proto.Clone(tt.req).(*plumblinev1.ReportRequest)
				if req.AgentId == "" {
					req.AgentId = id
				} else {
					req.AgentId = ""
				}
				_, err := c.Report(ctxT(t), req)
				wantCode(t, "Report", err, codes.InvalidArgument, tt.want)
				if rows := dbRows(t, dsn, `SELECT sequence FROM records WHERE agent_id = ?`, id); len(rows) != 0 {
					t.Errorf("a refused request stored %v", rows)
				}
			})
		}
		for _, tt := range records {
			t.Run("record/"+tt.name, func(t *testing.T) {
				agent++
				id := fmt.Sprintf("rec-%d", agent)
				c := e.agent(t, id)
				hello(t, c, id)
				req := &plumblinev1.ReportRequest{AgentId: id, Records: []*plumblinev1.Record{
					geometryRecord(1, misalignedVolume("/good")), tt.rec, probeRecord(3)}}
				resp, err := c.Report(ctxT(t), req)
				if err != nil {
					t.Fatalf("Report: %v (a bad record must not cost the batch)", err)
				}
				if len(resp.GetRejections()) != 1 || resp.GetRejections()[0].GetSequence() != 2 {
					t.Fatalf("Report() rejections = %v, want sequence 2 only", resp.GetRejections())
				}
				if reason := resp.GetRejections()[0].GetReason(); !strings.Contains(reason, tt.want) {
					t.Errorf("rejection reason %q does not say %q", reason, tt.want)
				}
				if resp.GetHighWaterSequence() != 3 {
					t.Errorf("high water %d, want 3 (the rejected record is settled too)", resp.GetHighWaterSequence())
				}
				got := dbRows(t, dsn, `SELECT sequence, kind FROM records WHERE agent_id = ? ORDER BY sequence`, id)
				want := [][]string{{"1", "geometry"}, {"2", "rejected"}, {"3", "probe"}}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("stored records (-want +got):\n%s", diff)
				}
				if r := dbRows(t, dsn, `SELECT reason FROM records WHERE agent_id = ? AND sequence = 2`, id); len(r) != 1 || r[0][0] != resp.GetRejections()[0].GetReason() {
					t.Errorf("stored reason %v, want the rejection's", r)
				}
				if r := dbRows(t, dsn, `SELECT mount_point, verdict FROM inventory_volumes WHERE agent_id = ?`, id); !cmp.Equal(r, [][]string{{"/good", "misaligned"}}) {
					t.Errorf("volumes = %v, want the good snapshot's /good, misaligned", r)
				}
			})
		}
	})
}

func nan() float64 { var z float64; return z / z }
