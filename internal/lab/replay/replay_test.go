package replay

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/plumbline/plumbline/internal/histogram"
	"github.com/plumbline/plumbline/internal/server/baseline"
	"github.com/plumbline/plumbline/internal/server/store"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

var (
	replayDays = flag.Float64("replay.days", 1, "simulated days of the noise-only replay (bench/degrade.sh: 7)")
	trials     = flag.Int("replay.trials", 1, "fault times per schedule in TestReplayDetects (bench/degrade.sh: 6)")
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
		out = append(out, readRecording(t, p))
	}
	return out
}

var kinds = []string{"random-read", "random-write", "log-write"}

// fleet is a cohort of five volumes on five hosts drawn from one
// recording, each from its own place in it and on its own phase of the
// schedule, and a control volume of another profile (no RAID: no cohort,
// judged against its history and the prior) drawn from it too.
func fleet(rec *Recording, every time.Duration) []Volume {
	var vols []Volume
	n := len(rec.Atoms[kinds[0]])
	for i := range 5 {
		vols = append(vols, Volume{Agent: fmt.Sprintf("host-%d", i), Geometry: labGeometry("/srv/lab", fmt.Sprintf("loop%d", 40+i)),
			Noise: rec, Offset: i * n / 5, Phase: time.Duration(i) * every / 5})
	}
	control := labGeometry("/srv/control", "loop49")
	control.Layers = control.Layers[:2] // no RAID layer
	vols = append(vols, Volume{Agent: "host-control", Geometry: control, Noise: rec, Offset: n / 10, Phase: every / 2})
	return vols
}

var t0 = time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)

// schedules are the old defaults (one 1,000-op run an hour, 3 runs
// beyond to turn degraded, alert after 15m) and the new ones (50 ops
// every 3 minutes, 4 runs, alert after 2m): the same 1,000 ops per kind
// per hour.
var schedules = []struct {
	name  string
	sch   Schedule
	cfg   baseline.Config
	rules Rules
}{
	{"old-default-1h-1000ops", Schedule{time.Hour, 1000}, baseline.Config{Sustain: 3}, Rules{DegradedFor: 15 * time.Minute, CohortRatio: 1.5, CohortFor: 2 * time.Hour}},
	{"default-3m-50ops", Schedule{3 * time.Minute, 50}, baseline.Config{}, Rules{DegradedFor: 2 * time.Minute, CohortRatio: 1.5, CohortFor: 2 * time.Hour}},
}

func days(d float64) time.Duration { return time.Duration(d * 24 * float64(time.Hour)) }

// TestNoiseReplay: every committed recording (this machine's own disk with
// its bimodal synced writes and its neighbours' load; a lab RAID 1 of
// sas15k members) replayed for -replay.days simulated days on a cohort of
// five volumes and a control volume, on the old and the new default
// schedule, through ingest, the store and the evaluator: noise alone never
// turns a volume degraded and raises no alert. bench/degrade.sh runs it
// for 7 days and reads its last line.
func TestNoiseReplay(t *testing.T) {
	t.Parallel()
	recs := loadRecordings(t)
	total, alerts := 0.0, 0
	for _, rec := range recs {
		for _, sc := range schedules {
			t.Run(rec.Source+"/"+sc.name, func(t *testing.T) {
				start := time.Now()
				out, err := Run(context.Background(), Options{Store: openStore(t), Start: t0, Duration: days(*replayDays),
					Schedule: sc.sch, Kinds: kinds, Volumes: fleet(rec, sc.sch.Every), PassEvery: min(sc.sch.Every, 5*time.Minute), Rules: sc.rules, Config: sc.cfg})
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("%s (%s of replay)", out.Summary(), time.Since(start).Round(time.Millisecond))
				wantRuns := len(kinds) * 6 * int(days(*replayDays)/sc.sch.Every)
				if out.Runs < wantRuns-len(kinds)*6 {
					t.Errorf("judged %d runs, want about %d", out.Runs, wantRuns)
				}
				for _, tr := range out.Transitions {
					if tr.To == baseline.Degraded {
						t.Errorf("day %.2f: volume %d %s turned degraded vs %s on %s (×%.2f: %s) on noise alone", tr.At.Sub(t0).Hours()/24, tr.Volume, tr.Kind, tr.Reference, tr.Signal, tr.Ratio, tr.Detail)
					}
				}
				for _, a := range out.Alerts {
					t.Errorf("day %.2f: %s fired for volume %d %s (×%.2f) on noise alone", a.Fired.Sub(t0).Hours()/24, a.Name, a.Volume, a.Kind, a.Ratio)
				}
				total += out.Days
				alerts += len(out.Alerts)
			})
		}
	}
	t.Logf("replay-total: false_alerts=%d replay_days=%g recordings=%d schedules=%d", alerts, *replayDays, len(recs), len(schedules))
}

