package ingest

import (
	"bytes"
	"crypto/sha256"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// TestIncarnations over gRPC+TLS on both engines: the same sequences from
// two spool incarnations of one agent are two sets of records; replays
// within each are recognised; Hello answers with its incarnation's mark
// and the digest of the snapshot the server holds; a malformed
// incarnation or digest is refused.
func TestIncarnations(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, dsn string) {
		e := startServer(t, dsn, newPKI(t), Options{})
		c := e.agent(t, "db1")
		helloAs := func(inc string) *plumblinev1.HelloResponse {
			t.Helper()
			resp, err := c.Hello(ctxT(t), &plumblinev1.HelloRequest{AgentId: "db1", Incarnation: inc,
				Host: &plumblinev1.Host{Hostname: "db1", Os: "linux"}})
			if err != nil {
				t.Fatal(err)
			}
			return resp
		}
		report := func(inc string, recs ...*plumblinev1.Record) *plumblinev1.ReportResponse {
			t.Helper()
			resp, err := c.Report(ctxT(t), &plumblinev1.ReportRequest{AgentId: "db1", Incarnation: inc, Records: recs})
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.GetRejections()) > 0 {
				t.Fatalf("rejections: %v", resp.GetRejections())
			}
			return resp
		}
		digest := sha256.Sum256([]byte("inventory A"))
		snap := geometryRecord(1, misalignedVolume("/data"))
		snap.GetGeometry().Digest = digest[:]

		if h := helloAs("spool-a"); h.GetHighWaterSequence() != 0 || len(h.GetGeometryDigest()) != 0 {
			t.Errorf("first Hello = %v, want high water 0, no digest", h)
		}
		report("spool-a", append([]*plumblinev1.Record{snap}, probeRecords(2, 4)...)...)
		if r := report("spool-a", probeRecords(3, 4)...); r.GetHighWaterSequence() != 4 {
			t.Errorf("replay in spool-a: high water %d, want 4", r.GetHighWaterSequence())
		}
		// The spool is deleted: spool-b numbers from 1 again.
		if h := helloAs("spool-b"); h.GetHighWaterSequence() != 0 || !bytes.Equal(h.GetGeometryDigest(), digest[:]) {
			t.Errorf("Hello of spool-b = %v, want high water 0 and the digest of spool-a's snapshot", h)
		}
		if r := report("spool-b", probeRecords(1, 2)...); r.GetHighWaterSequence() != 2 {
			t.Errorf("spool-b: high water %d, want 2", r.GetHighWaterSequence())
		}
		if n := dbRows(t, dsn, `SELECT COUNT(*) FROM records WHERE agent_id = ?`, "db1")[0][0]; n != "6" {
			t.Errorf("records = %s, want 6 (4 of spool-a, 2 of spool-b)", n)
		}
		if h := helloAs("spool-b"); h.GetHighWaterSequence() != 2 {
			t.Errorf("Hello of spool-b again: high water %d, want 2", h.GetHighWaterSequence())
		}

		_, err := c.Hello(ctxT(t), &plumblinev1.HelloRequest{AgentId: "db1", Incarnation: "no spaces"})
		wantCode(t, "Hello with a bad incarnation", err, codes.InvalidArgument, "incarnation")
		_, err = c.Report(ctxT(t), &plumblinev1.ReportRequest{AgentId: "db1", Incarnation: strings.Repeat("x", 65), Records: probeRecords(9, 9)})
		wantCode(t, "Report with a long incarnation", err, codes.InvalidArgument, "incarnation")
		bad := geometryRecord(3, misalignedVolume("/data"))
		bad.GetGeometry().Digest = []byte("short")
		r, err := c.Report(ctxT(t), &plumblinev1.ReportRequest{AgentId: "db1", Incarnation: "spool-b", Records: []*plumblinev1.Record{bad}})
		if err != nil || len(r.GetRejections()) != 1 || !strings.Contains(r.GetRejections()[0].GetReason(), "digest") {
			t.Errorf("snapshot with a 5-byte digest = %v, %v; want a rejection naming the digest", r, err)
		}
	})
}
