package inventory

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/plumbline/plumbline/internal/align"
	"github.com/plumbline/plumbline/internal/server/ingest"
	"github.com/plumbline/plumbline/internal/server/store"
	"github.com/plumbline/plumbline/internal/vocab"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// hiddenStripeVolume is xfs on a hardware RAID the OS sees as one plain
// disk (no stripe unit anywhere), at a 31.5 KiB partition offset: the
// volume only the geometry probe can judge.
func hiddenStripeVolume(mp string) *plumblinev1.Volume {
	return &plumblinev1.Volume{
		MountPoint: mp, Device: "/dev/sdc1",
		Filesystem: &plumblinev1.Filesystem{Type: "xfs", BlockSizeBytes: 4096},
		Layers: []*plumblinev1.Layer{
			{Kind: "filesystem", Device: "/dev/sdc1", FsType: "xfs", BlockSizeBytes: 4096, OffsetBytes: u64(0)},
			{Kind: "partition", Device: "sdc1", OffsetBytes: u64(32256), LogicalSectorBytes: 512, Source: "sysfs"},
			{Kind: "disk", Device: "sdc", LogicalSectorBytes: 512, PhysicalSectorBytes: 512, Source: "sysfs"},
		},
	}
}

// stripeScan is what the server derives from a volume's stripe-scan runs:
// a 64 KiB unit on dev, confident, with a split read 0.8 ms slower.
func stripeScan(dev, basis string) *plumblinev1.StripeMeasurement {
	return &plumblinev1.StripeMeasurement{UnitBytes: 64 << 10, Confidence: 0.998, AgreeingRuns: 4,
		StraddleCostSeconds: 0.0008, StraddleCostLowSeconds: 0.0006, StraddleCostHighSeconds: 0.001,
		Device: dev, Basis: basis, OffsetKnown: true, MeasuredAt: timestamppb.New(time.Date(2026, 11, 20, 3, 0, 0, 0, time.UTC))}
}

// reportMeasured stores a geometry snapshot of agent id whose volumes are
// judged as the server judges them after their stripe-scan runs
// (ingest.JudgeVolume): with ms[mount point].
func reportMeasured(t testing.TB, st *store.Store, id, hostname string, seq uint64, ms map[string]*plumblinev1.StripeMeasurement, vols ...*plumblinev1.Volume) {
	t.Helper()
	ctx := context.Background()
	if err := st.UpsertAgent(ctx, store.Agent{ID: id, Hostname: hostname, OS: "linux", Kernel: "6.1", AgentVersion: "0.1.0"}); err != nil {
		t.Fatal(err)
	}
	req := &plumblinev1.ReportRequest{AgentId: id, Records: []*plumblinev1.Record{{
		Sequence: seq, ProducedAt: timestamppb.New(time.Now().Add(-time.Minute)),
		Payload: &plumblinev1.Record_Geometry{Geometry: &plumblinev1.GeometrySnapshot{Trigger: "start",
			Inventory: &plumblinev1.Inventory{Host: &plumblinev1.Host{Hostname: hostname, Os: "linux"}, Volumes: vols}}},
	}}}
	b, err := ingest.ValidateReport(req, ingest.Limits{}, time.Now())
	if err != nil || len(b.Rejections) > 0 {
		t.Fatalf("ValidateReport: %v %v", err, b.Rejections)
	}
	for i, sv := range b.Records[0].Volumes {
		m := ms[sv.MountPoint]
		if m == nil {
			continue
		}
		var v plumblinev1.Volume
		if err := proto.Unmarshal(sv.Geometry, &v); err != nil {
			t.Fatal(err)
		}
		sv, err := ingest.JudgeVolume(&v, m, ingest.Rules{}) // as its stripe-scan runs would have it judged
		if err != nil {
			t.Fatal(err)
		}
		b.Records[0].Volumes[i] = sv
	}
	if _, err := st.AppendBatch(ctx, id, b.Records); err != nil {
		t.Fatal(err)
	}
}

