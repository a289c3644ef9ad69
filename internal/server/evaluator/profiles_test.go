package evaluator

import (
	"context"
	"testing"
	"time"

	"github.com/plumbline/plumbline/internal/align"
	"github.com/plumbline/plumbline/internal/lab/judgetest"
	"github.com/plumbline/plumbline/internal/server/baseline"
	"github.com/plumbline/plumbline/internal/server/ingest"
	"github.com/plumbline/plumbline/internal/server/store"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// legacyVolume is ext4 on a partition at 31.5 KiB on a declared hardware
// RAID 10 (64 KiB stripe unit) of 15K disks.
func legacyVolume() *plumblinev1.Volume {
	off := func(v uint64) *uint64 { return &v }
	return &plumblinev1.Volume{MountPoint: "/data", Device: "/dev/sdb1", Filesystem: &plumblinev1.Filesystem{Type: "ext4", BlockSizeBytes: 4096},
		Layers: []*plumblinev1.Layer{
			{Kind: "filesystem", Device: "/dev/sdb1", FsType: "ext4", BlockSizeBytes: 4096, OffsetBytes: off(0), Source: "superblock"},
			{Kind: "partition", Device: "sdb1", OffsetBytes: off(63 * 512), LogicalSectorBytes: 512, Source: "sysfs"},
			{Kind: "raid", Device: "sdb", RaidLevel: "raid10", StripeUnitBytes: 64 << 10, RaidDisks: 4, RaidDataDisks: 2, LogicalSectorBytes: 512,
				PhysicalSectorBytes: 512, OffsetBytes: off(0), Source: "declared", Model: "SEAGATE ST300MP0005 15K SAS",
				Sources: map[string]string{"model": "declared"}},
		}}
}

// offsetNotCritical are rules under which a data offset that splits I/Os
// across stripe units is a warning, not critical: the volume is aligned,
// its profile's offset class misaligned-other.
var offsetNotCritical = ingest.Rules{Overrides: align.Overrides{Severity: map[string]string{"partition-offset-stripe-unit": "warning"}}}

// TestProfileFromJudgedRecord: a volume's baseline is judged against the
// profile its judged record names, and follows the record when the volume
// is judged again under new rules (same snapshot, same sequence) — the
// evaluator used to keep the profile of the geometry it first decoded
// until the volume's sequence moved.
func TestProfileFromJudgedRecord(t *testing.T) {
	t.Parallel()
	for _, e := range engines {
		t.Run(e.Name, func(t *testing.T) {
			ctx := context.Background()
			st, err := store.Open(ctx, e.DSN(t))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if err := st.UpsertAgent(ctx, store.Agent{ID: "a1", Hostname: "h1"}); err != nil {
				t.Fatal(err)
			}
			pv := legacyVolume()
			t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
			geom := store.Record{Sequence: 1, Kind: store.KindGeometry, ProducedAt: t0, Volumes: []store.Volume{judgetest.Volume(t, pv)}}
			if _, err := st.AppendBatch(ctx, "a1", []store.Record{geom, probeRec(t, 2, t0, 6*time.Millisecond)}); err != nil {
				t.Fatal(err)
			}
			ev, err := New(st, Options{})
			if err != nil {
				t.Fatal(err)
			}
			profile := func(want string) {
				t.Helper()
				if _, err := ev.Pass(ctx); err != nil {
					t.Fatal(err)
				}
				bs, err := st.ListProbeBaselines(ctx)
				if err != nil || len(bs) != 1 || bs[0].Profile != want {
					t.Fatalf("baselines %+v, %v: want one of profile %q", bs, err, want)
				}
			}
			profile(baseline.ProfileOf(pv, align.Evaluate(pv)).Key())

			judgetest.Rejudge(t, st, "a1", "/data", offsetNotCritical)
			if _, err := st.AppendBatch(ctx, "a1", []store.Record{probeRec(t, 3, t0.Add(time.Hour), 6*time.Millisecond)}); err != nil {
				t.Fatal(err)
			}
			profile("hdd-15k/raid10/64KiB/misaligned-other/4KiB")
		})
	}
}