// TestReplayDetects: on the same recorded noise, one cohort volume gets
// 2× slower for two hours in the middle of the replay (every operation:
// its recorded histograms moved up 8 buckets): PlumblineVolumeDegraded
// fires for it and resolves after the slowdown ends, on both schedules,
// and nothing fires for any other volume. A 1.3× slowdown, below the
// detector's 1.5× ratio, fires nothing. The times are logged: simulated
// fault-to-firing, Prometheus' scrape and rule intervals not included.
//
// Only the lab recordings: this machine's own disk answers from the
// hypervisor's cache in 0.1–0.4 ms and its level swings 3× for minutes
// with the neighbours' load, so a 2× step on it is inside its own noise —
// the spread the detector is built to ignore (TestNoiseReplay holds it to
// that).
func TestReplayDetects(t *testing.T) {
	t.Parallel()
	for _, rec := range loadRecordings(t) {
		if !strings.HasPrefix(rec.Source, "lab-") {
			continue
		}
		for _, sc := range schedules {
			for _, factor := range []float64{2, 1.3} {
				t.Run(fmt.Sprintf("%s/%s/x%g", rec.Source, sc.name, factor), func(t *testing.T) {
					var detect, clear []time.Duration
					for k := range *trials {
						// After the histories are trusted (12 runs) and
						// the cohort formed, at moments spread over one
						// interval of the schedule.
						from := t0.Add(16*sc.sch.Every + time.Duration(k)*sc.sch.Every/time.Duration(*trials) + sc.sch.Every/time.Duration(3**trials))
						to := from.Add(max(2*time.Hour, 6*sc.sch.Every))
						out, err := Run(context.Background(), Options{Store: openStore(t), Start: t0, Duration: to.Sub(t0) + 6*sc.sch.Every,
							Schedule: sc.sch, Kinds: kinds, Volumes: fleet(rec, sc.sch.Every), Rules: sc.rules, Config: sc.cfg,
							Faults: []Fault{{Volume: 2, From: from, To: to, Factor: factor}}})
						if err != nil {
							t.Fatal(err)
						}
						for _, a := range out.Alerts {
							if a.Volume != 2 || a.Name != VolumeDegraded {
								t.Errorf("%s fired for volume %d %s: want only %s for volume 2", a.Name, a.Volume, a.Kind, VolumeDegraded)
							}
						}
						fired := out.Fired(VolumeDegraded, 2)
						if factor < 1.5 {
							if len(fired) > 0 {
								t.Errorf("a %g× slowdown fired %s (%s ×%.2f): want nothing below the 1.5× ratio", factor, VolumeDegraded, fired[0].Kind, fired[0].Ratio)
							}
							continue
						}
						if len(fired) == 0 {
							t.Fatalf("a 2× slowdown from %s to %s never fired %s: %s", from.Sub(t0), to.Sub(t0), VolumeDegraded, out.Summary())
						}
						for _, a := range fired {
							if a.Fired.Before(from) || a.Resolved.IsZero() || a.Resolved.Before(to) {
								t.Errorf("%s %s: fired %s, resolved %s; want fired after the fault (%s) and resolved after it ended (%s)",
									a.Name, a.Kind, a.Fired.Sub(t0), a.Resolved.Sub(t0), from.Sub(t0), to.Sub(t0))
							}
						}
						detect = append(detect, fired[0].Fired.Sub(from))
						clear = append(clear, fired[0].Resolved.Sub(to))
					}
					if len(detect) > 0 {
						t.Logf("detect-%s: %s fired after %s (min %s, max %s over %d fault times), resolved after %s (min %s, max %s)",
							sc.name, VolumeDegraded, mean(detect), slices.Min(detect), slices.Max(detect), len(detect), mean(clear), slices.Min(clear), slices.Max(clear))
					}
				})
			}
		}
	}
}

func mean(ds []time.Duration) time.Duration {
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return (sum / time.Duration(len(ds))).Round(time.Second)
}

// TestScaleDoubles: moving a histogram up 8 buckets is exactly doubling
// every observation for the median the evaluator reads.
func TestScaleDoubles(t *testing.T) {
	t.Parallel()
	var h histogram.Histogram
	for i := range 97 {
		h.Observe(time.Duration(300_000 + i*i*1_700))
	}
	d, err := scale(&h, Shift(2))
	if err != nil {
		t.Fatal(err)
	}
	if m, m2 := h.Median(), d.Median(); m2 < 2*m*(1-1e-12) || m2 > 2*m*(1+1e-12) {
		t.Errorf("median after scale(×2) = %g, want 2 × %g", m2, m)
	}
	if d.Count() != h.Count() || d.Min() != 2*h.Min() || d.Max() != 2*h.Max() {
		t.Errorf("scale(×2): count %d min %s max %s, want %d %s %s", d.Count(), d.Min(), d.Max(), h.Count(), 2*h.Min(), 2*h.Max())
	}
	if Shift(2) != 8 || Shift(1) != 0 {
		t.Errorf("Shift(2), Shift(1) = %d, %d; want 8, 0", Shift(2), Shift(1))
	}
}

