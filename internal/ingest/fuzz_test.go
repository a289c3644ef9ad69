package ingest

import (
	"math"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/plumbline/plumbline/internal/store"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// FuzzValidateReport feeds arbitrary bytes, decoded as a ReportRequest,
// to the validation every incoming report goes through. It must never
// panic, and whatever it accepts must be something the store takes whole:
// one store record per request record, ascending, each a geometry or probe
// record or a rejection with a reason, within the store's ranges.
func FuzzValidateReport(f *testing.F) {
	bad := probeRecord(3)
	bad.GetProbe().QueueDepth = 0
	seeds := []*plumblinev1.ReportRequest{
		{AgentId: "db1", Records: append([]*plumblinev1.Record{geometryRecord(1, misalignedVolume("/data"), misalignedVolume("/log"))}, probeRecords(2, 4)...)},
		{AgentId: "db1", FirstSequence: 7, Records: []*plumblinev1.Record{probeRecord(7), bad}},
		{AgentId: "db1", Records: []*plumblinev1.Record{{Sequence: 1}}},
		{AgentId: "db1", FirstSequence: 3},
		{AgentId: "db1", Records: []*plumblinev1.Record{refusedProbe(5, testNow)}},
	}
	for _, s := range seeds {
		b, err := proto.Marshal(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	lim := Limits{MaxBatchRecords: 50}
	f.Fuzz(func(t *testing.T, data []byte) {
		var req plumblinev1.ReportRequest
		if err := proto.Unmarshal(data, &req); err != nil {
			return // gRPC refuses undecodable messages before the service sees them
		}
		b, err := ValidateReport(&req, lim, testNow)
		if err != nil {
			return
		}
		if len(b.Records) != len(req.GetRecords()) {
			t.Fatalf("%d store records for %d request records", len(b.Records), len(req.GetRecords()))
		}
		rejected := 0
		for i, r := range b.Records {
			if r.Sequence != req.GetRecords()[i].GetSequence() || r.Sequence == 0 || r.Sequence > math.MaxInt64 {
				t.Fatalf("record %d: sequence %d", i, r.Sequence)
			}
			if i > 0 && r.Sequence <= b.Records[i-1].Sequence {
				t.Fatalf("record %d: sequence %d not ascending", i, r.Sequence)
			}
			if len(r.Payload) == 0 && proto.Size(req.GetRecords()[i]) > 0 {
				t.Fatalf("record %d: no payload", i)
			}
			switch r.Kind {
			case store.KindRejected:
				rejected++
				if r.Reason == "" {
					t.Fatalf("record %d rejected without a reason", i)
				}
			case store.KindProbe:
				p := r.Probe
				if p == nil || p.Ops > math.MaxInt64 || p.Errors > math.MaxInt64 || p.Bytes > math.MaxInt64 || p.QueueDepth == 0 || p.BlockSizeBytes == 0 {
					t.Fatalf("record %d: probe %+v outside the store's ranges", i, p)
				}
			case store.KindGeometry:
				seen := map[string]bool{}
				for _, v := range r.Volumes {
					if seen[v.MountPoint] {
						t.Fatalf("record %d: volume %q twice", i, v.MountPoint)
					}
					seen[v.MountPoint] = true
					if v.StripeUnitBytes > math.MaxInt64 || v.DataOffsetBytes != nil && *v.DataOffsetBytes > math.MaxInt64 {
						t.Fatalf("record %d: volume %q sizes above 2^63-1", i, v.MountPoint)
					}
					switch v.Verdict {
					case "aligned", "misaligned", "unknown":
					default:
						t.Fatalf("record %d: verdict %q", i, v.Verdict)
					}
				}
			default:
				t.Fatalf("record %d: kind %q", i, r.Kind)
			}
		}
		if rejected != len(b.Rejections) {
			t.Fatalf("%d rejected records, %d rejections", rejected, len(b.Rejections))
		}
	})
}
