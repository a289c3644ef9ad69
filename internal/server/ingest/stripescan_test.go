package ingest

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/plumbline/plumbline/internal/align"
	"github.com/plumbline/plumbline/internal/server/store"
	"github.com/plumbline/plumbline/internal/wire"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// hiddenRAIDVolume is a volume on a hardware RAID that reports no stripe:
// a partition at 31.5 KiB on sdb, nothing declared, no kernel hint.
func hiddenRAIDVolume(mp string) *plumblinev1.Volume {
	return &plumblinev1.Volume{
		MountPoint: mp, Device: "/dev/sdb1",
		Filesystem: &plumblinev1.Filesystem{Type: "xfs", BlockSizeBytes: 4096},
		Layers: []*plumblinev1.Layer{
			{Kind: "filesystem", Device: "/dev/sdb1", FsType: "xfs", BlockSizeBytes: 4096, OffsetBytes: u64(0), Source: "superblock"},
			{Kind: "partition", Device: "sdb1", OffsetBytes: u64(32256), LogicalSectorBytes: 512, Source: "sysfs"},
			{Kind: "disk", Device: "sdb", LogicalSectorBytes: 512, PhysicalSectorBytes: 512, MinIoBytes: 512, Source: "sysfs"},
		},
	}
}

// scanAnswer is a stripe-scan answer measured on sdb relative to the disk.
func scanAnswer(unit uint64, conf float64) *plumblinev1.StripeScan {
	s := &plumblinev1.StripeScan{
		InferredStripeUnitBytes: unit, Confidence: conf, Alpha: 0.01, Reason: "test",
		PlacementDevice: "sdb", PlacementBasis: "disk", PlacementOffsetBytes: 32256, PlacementOffsetKnown: true,
		Extents: 1, Placed: 2000,
	}
	for u := uint64(16 << 10); u <= 1<<20; u *= 2 {
		c := &plumblinev1.StripeScanCandidate{UnitBytes: u, Straddles: 10, Inside: 30, Superiority: 0.5, PValue: 0.5, AdjustedP: 1, StepAdjustedP: 1}
		if unit != 0 && u >= unit {
			c.ShiftSeconds, c.ShiftLowSeconds, c.ShiftHighSeconds = 0.0008, 0.0006, 0.001
			c.Superiority, c.PValue, c.AdjustedP, c.Significant = 0.8, 1e-9, 1e-8, true
		}
		s.Candidates = append(s.Candidates, c)
	}
	if unit != 0 {
		s.StraddleCostSeconds, s.StraddleCostLowSeconds, s.StraddleCostHighSeconds = 0.0008, 0.0006, 0.001
	}
	return s
}

func scanProbe(seq uint64, mp string, started time.Time, s *plumblinev1.StripeScan) *plumblinev1.Record {
	r := probeRecord(seq)
	p := r.GetProbe()
	p.MountPoint, p.Kind, p.QueueDepth, p.Ops, p.Bytes, p.OpsBudget = mp, "stripe-scan", 1, 100, 100*8192, 2000
	p.StartedAt = timestamppb.New(started)
	p.StripeScan = s
	return r
}