// TestLabWithinPriors: what the lab measures for a sas15k RAID 1 (the
// median of the recording's 50-op runs, per kind) lies inside the prior
// band of the matching profile, hdd-15k/raid1/-/aligned/4KiB — and inside
// the band of the profile the real stack derives for a lab volume, whose
// media is unknown (a loop device; the agent cannot declare media).
func TestLabWithinPriors(t *testing.T) {
	t.Parallel()
	priors, err := baseline.DefaultPriors()
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, rec := range loadRecordings(t) {
		if rec.Source != "lab-sas15k-raid1" {
			continue
		}
		for _, media := range []baseline.Media{baseline.HDD15K, baseline.UnknownMedia} {
			prof := baseline.Profile{Media: media, RAIDLevel: "raid1", Offset: baseline.Aligned, AllocationUnit: 4096}
			for _, k := range kinds {
				var medians []float64
				atoms := rec.Atoms[k]
				for i := 0; i+5 <= len(atoms); i += 5 {
					medians = append(medians, newWalker(atoms[i:i+5], time.Hour, 1, 0).next(5).Median())
				}
				got := baseline.Summarize(medians).Median
				x, err := priors.Expect(prof, baseline.Kind(k))
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("%s %s: lab median %.2f ms, prior band %.2f–%.2f–%.2f ms (×%.2f typical)", prof.Key(), k, got*1e3, x.Band.Low*1e3, x.Band.Typical*1e3, x.Band.High*1e3, got/x.Band.Typical)
				if got < x.Band.Low || got > x.Band.High {
					t.Errorf("%s %s: lab median %.2f ms outside the prior band %.2f–%.2f ms", prof.Key(), k, got*1e3, x.Band.Low*1e3, x.Band.High*1e3)
				}
				checked++
			}
		}
	}
	if checked == 0 {
		t.Fatal("no lab-sas15k-raid1 recording")
	}
}

// TestWalkerKeepsTime: consecutive runs start one schedule interval apart
// in the recording's own time; past its end the walk jumps to a random
// place and carries on from there.
func TestWalkerKeepsTime(t *testing.T) {
	t.Parallel()
	var atoms []Atom
	for i := range 100 {
		h := &histogram.Histogram{}
		h.Observe(time.Duration(i+1) * time.Millisecond)
		atoms = append(atoms, Atom{At: t0.Add(time.Duration(i) * time.Second), Hist: h})
	}
	w := newWalker(atoms, 10*time.Second, 1, 0)
	for run := range 9 {
		h := w.next(2)
		if want := time.Duration(10*run+1) * time.Millisecond; h.Min() != want || h.Count() != 2 {
			t.Fatalf("run %d: min %s count %d, want the atoms from second %d on (min %s)", run, h.Min(), h.Count(), 10*run, want)
		}
	}
	// Run 10 would start at second 90 and fit; the one after it would not.
	w.next(2)
	h := w.next(2)
	if h.Count() != 2 || h.Min() < time.Millisecond || h.Max()-h.Min() != time.Millisecond {
		t.Errorf("after the end: %d atoms min %s max %s, want two consecutive atoms from a random place", h.Count(), h.Min(), h.Max())
	}
}

// TestQuick: the bare-detector replay counts what the noise does to a
// detector: with every signal degrading on one run beyond, the recorded
// noise alerts; with the shipped defaults, a day of the lab recording
// does not.
func TestQuick(t *testing.T) {
	t.Parallel()
	for _, rec := range loadRecordings(t) {
		if !strings.HasPrefix(rec.Source, "lab-") {
			continue
		}
		sch := Schedule{Every: 3 * time.Minute, Ops: 50}
		one := baseline.SignalConfig{Sustain: 1}
		hair, err := Quick(rec, sch, baseline.Config{Sustain: 1, Tail: one, Mean: one, Rate: one}, 6, 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		if hair[baseline.SignalTail]+hair[baseline.SignalMean]+hair[baseline.SignalRate]+hair[baseline.SignalMedian] == 0 {
			t.Errorf("Quick(%s, sustain 1) = %v, want alerts from a hair trigger", rec.Source, hair)
		}
		def, err := Quick(rec, sch, baseline.Config{}, 6, 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(def) != 0 {
			t.Errorf("Quick(%s, defaults, 1 day) = %v, want no alert", rec.Source, def)
		}
		if _, err := Quick(rec, Schedule{}, baseline.Config{}, 6, 1, 0); err == nil {
			t.Error("Quick with no schedule = nil error")
		}
	}
}
