package render

import (
	"strings"
	"testing"

	"github.com/plumbline/plumbline/internal/align"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// TestTableSplitByCause: an aligned volume whose I/Os split only because
// of the allocation grid shows 0% offset split, and the grid's share in a
// column of its own (issue 11: "aligned" next to 6.2%/93.8%).
func TestTableSplitByCause(t *testing.T) {
	t.Parallel()
	off := uint64(1 << 20)
	inv := &plumblinev1.Inventory{
		Host: &plumblinev1.Host{Hostname: "db1", Os: "linux"},
		Volumes: []*plumblinev1.Volume{{
			MountPoint: "/data", Device: "/dev/sdb1",
			Filesystem: &plumblinev1.Filesystem{Type: "ext4", BlockSizeBytes: 4096},
			Alignment: &plumblinev1.Alignment{
				Verdict: "aligned", DataOffsetBytes: &off, StripeUnitBytes: 64 << 10, StripeUnitSource: "declared",
				SplitFraction:            map[uint32]float64{8192: 0, 65536: 0},
				GranularitySplitFraction: map[uint32]float64{8192: 0.0625, 65536: 0.9375},
			},
		}},
	}
	var b strings.Builder
	if err := Table(&b, inv); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	var header, row string
	for i, l := range lines {
		if strings.HasPrefix(l, "MOUNT") && i+1 < len(lines) {
			header, row = l, lines[i+1]
		}
	}
	col := func(name string) string {
		i := strings.Index(header, name)
		if i < 0 || i >= len(row) {
			t.Fatalf("Table() header %q has no column %q", header, name)
		}
		return strings.Fields(row[i:])[0]
	}
	if got := col("OFFSET SPLIT 8K/64K"); got != "0%/0%" {
		t.Errorf("Table() OFFSET SPLIT = %q, want 0%%/0%%\n%s", got, b.String())
	}
	if got := col("GRAIN SPLIT 8K/64K"); got != "6.2%/93.8%" {
		t.Errorf("Table() GRAIN SPLIT = %q, want 6.2%%/93.8%%\n%s", got, b.String())
	}
}

// TestTableMeasuredStripe: a unit the geometry probe inferred reads as
// measured, with its confidence rounded down (99.97% is not 100%), and
// its finding is listed with the fix.
func TestTableMeasuredStripe(t *testing.T) {
	t.Parallel()
	off := func(n uint64) *uint64 { return &n }
	v := &plumblinev1.Volume{
		MountPoint: "/data", Device: "/dev/sdb1",
		Filesystem: &plumblinev1.Filesystem{Type: "ext4", BlockSizeBytes: 4096},
		Layers: []*plumblinev1.Layer{
			{Kind: "filesystem", Device: "sdb1", FsType: "ext4", BlockSizeBytes: 4096, OffsetBytes: off(0)},
			{Kind: "partition", Device: "sdb1", OffsetBytes: off(63 * 512), LogicalSectorBytes: 512},
			{Kind: "disk", Device: "sdb", LogicalSectorBytes: 512, PhysicalSectorBytes: 512, MinIoBytes: 512, OffsetBytes: off(0)},
		},
		MeasuredStripe: &plumblinev1.StripeMeasurement{UnitBytes: 64 << 10, Confidence: 0.9997, AgreeingRuns: 4,
			StraddleCostSeconds: 2e-4, StraddleCostLowSeconds: 1e-4, StraddleCostHighSeconds: 3e-4,
			Device: "sdb", Basis: align.BasisDisk, OffsetKnown: true},
	}
	v.Alignment = align.Evaluate(v)
	var b strings.Builder
	if err := Table(&b, &plumblinev1.Inventory{Host: &plumblinev1.Host{Hostname: "db1"}, Volumes: []*plumblinev1.Volume{v}}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"64KiB (measured 99.9%)", "misaligned", "info     stripe-unit-measured: ", "declared_devices:"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("Table() = \n%s\nwant it to contain %q", b.String(), want)
		}
	}
}
