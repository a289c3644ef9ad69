package ingest

import (
	"math"
	"math/bits"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/plumbline/plumbline/internal/server/store"
	"github.com/plumbline/plumbline/internal/wire"
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
	withUnknown := probeRecord(9)
	withUnknown.ProtoReflect().SetUnknown(unknownField(100))
	withUnknown.GetProbe().ProtoReflect().SetUnknown(unknownField(10))
	seeds = append(seeds, &plumblinev1.ReportRequest{AgentId: "db1", Records: []*plumblinev1.Record{withUnknown}})
	negative := probeRecord(10)
	negative.GetProbe().Latency.MinNanoseconds = -1e18
	wrapped := misalignedVolume("/data")
	wrapped.Layers[1].OffsetBytes = u64(math.MaxInt64)
	wrapped.Layers[2].OffsetBytes = u64(math.MaxInt64)
	seeds = append(seeds, &plumblinev1.ReportRequest{AgentId: "db1", Records: []*plumblinev1.Record{negative, geometryRecord(11, wrapped)}})
	seeds = append(seeds, &plumblinev1.ReportRequest{AgentId: "db1", Records: []*plumblinev1.Record{
		scanProbe(12, "/data", testNow.Add(-time.Minute), scanAnswer(64<<10, 0.999)), scanProbe(13, "/data", testNow, scanAnswer(0, 0))}})
	backwards := memberIORecord(15)
	backwards.GetMemberIo().Groups[0].Members[1].Reads = math.MaxUint64
	seeds = append(seeds, &plumblinev1.ReportRequest{AgentId: "db1", Records: []*plumblinev1.Record{memberIORecord(14), backwards}})
	seeds = append(seeds, &plumblinev1.ReportRequest{AgentId: "db1", Records: []*plumblinev1.Record{databaseRecord(14, nil),
		databaseRecord(15, func(d *plumblinev1.DatabaseIO) { d.Sets[0].Ops[0].TimeNanoseconds = nil })}})
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
			if len(r.Payload) == 0 && r.Kind != store.KindRejected && proto.Size(req.GetRecords()[i]) > 0 {
				t.Fatalf("record %d: no payload", i)
			}
			var stored plumblinev1.Record
			if r.Kind != store.KindRejected {
				if err := proto.Unmarshal(r.Payload, &stored); err != nil {
					t.Fatalf("record %d: stored payload does not decode: %v", i, err)
				}
				if n := unknownBytes(stored.ProtoReflect()); n > 0 {
					t.Fatalf("record %d: %d bytes of unknown fields stored", i, n)
				}
			}
			switch r.Kind {
			case store.KindRejected:
				rejected++
				if r.Reason == "" || len(r.Reason) > MaxReasonBytes {
					t.Fatalf("record %d rejected with a reason of %d bytes: want 1 to %d", i, len(r.Reason), MaxReasonBytes)
				}
				if len(r.Payload) != 0 || len(r.Reason) > MaxStoredReasonBytes {
					t.Fatalf("record %d rejected, %d payload bytes and %d reason bytes stored: want none and at most %d", i, len(r.Payload), len(r.Reason), MaxStoredReasonBytes)
				}
			case store.KindProbe:
				p := r.Probe
				if p == nil || p.Ops > math.MaxInt64 || p.Errors > math.MaxInt64 || p.Bytes > math.MaxInt64 || p.QueueDepth == 0 || p.BlockSizeBytes == 0 {
					t.Fatalf("record %d: probe %+v outside the store's ranges", i, p)
				}
				var hp plumblinev1.Histogram
				if err := proto.Unmarshal(p.Histogram, &hp); err != nil {
					t.Fatalf("record %d: stored histogram: %v", i, err)
				}
				h, err := wire.HistogramFromProto(&hp)
				if err != nil {
					t.Fatalf("record %d: stored histogram refused: %v", i, err)
				}
				if h.Min() < 0 || h.Max() > maxProbeDuration || h.Sum() < 0 || h.Sum() > time.Duration(p.QueueDepth)*maxProbeDuration {
					t.Fatalf("record %d: latency min %v max %v sum %v outside [0, %v], sum ≤ %d × %v", i, h.Min(), h.Max(), h.Sum(), maxProbeDuration, p.QueueDepth, maxProbeDuration)
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
					// No sum of layer offsets wrapped: the data offset is
					// at least every offset on the path above the stripe.
					var vol plumblinev1.Volume
					if err := proto.Unmarshal(v.Geometry, &vol); err != nil {
						t.Fatalf("record %d: stored geometry: %v", i, err)
					}
					var total uint64
					for _, l := range vol.GetLayers() {
						var carry uint64
						if total, carry = bits.Add64(total, l.GetOffsetBytes(), 0); carry != 0 || total > math.MaxInt64 {
							t.Fatalf("record %d: volume %q accepted with layer offsets adding up past 2^63-1", i, v.MountPoint)
						}
					}
					switch v.Judged.Verdict {
					case "aligned", "misaligned", "unknown":
					default:
						t.Fatalf("record %d: verdict %q", i, v.Judged.Verdict)
					}
				}
			case store.KindMemberIO:
				// What the store refuses (store.checkMemberIO) is never passed on.
				if r.MemberIO == nil || r.MemberIO.Interval <= 0 {
					t.Fatalf("record %d: member io %+v", i, r.MemberIO)
				}
				for _, g := range r.MemberIO.Groups {
					if g.Device == "" || g.Kind == "" || len(g.Members) < 2 {
						t.Fatalf("record %d: member group %+v", i, g)
					}
					for _, c := range g.Members {
						if c.Device == "" || c.Reads > math.MaxInt64 || c.ReadTimeMS > math.MaxInt64 || c.Writes > math.MaxInt64 ||
							c.WriteTimeMS > math.MaxInt64 || c.ReadSectors > math.MaxInt64 || c.WriteSectors > math.MaxInt64 || c.IOTimeMS > math.MaxInt64 {
							t.Fatalf("record %d: member %+v outside the store's ranges", i, c)
						}
					}
				}
			case store.KindDatabase:
				d := r.Database
				if d == nil || d.Interval <= 0 {
					t.Fatalf("record %d: database interval %+v", i, d)
				}
				for _, o := range d.Ops {
					if o.Count > math.MaxInt64 || o.Bytes > math.MaxInt64 || o.Time < 0 || o.Measured == (o.NotMeasured != "") {
						t.Fatalf("record %d: database op %+v outside the store's ranges", i, o)
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

// unknownBytes counts the unknown-field bytes in m and every message in it.
func unknownBytes(m protoreflect.Message) int {
	n := len(m.GetUnknown())
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() && fd.Message() != nil:
			for i := 0; i < v.List().Len(); i++ {
				n += unknownBytes(v.List().Get(i).Message())
			}
		case fd.IsMap() && fd.MapValue().Message() != nil:
			v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
				n += unknownBytes(mv.Message())
				return true
			})
		case !fd.IsList() && !fd.IsMap() && fd.Message() != nil:
			n += unknownBytes(v.Message())
		}
		return true
	})
	return n
}
