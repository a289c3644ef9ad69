package replay

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/plumbline/plumbline/internal/baseline"
	"github.com/plumbline/plumbline/internal/store"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

var (
	replayDays = flag.Float64("replay.days", 1, "simulated days of the noise-only replay (bench/degrade.sh: 7)")
	recordings = flag.String("replay.recordings", "testdata/*.txt.gz", "glob of the noise recordings to replay")
)

func u64(v uint64) *uint64 { return &v }

// labGeometry is a volume as the agent reports one on a lab array: ext4
// (4 KiB blocks) on a partition at 1 MiB of a loop device declared as a
// RAID 10 of 4 × 64 KiB. Its media is unknown (a loop device).
func labGeometry(mount, loop string) *plumblinev1.Volume {
	return &plumblinev1.Volume{MountPoint: mount, Device: "/dev/" + loop + "p1",
		Filesystem: &plumblinev1.Filesystem{Type: "ext4", BlockSizeBytes: 4096},
		Layers: []*plumblinev1.Layer{
			{Kind: "filesystem", Device: loop + "p1", FsType: "ext4", BlockSizeBytes: 4096, OffsetBytes: u64(0), Source: "superblock"},
			{Kind: "partition", Device: loop + "p1", OffsetBytes: u64(1 << 20), LogicalSectorBytes: 512, PhysicalSectorBytes: 512, Source: "sysfs"},
			{Kind: "raid", Device: loop, RaidLevel: "raid10", StripeUnitBytes: 64 << 10, RaidDisks: 4, RaidDataDisks: 2,
				LogicalSectorBytes: 512, PhysicalSectorBytes: 512, OffsetBytes: u64(0), Source: "declared"},
		}}
}

func openStore(t testing.TB) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), "sqlite://"+filepath.Join(t.TempDir(), "replay.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func loadRecordings(t testing.TB) []*Recording {
	t.Helper()
	paths, err := filepath.Glob(*recordings)
	if err != nil || len(paths) == 0 {
		t.Fatalf("no recordings match %q (%v)", *recordings, err)
	}
	var out []*Recording
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		r, err := Read(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		out = append(out, r)
	}
	return out
}

var kinds = []string{"random-read", "random-write", "log-write"}

// fleet is a cohort of five volumes on five hosts drawn from one
// recording, each from its own place in it and on its own phase of the
// schedule.
func fleet(rec *Recording, every time.Duration) []Volume {
	var vols []Volume
	n := len(rec.Atoms[kinds[0]])
	for i := range 5 {
		vols = append(vols, Volume{Agent: fmt.Sprintf("host-%d", i), Geometry: labGeometry("/srv/lab", fmt.Sprintf("loop%d", 40+i)),
			Noise: rec, Offset: i * n / 5, Phase: time.Duration(i) * every / 5})
	}
	return vols
}

var t0 = time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)

func TestExploreNoise(t *testing.T) {
	for _, rec := range loadRecordings(t) {
		for _, sch := range []Schedule{{time.Hour, 1000}, {3 * time.Minute, 50}} {
			start := time.Now()
			out, err := Run(context.Background(), Options{Store: openStore(t), Start: t0, Duration: time.Duration(*replayDays * 24 * float64(time.Hour)),
				Schedule: sch, Kinds: kinds, Volumes: fleet(rec, sch.Every), PassEvery: sch.Every,
				Rules: Rules{DegradedFor: 5 * time.Minute, CohortRatio: 1.5, CohortFor: 2 * time.Hour}})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s every %s ops %d: %s (%s)", rec.Source, sch.Every, sch.Ops, out.Summary(), time.Since(start).Round(time.Millisecond))
			for _, tr := range out.Transitions {
				if tr.To == baseline.Degraded || tr.From == baseline.Degraded {
					t.Logf("  %s vol %d %s %s→%s %s ×%.2f", tr.At.Sub(t0), tr.Volume, tr.Kind, tr.From, tr.To, tr.Reference, tr.Ratio)
				}
			}
			_ = slices.Contains[[]string]
		}
	}
}

func TestExploreDetect(t *testing.T) {
	rec := loadRecordings(t)[0]
	for _, sch := range []Schedule{{time.Hour, 1000}, {3 * time.Minute, 50}, {5 * time.Minute, 80}} {
		warm := 14 * sch.Every
		var det, clr []time.Duration
		for trial := range 6 {
			from := t0.Add(warm + time.Duration(trial)*sch.Every/6)
			to := from.Add(3*sch.Every + 30*time.Minute)
			out, err := Run(context.Background(), Options{Store: openStore(t), Start: t0, Duration: to.Sub(t0) + 3*sch.Every + 30*time.Minute,
				Schedule: sch, Kinds: kinds, Volumes: fleet(rec, sch.Every), Faults: []Fault{{Volume: 2, From: from, To: to, Factor: 2}},
				Rules: Rules{DegradedFor: 5 * time.Minute, CohortRatio: 1.5, CohortFor: 2 * time.Hour}})
			if err != nil {
				t.Fatal(err)
			}
			al := out.Fired(VolumeDegraded, 2)
			if len(al) == 0 {
				t.Errorf("%v trial %d: no alert: %s", sch, trial, out.Summary())
				continue
			}
			det = append(det, al[0].Fired.Sub(from))
			if !al[0].Resolved.IsZero() {
				clr = append(clr, al[0].Resolved.Sub(to))
			}
			t.Logf("%v trial %d: %s; first %s %s fired +%s resolved +%s", sch, trial, out.Summary(), al[0].Kind, al[0].Name, al[0].Fired.Sub(from), al[0].Resolved.Sub(to))
		}
		t.Logf("%v: detect %v clear %v", sch, det, clr)
	}
}
