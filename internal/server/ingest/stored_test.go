package ingest

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// unknownField is a field number no Plumbline message has, carrying n bytes.
func unknownField(n int) []byte {
	b := protowire.AppendTag(nil, 9999, protowire.BytesType)
	return protowire.AppendBytes(b, make([]byte, n))
}

// A record is stored with the fields the server knows, not as received:
// unknown fields (at the top and deep inside) are not kept; a rejected
// record keeps a short reason (at most MaxStoredReasonBytes) and nothing
// of its payload.
func TestStoredRecordIsBounded(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, dsn string) {
		e := startServer(t, dsn, newPKI(t), Options{})
		c := e.agent(t, "db1")
		hello(t, c, "db1")

		good := probeRecord(1)
		want, err := proto.MarshalOptions{Deterministic: true}.Marshal(good)
		if err != nil {
			t.Fatal(err)
		}
		good.ProtoReflect().SetUnknown(unknownField(1 << 20))
		good.GetProbe().GetLatency().ProtoReflect().SetUnknown(unknownField(64 << 10))
		bad := probeRecord(2)
		bad.GetProbe().MountPoint = "/" + strings.Repeat("x", 1<<20) // longer than MaxStringBytes: rejected
		bad.ProtoReflect().SetUnknown(unknownField(1 << 20))

		resp, err := c.Report(ctxT(t), &plumblinev1.ReportRequest{AgentId: "db1", Records: []*plumblinev1.Record{good, bad}})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.GetRejections()) != 1 || resp.GetRejections()[0].GetSequence() != 2 {
			t.Fatalf("rejections %v, want sequence 2", resp.GetRejections())
		}
		if r := resp.GetRejections()[0].GetReason(); len(r) > MaxReasonBytes || !strings.Contains(r, "mount_point") {
			t.Fatalf("reason of %d bytes %.200q: want at most %d naming mount_point", len(r), r, MaxReasonBytes)
		}
		rows := dbRows(t, dsn, `SELECT sequence, kind, payload, reason FROM records WHERE agent_id = ? ORDER BY sequence`, "db1")
		if len(rows) != 2 {
			t.Fatalf("%d records stored, want 2", len(rows))
		}
		if got := rows[0][2]; got != string(want) {
			t.Fatalf("stored probe record: %d bytes, want the %d bytes of its known fields", len(got), len(want))
		}
		if rows[1][1] != "rejected" || len(rows[1][2]) != 0 || len(rows[1][3]) > MaxStoredReasonBytes || !strings.Contains(rows[1][3], "mount_point") {
			t.Fatalf("stored rejected record: kind %q, %d payload bytes, reason of %d bytes %.200q: want rejected, no payload, at most %d bytes of reason",
				rows[1][1], len(rows[1][2]), len(rows[1][3]), rows[1][3], MaxStoredReasonBytes)
		}
	})
}

func TestTruncateUTF8(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{strings.Repeat("a", 30), 20, "aaaaa… (truncated)"},
		{strings.Repeat("é", 15), 20, "éé… (truncated)"}, // never half a rune
	} {
		if got := truncateUTF8(tc.in, tc.n); got != tc.want || len(got) > tc.n {
			t.Errorf("truncateUTF8(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}