// TestMeasuredColumns: on both engines, a volume whose stripe unit the
// geometry probe inferred shows, in the JSON API and in the CSV alike,
// where its unit comes from, how sure the probe is, the measured cost of
// a split with its interval and the penalty per I/O size beside the
// predicted split; a volume without a measurement has empty cells.
func TestMeasuredColumns(t *testing.T) {
	t.Parallel()
	for _, e := range engines {
		t.Run(e.Name, func(t *testing.T) {
			t.Parallel()
			st := openStore(t, e.DSN(t))
			seedFleet(t, st, 1, 1)
			reportMeasured(t, st, "hidden", "hw01.example", 1,
				map[string]*plumblinev1.StripeMeasurement{"/data": stripeScan("sdc", align.BasisDisk)},
				hiddenStripeVolume("/data"), hiddenStripeVolume("/plain"))
			srv := serveSyncing(t, st, Options{SyncPeriod: 0})
			defer srv.Close()

			// The JSON API: the verdict's measured fields.
			vols := list(t, srv.URL, "host=hw01.example", 10)
			if len(vols) != 2 {
				t.Fatalf("%d volumes of hw01, want 2", len(vols))
			}
			byMount := map[string]map[string]any{}
			for _, v := range vols {
				byMount[v["mount_point"].(string)] = v["alignment"].(map[string]any)
			}
			a := byMount["/data"]
			if a["stripe_unit_source"] != align.SourceMeasured || num(a["stripe_unit_confidence"]) != 0.998 || a["verdict"] != "misaligned" ||
				num(a["measured_split_cost_seconds"]) != 0.0008 || num(a["measured_split_cost_low_seconds"]) != 0.0006 || num(a["measured_split_cost_high_seconds"]) != 0.001 {
				t.Errorf("/data alignment: %v", a)
			}
			pen, _ := a["measured_penalty_seconds"].(map[string]any)
			split, _ := a["split_fraction"].(map[string]any)
			gran, _ := a["granularity_split_fraction"].(map[string]any)
			for _, s := range vocab.IOSizeNames() {
				if pen[s] == nil || split[s] == nil || gran[s] == nil {
					t.Fatalf("/data: io size %s: penalty %v split %v granularity %v", s, pen, split, gran)
				}
				if want := (num(split[s]) + num(gran[s])) * 0.0008; !near(num(pen[s]), want) {
					t.Errorf("/data: measured_penalty_seconds[%s] = %v, want (split + granularity) × cost = %v", s, pen[s], want)
				}
			}
			if _, ok := byMount["/plain"]["measured_split_cost_seconds"]; ok {
				t.Errorf("/plain (no measurement) has a measured split cost: %v", byMount["/plain"])
			}

			// The filter on the source: the SQL (a page) and the summary
			// index (the summary's count) select the one measured volume.
			if got := list(t, srv.URL, "stripe_unit_source=measured", 10); len(got) != 1 || got[0]["mount_point"] != "/data" || got[0]["host"] != "hw01.example" {
				t.Errorf("stripe_unit_source=measured: %d volumes %v, want hw01.example:/data", len(got), got)
			}
			if n := num(summaryAt(t, srv.URL, "stripe_unit_source=measured")["volumes"]); n != 1 {
				t.Errorf("summary of stripe_unit_source=measured: %v volumes, want 1", n)
			}
			if got := list(t, srv.URL, "stripe_unit_source=declared&host=hw01.example", 10); len(got) != 0 {
				t.Errorf("stripe_unit_source=declared on hw01: %d volumes, want 0", len(got))
			}

			// The CSV: the same numbers.
			resp, err := http.Get(srv.URL + "/api/v1/volumes?format=csv")
			if err != nil {
				t.Fatal(err)
			}
			recs, err := csv.NewReader(resp.Body).ReadAll()
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			cols := VolumeCSVColumns()
			if diff := gocmp.Diff(cols, recs[0]); diff != "" {
				t.Errorf("header (-want +got):\n%s", diff)
			}
			rows := map[string][]string{}
			for _, r := range recs[1:] {
				rows[r[slices.Index(cols, "host")]+":"+r[slices.Index(cols, "mount_point")]] = r
			}
			cell := func(key, col string) string {
				i := slices.Index(cols, col)
				if i < 0 {
					t.Fatalf("no CSV column %s", col)
				}
				return rows[key][i]
			}
			want := map[string]string{"stripe_unit_source": "measured", "stripe_unit_confidence": "0.998",
				"measured_split_cost_seconds": "0.0008", "measured_split_cost_low_seconds": "0.0006", "measured_split_cost_high_seconds": "0.001"}
			for _, s := range vocab.IOSizes() {
				want[fmt.Sprintf("measured_penalty_seconds_%dk", s>>10)] = strconv.FormatFloat(num(pen[strconv.Itoa(int(s))]), 'g', -1, 64)
			}
			for col, w := range want {
				if got := cell("hw01.example:/data", col); got != w {
					t.Errorf("CSV hw01.example:/data %s = %q, want %q", col, got, w)
				}
				if got := cell("hw01.example:/plain", col); got != "" && col != "stripe_unit_source" {
					t.Errorf("CSV hw01.example:/plain (no measurement) %s = %q, want empty", col, got)
				}
			}
			// A declared array without a measurement: its source, no measured cells.
			if got := cell("db00.example:/data0", "stripe_unit_source"); got != "declared" {
				t.Errorf("CSV db00.example:/data0 stripe_unit_source = %q, want declared", got)
			}
			if got := cell("db00.example:/data0", "measured_split_cost_seconds"); got != "" {
				t.Errorf("CSV db00.example:/data0 measured_split_cost_seconds = %q, want empty", got)
			}
			if !strings.Contains(strings.Join(rows["hw01.example:/data"], ","), "stripe-unit-measured") {
				t.Errorf("CSV hw01.example:/data: no stripe-unit-measured rule: %v", rows["hw01.example:/data"])
			}
		})
	}
}

// num is a JSON number of a decoded body (json.Number or float64); NaN
// for anything else.
func num(v any) float64 {
	switch n := v.(type) {
	case json.Number:
		f, err := n.Float64()
		if err == nil {
			return f
		}
	case float64:
		return n
	}
	return math.NaN()
}

func near(a, b float64) bool { return a-b < 1e-15 && b-a < 1e-15 }
