package ingest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/plumbline/plumbline/internal/store"
	"github.com/plumbline/plumbline/internal/vocab"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// TestRejudgeVolumes: a volume stored under older rules (here: the split
// figure before it was reported by cause, and "aligned" with nothing
// checked) is judged again with the current rules when the server starts,
// though its agent sends no new snapshot; a second pass changes nothing,
// and a geometry that does not decode is left as it is.
func TestRejudgeVolumes(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		st, err := store.Open(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if err := st.UpsertAgent(ctx, store.Agent{ID: "db1", Hostname: "db1.example", OS: "linux"}); err != nil {
			t.Fatal(err)
		}
		off := func(v uint64) *uint64 { return &v }
		// ext4, 4 KiB blocks, 1 MiB partition on a declared 64 KiB raid10:
		// the old rules stored the grid's share as the split (6.25% / 93.75%).
		data := &plumblinev1.Volume{MountPoint: "/data", Device: "/dev/sdb1",
			Filesystem: &plumblinev1.Filesystem{Type: "ext4", BlockSizeBytes: 4096},
			Layers: []*plumblinev1.Layer{
				{Kind: "filesystem", Device: "/dev/sdb1", FsType: "ext4", BlockSizeBytes: 4096, OffsetBytes: off(0)},
				{Kind: "partition", Device: "sdb1", OffsetBytes: off(1 << 20), LogicalSectorBytes: 512},
				{Kind: "raid", Device: "sdb", RaidLevel: "raid10", StripeUnitBytes: 64 << 10, RaidDisks: 4, RaidDataDisks: 2, Source: "declared", PhysicalSectorBytes: 512},
			},
			Alignment: &plumblinev1.Alignment{Verdict: "aligned", DataOffsetBytes: off(1 << 20), StripeUnitBytes: 64 << 10,
				SplitFraction: map[uint32]float64{8192: 0.0625, 65536: 0.9375}},
		}
		// No physical sector, no stripe unit: stored as a vacuous "aligned".
		logv := &plumblinev1.Volume{MountPoint: "/log", Device: "/dev/sdc1",
			Filesystem: &plumblinev1.Filesystem{Type: "ext4", BlockSizeBytes: 4096},
			Layers: []*plumblinev1.Layer{
				{Kind: "filesystem", Device: "/dev/sdc1", FsType: "ext4", BlockSizeBytes: 4096, OffsetBytes: off(0)},
				{Kind: "partition", Device: "sdc1", OffsetBytes: off(63 * 512)},
				{Kind: "disk", Device: "sdc"},
			},
			Alignment: &plumblinev1.Alignment{Verdict: "aligned", DiskOffsetBytes: off(63 * 512)},
		}
		stored := func(v *plumblinev1.Volume) store.Volume {
			b, err := proto.MarshalOptions{Deterministic: true}.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			sv := store.Volume{MountPoint: v.MountPoint, Device: v.Device, FSType: "ext4", Geometry: b, Verdict: v.Alignment.Verdict,
				DataOffsetBytes: v.Alignment.DataOffsetBytes, StripeUnitBytes: v.Alignment.StripeUnitBytes}
			for i := range sv.SplitFraction {
				if f, ok := v.Alignment.SplitFraction[vocab.IOSize(i)]; ok {
					sv.SplitFraction[i] = &f
				}
			}
			return sv
		}
		bad := store.Volume{MountPoint: "/bad", Device: "/dev/sdd1", FSType: "ext4", Geometry: []byte{0xff, 0xff, 0xff}, Verdict: "aligned"}
		rec := store.Record{Sequence: 1, Kind: store.KindGeometry, ProducedAt: time.Unix(1_700_000_000, 0).UTC(), Payload: []byte("g"),
			Volumes: []store.Volume{stored(data), stored(logv), bad}}
		if _, err := st.AppendBatch(ctx, "db1", []store.Record{rec}); err != nil {
			t.Fatal(err)
		}

		changed, failed, err := st.RejudgeVolumes(ctx, Rejudge)
		if err != nil || changed != 2 || failed != 1 {
			t.Fatalf("RejudgeVolumes() = %d changed, %d failed, %v; want 2, 1, nil", changed, failed, err)
		}
		vols, err := st.ListVolumes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]store.Volume{}
		for _, v := range vols {
			got[v.MountPoint] = v
		}
		d := got["/data"]
		var split []any
		zero := true
		for _, f := range d.SplitFraction {
			split = append(split, f)
			if f == nil || *f != 0 {
				zero = false
			} else {
				split[len(split)-1] = *f
			}
		}
		if d.Verdict != "aligned" || !zero {
			t.Errorf("/data after rejudge = verdict %s split %v, want aligned and 0 at every I/O size (the offset's share)", d.Verdict, split)
		}
		var pv plumblinev1.Volume
		if err := proto.Unmarshal(d.Geometry, &pv); err != nil {
			t.Fatal(err)
		}
		if g := pv.GetAlignment().GetGranularitySplitFraction(); g[8192] != 0.0625 || g[65536] != 0.9375 {
			t.Errorf("/data geometry after rejudge: granularity_split_fraction = %v, want 8192: 0.0625, 65536: 0.9375", g)
		}
		if l := got["/log"]; l.Verdict != "unknown" {
			t.Errorf("/log after rejudge = %s, want unknown (no physical sector, no stripe unit)", l.Verdict)
		}
		if b := got["/bad"]; string(b.Geometry) != string(bad.Geometry) || b.Verdict != "aligned" {
			t.Errorf("/bad after rejudge = %q %s, want it left as stored", b.Geometry, b.Verdict)
		}

		if changed, failed, err := st.RejudgeVolumes(ctx, Rejudge); err != nil || changed != 0 || failed != 1 {
			t.Errorf("second RejudgeVolumes() = %d changed, %d failed, %v; want 0, 1, nil", changed, failed, err)
		}
	})
}

// BenchmarkRejudgeVolumes: the server-start pass over 2,000 stored volumes
// already judged with the current rules (the common case: nothing to
// rewrite), on SQLite. Reported per pass; divide by 2,000 for a volume.
func BenchmarkRejudgeVolumes(b *testing.B) {
	ctx := context.Background()
	st, err := store.Open(ctx, "sqlite://"+b.TempDir()+"/r.db")
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	const hosts, perHost = 500, 4
	for h := range hosts {
		id := fmt.Sprintf("db%04d", h)
		if err := st.UpsertAgent(ctx, store.Agent{ID: id, Hostname: id, OS: "linux"}); err != nil {
			b.Fatal(err)
		}
		var vols []store.Volume
		for i := range perHost {
			sv, err := judge(misalignedVolume(fmt.Sprintf("/data%d", i)), nil)
			if err != nil {
				b.Fatal(err)
			}
			vols = append(vols, sv)
		}
		rec := store.Record{Sequence: 1, Kind: store.KindGeometry, ProducedAt: time.Unix(1_700_000_000, 0).UTC(), Payload: []byte("g"), Volumes: vols}
		if _, err := st.AppendBatch(ctx, id, []store.Record{rec}); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for range b.N {
		changed, failed, err := st.RejudgeVolumes(ctx, Rejudge)
		if err != nil || changed != 0 || failed != 0 {
			b.Fatalf("RejudgeVolumes() = %d, %d, %v; want nothing to rewrite", changed, failed, err)
		}
	}
}