func TestCheckStripeScan(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		edit func(p *plumblinev1.ProbeResult)
		want string // "" accepted
	}{
		{"inferred", func(*plumblinev1.ProbeResult) {}, ""},
		{"none", func(p *plumblinev1.ProbeResult) { p.StripeScan = scanAnswer(0, 0) }, ""},
		{"refused run without answer", func(p *plumblinev1.ProbeResult) {
			p.StripeScan, p.Ops, p.Bytes, p.Skipped, p.StoppedReason, p.Failure = nil, 0, 0, true, "refused", "free space"
			p.Latency = wire.HistogramToProto(nil)
		}, ""},
		{"answer missing", func(p *plumblinev1.ProbeResult) { p.StripeScan = nil }, "stripe_scan missing"},
		{"answer on another kind", func(p *plumblinev1.ProbeResult) { p.Kind, p.QueueDepth = "random-read", 4 }, "only stripe-scan runs carry one"},
		{"unit not a candidate", func(p *plumblinev1.ProbeResult) { p.StripeScan.InferredStripeUnitBytes = 3 << 20 }, "inferred_stripe_unit_bytes 3145728"},
		{"unit below the candidates", func(p *plumblinev1.ProbeResult) { p.StripeScan.InferredStripeUnitBytes = 8 << 10 }, "want 0 or a power of two"},
		{"confidence above 1", func(p *plumblinev1.ProbeResult) { p.StripeScan.Confidence = 1.5 }, "confidence 1.5"},
		{"confidence without unit", func(p *plumblinev1.ProbeResult) { p.StripeScan = scanAnswer(0, 0); p.StripeScan.Confidence = 0.9 }, "with no inferred unit"},
		{"unit without confidence", func(p *plumblinev1.ProbeResult) { p.StripeScan.Confidence = 0 }, "with confidence 0"},
		{"cost outside its interval", func(p *plumblinev1.ProbeResult) { p.StripeScan.StraddleCostSeconds = 0.5 }, "outside its interval"},
		{"cost beyond a day", func(p *plumblinev1.ProbeResult) {
			p.StripeScan.StraddleCostHighSeconds = 1e12
		}, "want within"},
		{"straddles above ops", func(p *plumblinev1.ProbeResult) { p.StripeScan.Candidates[3].Straddles = 1 << 30 }, "more reads than the run's 100 ops"},
		{"straddles and inside reads above ops", func(p *plumblinev1.ProbeResult) { p.StripeScan.Candidates[6].Inside = 31 }, "more reads than the run's 100 ops"},
		{"candidates out of order", func(p *plumblinev1.ProbeResult) {
			c := p.StripeScan.Candidates
			c[0], c[1] = c[1], c[0]
		}, "want ascending powers of two"},
		{"p-value above 1", func(p *plumblinev1.ProbeResult) { p.StripeScan.Candidates[2].AdjustedP = 2 }, "adjusted_p 2"},
		{"hostile device", func(p *plumblinev1.ProbeResult) { p.StripeScan.PlacementDevice = "../../etc" }, "placement_device"},
		{"control characters", func(p *plumblinev1.ProbeResult) { p.StripeScan.Reason = "a\x1b[31mb" }, "control character U+001B"},
		{"placed above the budget", func(p *plumblinev1.ProbeResult) { p.StripeScan.Placed = 1 << 20 }, "placed 1048576"},
		{"placed above a small budget", func(p *plumblinev1.ProbeResult) { p.OpsBudget = 100; p.StripeScan.Placed = 2000 }, "placed 2000: more reads than the run's budget of 100"},
		{"ops above the reads placed", func(p *plumblinev1.ProbeResult) { p.StripeScan.Placed = 10 }, "ops 100: more than the 10 reads placed"},
		{"answer on a run without ops", func(p *plumblinev1.ProbeResult) {
			p.Ops, p.Bytes, p.StoppedReason = 0, 0, "busy-during"
			p.Latency = wire.HistogramToProto(nil)
		}, "stripe_scan set on a run with ops 0"},
		{"free-text basis", func(p *plumblinev1.ProbeResult) { p.StripeScan.PlacementBasis = "anything at all" }, `placement_basis "anything at all" with a known offset`},
		{"file-system basis with a known offset", func(p *plumblinev1.ProbeResult) { p.StripeScan.PlacementBasis = "file system device" }, "with a known offset"},
		{"unknown offset", func(p *plumblinev1.ProbeResult) {
			p.StripeScan.PlacementBasis, p.StripeScan.PlacementOffsetKnown, p.StripeScan.PlacementOffsetBytes = "file system device", false, 0
		}, ""},
		{"unknown offset, earlier agent's words", func(p *plumblinev1.ProbeResult) {
			p.StripeScan.PlacementBasis = "file system device (an offset below it is unknown: the answer is relative to it)"
			p.StripeScan.PlacementOffsetKnown, p.StripeScan.PlacementOffsetBytes = false, 0
		}, ""},
		{"unknown offset with a basis of known ones", func(p *plumblinev1.ProbeResult) {
			p.StripeScan.PlacementOffsetKnown, p.StripeScan.PlacementOffsetBytes = false, 0
		}, "with an unknown offset"},
		{"unknown offset that is not 0", func(p *plumblinev1.ProbeResult) {
			p.StripeScan.PlacementBasis, p.StripeScan.PlacementOffsetKnown = "file system device", false
		}, "placement_offset_known false: want 0"},
		{"offset off a sector", func(p *plumblinev1.ProbeResult) { p.StripeScan.PlacementOffsetBytes = 32257 }, "want a multiple of 512"},
		{"block size of another kind", func(p *plumblinev1.ProbeResult) { p.BlockSizeBytes, p.Bytes = 4096, 100*4096 }, "block_size_bytes 4096: want a power of two from 8192 to 8192"},
		{"queue depth above the kind's", func(p *plumblinev1.ProbeResult) { p.QueueDepth = 4 }, "queue_depth 4: want 1 to 1 for stripe-scan"},
		{"ops above the kind's budget", func(p *plumblinev1.ProbeResult) { p.Ops = 3000 }, "ops 3000: want at most 2000 for stripe-scan"},
		{"too many candidates", func(p *plumblinev1.ProbeResult) {
			p.StripeScan.Candidates = append(p.StripeScan.Candidates, p.StripeScan.Candidates...)
		}, "candidates: want at most"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := scanProbe(1, "/data", testNow.Add(-time.Minute), scanAnswer(64<<10, 0.999))
			tc.edit(r.GetProbe())
			b, err := ValidateReport(&plumblinev1.ReportRequest{AgentId: "db1", Records: []*plumblinev1.Record{r}}, Limits{}, testNow)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.want == "" && len(b.Rejections) != 0:
				t.Fatalf("rejected: %s", b.Rejections[0].GetReason())
			case tc.want != "" && len(b.Rejections) != 1:
				t.Fatalf("accepted, want a rejection naming %q", tc.want)
			case tc.want != "" && !strings.Contains(b.Rejections[0].GetReason(), tc.want):
				t.Fatalf("rejection %q, want it to name %q", b.Rejections[0].GetReason(), tc.want)
			case tc.want == "" && (b.Records[0].Probe.StripeScan == nil) != (r.GetProbe().GetStripeScan() == nil):
				t.Fatalf("stored answer %v for sent %v", b.Records[0].Probe.StripeScan, r.GetProbe().GetStripeScan())
			}
		})
	}
}

