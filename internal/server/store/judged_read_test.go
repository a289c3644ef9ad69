package store

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/plumbline/plumbline/internal/vocab"
)

// judgedFixture is a judged record as ingest's judge makes it: every
// column set, findings with a repeated (rule, severity) pair, and an md
// array on /data.
func judgedFixture(v Volume) Volume {
	iv := InventoryVolume{Device: v.Device, FSType: v.FSType, Verdict: v.Verdict, DataOffsetBytes: 32256, StripeUnitBytes: 65536,
		AllocationUnitBytes: 4096, RAIDLevel: "raid10", Media: "hdd-15k", Profile: "hdd-15k/raid10/64KiB/legacy-31.5k/4KiB",
		StripeUnitSource: "declared", StripeUnitConfidence: 0.9, MeasuredSplitCost: 0.0004, MeasuredSplitCostLow: 0.0003,
		MeasuredSplitCostHigh: 0.0005, Severity: "critical", SeverityRank: 3, Rules: []string{"a", "b"}}
	for i := range iv.SplitFraction {
		iv.SplitFraction[i], iv.GranularitySplit[i], iv.MeasuredPenalty[i] = 0.0625*float64(i+1), 0.5, 0.0001
	}
	iv.Findings = []Finding{{Rule: "b", Severity: "critical", Message: "one"}, {Rule: "a", Severity: "info", Message: "x"},
		{Rule: "b", Severity: "critical", Message: "two"}}
	if v.MountPoint == "/data" {
		iv.Arrays = []RAIDArray{{Device: "md1", Missing: 0}, {Device: "md0", Missing: 1}}
	}
	v.Judged = iv
	return v
}

// The judged records read back as the judge wrote them, with the host's
// current name, findings without repeats and md arrays by device; a
// volume gone takes its arrays with it.
func TestListJudgedVolumes(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := open(t, dsn)
		register(t, s, "a1")
		vols := []Volume{judgedFixture(Volume{MountPoint: "/data", Device: "/dev/sdb1", FSType: "ext4", Geometry: []byte{1}, Verdict: "misaligned"}),
			judgedFixture(Volume{MountPoint: "/log", Device: "/dev/sdc1", FSType: "xfs", Geometry: []byte{2}, Verdict: "misaligned"})}
		if _, err := s.AppendBatch(ctx, "a1", []Record{geometryRecord(1, vols...)}); err != nil {
			t.Fatal(err)
		}
		got, err := s.ListJudgedVolumes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := []JudgedVolume{judgedWant("/data", "/dev/sdb1", "ext4"), judgedWant("/log", "/dev/sdc1", "xfs")}
		for i := range want {
			want[i].JudgedAt = got[i].JudgedAt // the store's clock
		}
		want[0].Arrays = []RAIDArray{{Device: "md0", Missing: 1}, {Device: "md1", Missing: 0}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("ListJudgedVolumes (-want +got):\n%s", diff)
		}
		if !got[0].Equal(&want[0]) || got[0].Equal(&got[1]) {
			t.Errorf("Equal: a record is not equal to itself, or equal to another")
		}
		seqs, err := s.ListJudgedSequences(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if want := []VolumeSequence{{"a1", "/data", 1, got[0].JudgedAt}, {"a1", "/log", 1, got[1].JudgedAt}}; got[0].JudgedAt.IsZero() || !cmp.Equal(want, seqs) {
			t.Errorf("ListJudgedSequences = %v, want %v", seqs, want)
		}
		profiles, err := s.ListJudgedProfiles(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(profiles) != 2 || profiles[0].Profile != want[0].Profile || profiles[0].SplitFraction != want[0].SplitFraction ||
			profiles[1].GranularitySplit != want[1].GranularitySplit {
			t.Errorf("ListJudgedProfiles = %+v", profiles)
		}

		// /data goes: its record and its arrays with it.
		if _, err := s.AppendBatch(ctx, "a1", []Record{geometryRecord(2, vols[1])}); err != nil {
			t.Fatal(err)
		}
		if got, err := s.ListJudgedVolumes(ctx); err != nil || len(got) != 1 || got[0].MountPoint != "/log" {
			t.Fatalf("after /data went: %+v, %v", got, err)
		}
		var arrays int
		if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM inventory_arrays`).Scan(&arrays); err != nil || arrays != 0 {
			t.Errorf("inventory_arrays after /data went: %d rows, %v; want 0", arrays, err)
		}
	})
}

func judgedWant(mount, device, fs string) JudgedVolume {
	v := JudgedVolume{JudgedColumns: JudgedColumns{ID: VolumeID("a1", mount), AgentID: "a1", MountPoint: mount, Hostname: "a1.example",
		Sequence: 1, Device: device, FSType: fs, Verdict: "misaligned", DataOffsetBytes: 32256, StripeUnitBytes: 65536,
		AllocationUnitBytes: 4096, RAIDLevel: "raid10", Media: "hdd-15k", Profile: "hdd-15k/raid10/64KiB/legacy-31.5k/4KiB",
		StripeUnitSource: "declared", StripeUnitConfidence: 0.9, MeasuredSplitCost: 0.0004},
		Findings: []RuleSeverity{{"b", "critical"}, {"a", "info"}}}
	for i := range vocab.NumIOSizes {
		v.SplitFraction[i], v.GranularitySplit[i] = 0.0625*float64(i+1), 0.5
	}
	return v
}