func scanRun(t *testing.T, started time.Time, s *plumblinev1.StripeScan) store.StripeScanRun {
	t.Helper()
	b, err := proto.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return store.StripeScanRun{StartedAt: started, Scan: b}
}

// measuredStripe folds the runs: noise (none) does not erase an inference,
// another unit replaces it, unknown offsets and undecodable runs do not
// count, and a run on another device starts over.
func TestMeasuredStripe(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	at := func(h int) time.Time { return t0.Add(time.Duration(h) * time.Hour) }
	unknown := scanAnswer(256<<10, 1)
	unknown.PlacementOffsetKnown = false
	other := scanAnswer(128<<10, 0.995)
	other.PlacementDevice = "sdc"
	lower := scanAnswer(64<<10, 0.99)
	lower.StraddleCostSeconds, lower.StraddleCostLowSeconds, lower.StraddleCostHighSeconds = 0.0005, 0.0004, 0.0006
	for _, tc := range []struct {
		name string
		runs []store.StripeScanRun // oldest first here; reversed below
		want *plumblinev1.StripeMeasurement
	}{
		{"no runs", nil, nil},
		{"only none", []store.StripeScanRun{scanRun(t, at(0), scanAnswer(0, 0)), scanRun(t, at(1), scanAnswer(0, 0))},
			&plumblinev1.StripeMeasurement{NoneRuns: 2, Device: "sdb", Basis: "disk", OffsetKnown: true, MeasuredAt: timestamppb.New(at(1))}},
		{"inferred, then noise", []store.StripeScanRun{scanRun(t, at(0), scanAnswer(0, 0)), scanRun(t, at(1), scanAnswer(64<<10, 0.999)),
			scanRun(t, at(2), scanAnswer(0, 0)), scanRun(t, at(3), lower)},
			&plumblinev1.StripeMeasurement{UnitBytes: 64 << 10, Confidence: 0.999, AgreeingRuns: 2, NoneRuns: 1,
				StraddleCostSeconds: 0.0005, StraddleCostLowSeconds: 0.0004, StraddleCostHighSeconds: 0.0006,
				Device: "sdb", Basis: "disk", OffsetKnown: true, MeasuredAt: timestamppb.New(at(3))}},
		{"replaced by another unit", []store.StripeScanRun{scanRun(t, at(0), scanAnswer(64<<10, 0.999)), scanRun(t, at(1), scanAnswer(256<<10, 0.995))},
			&plumblinev1.StripeMeasurement{UnitBytes: 256 << 10, Confidence: 0.995, AgreeingRuns: 1,
				StraddleCostSeconds: 0.0008, StraddleCostLowSeconds: 0.0006, StraddleCostHighSeconds: 0.001,
				Device: "sdb", Basis: "disk", OffsetKnown: true, MeasuredAt: timestamppb.New(at(1))}},
		{"unknown offset and garbage skipped", []store.StripeScanRun{scanRun(t, at(0), scanAnswer(64<<10, 0.999)), scanRun(t, at(1), unknown),
			{StartedAt: at(2), Scan: []byte{0xff, 0xff}}},
			&plumblinev1.StripeMeasurement{UnitBytes: 64 << 10, Confidence: 0.999, AgreeingRuns: 1,
				StraddleCostSeconds: 0.0008, StraddleCostLowSeconds: 0.0006, StraddleCostHighSeconds: 0.001,
				Device: "sdb", Basis: "disk", OffsetKnown: true, MeasuredAt: timestamppb.New(at(0))}},
		{"another device starts over", []store.StripeScanRun{scanRun(t, at(0), scanAnswer(64<<10, 0.999)), scanRun(t, at(1), other)},
			&plumblinev1.StripeMeasurement{UnitBytes: 128 << 10, Confidence: 0.995, AgreeingRuns: 1,
				StraddleCostSeconds: 0.0008, StraddleCostLowSeconds: 0.0006, StraddleCostHighSeconds: 0.001,
				Device: "sdc", Basis: "disk", OffsetKnown: true, MeasuredAt: timestamppb.New(at(1))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			newest := make([]store.StripeScanRun, len(tc.runs))
			for i, r := range tc.runs {
				newest[len(tc.runs)-1-i] = r
			}
			if got := measuredStripe(newest); !proto.Equal(got, tc.want) {
				t.Errorf("measuredStripe = %v\nwant %v", got, tc.want)
			}
		})
	}
}

// End to end over gRPC: a stripe-scan run reaches its volume's judged
// record (the measured stripe in its document, the judged stripe unit)
// at once; a later snapshot of the same volume keeps it; a
// measured_stripe the agent sends is not believed (nor stored).
func TestStripeScanReachesVolume(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, dsn string) {
		e := startServer(t, dsn, newPKI(t), Options{})
		c := e.agent(t, "db1")
		hello(t, c, "db1")
		forged := hiddenRAIDVolume("/data")
		forged.MeasuredStripe = &plumblinev1.StripeMeasurement{UnitBytes: 1 << 20, Confidence: 1, Device: "sdb", OffsetKnown: true}
		send := func(recs ...*plumblinev1.Record) {
			t.Helper()
			resp, err := c.Report(ctxT(t), &plumblinev1.ReportRequest{AgentId: "db1", Records: recs})
			if err != nil || len(resp.GetRejections()) != 0 {
				t.Fatalf("Report = %v, %v", resp, err)
			}
		}
		measured := func() *plumblinev1.StripeMeasurement {
			t.Helper()
			rows := dbRows(t, dsn, `SELECT geometry FROM volumes WHERE agent_id = ? AND mount_point = ?`, "db1", "/data")
			if len(rows) != 1 {
				t.Fatalf("%d volume rows", len(rows))
			}
			var v plumblinev1.Volume
			if err := proto.Unmarshal([]byte(rows[0][0]), &v); err != nil || v.MeasuredStripe != nil || v.Alignment != nil {
				t.Fatalf("stored geometry: measured %v, alignment %v, %v; want neither", v.MeasuredStripe, v.Alignment, err)
			}
			iv, err := e.store.InventoryVolumeByID(ctxT(t), store.VolumeID("db1", "/data"))
			if err != nil {
				t.Fatal(err)
			}
			var doc struct {
				M *struct {
					Unit       uint64  `json:"unit_bytes"`
					Agreeing   uint32  `json:"agreeing_runs"`
					None       uint32  `json:"none_runs"`
					Confidence float64 `json:"confidence"`
					Device     string  `json:"device"`
				} `json:"measured_stripe"`
			}
			full := iv.Doc
			if len(full) == 0 {
				docs := dbRows(t, dsn, `SELECT doc FROM inventory_docs WHERE volume_id = ?`, iv.ID)
				full = []byte(docs[0][0])
			}
			if err := json.Unmarshal(full, &doc); err != nil {
				t.Fatalf("document: %v: %s", err, full)
			}
			if doc.M == nil {
				return nil
			}
			if iv.StripeUnitSource != align.SourceMeasured || iv.StripeUnitBytes != int64(doc.M.Unit) || iv.StripeUnitConfidence != doc.M.Confidence {
				t.Errorf("judged stripe unit %d from %q at %v; want the measured %d", iv.StripeUnitBytes, iv.StripeUnitSource, iv.StripeUnitConfidence, doc.M.Unit)
			}
			return &plumblinev1.StripeMeasurement{UnitBytes: doc.M.Unit, AgreeingRuns: doc.M.Agreeing, NoneRuns: doc.M.None,
				Confidence: doc.M.Confidence, Device: doc.M.Device}
		}
		send(geometryRecord(1, forged))
		if m := measured(); m != nil {
			t.Fatalf("the agent's own measured_stripe was stored: %v", m)
		}
		send(scanProbe(2, "/data", testNow.Add(-2*time.Minute), scanAnswer(0, 0)), scanProbe(3, "/data", testNow.Add(-time.Minute), scanAnswer(64<<10, 0.9995)))
		if m := measured(); m.GetUnitBytes() != 64<<10 || m.GetAgreeingRuns() != 1 || m.GetNoneRuns() != 0 || m.GetConfidence() != 0.9995 {
			t.Fatalf("after the runs: measured %v, want 64 KiB, 1 agreeing run", m)
		}
		send(geometryRecord(4, forged))
		if m := measured(); m.GetUnitBytes() != 64<<10 || m.GetDevice() != "sdb" {
			t.Fatalf("after a new snapshot: measured %v, want the runs' 64 KiB kept", m)
		}
		// A replay of a stored run changes nothing and is not judged again.
		send(scanProbe(3, "/data", testNow.Add(-time.Minute), scanAnswer(64<<10, 0.9995)))
		if m := measured(); m.GetAgreeingRuns() != 1 {
			t.Fatalf("after a replay: %d agreeing runs, want 1", m.GetAgreeingRuns())
		}
	})
}
