package baseline

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plumbline/plumbline/internal/vocab"
)

func defaultPriorsT(t testing.TB) *Priors {
	t.Helper()
	p, err := DefaultPriors()
	if err != nil {
		t.Fatalf("DefaultPriors() = %v", err)
	}
	return p
}

// TestDefaultPriorsCoverEveryProfile: every media class × RAID level ×
// probe kind has an ordered band, and every band cites a source.
func TestDefaultPriorsCoverEveryProfile(t *testing.T) {
	t.Parallel()
	p := defaultPriorsT(t)
	for _, m := range MediaClasses() {
		for _, lvl := range append(vocab.RAIDLevels(), "raid7") {
			for _, k := range Kinds() {
				prof := Profile{Media: m, RAIDLevel: lvl, Offset: Aligned}
				e, err := p.Expect(prof, k)
				if err != nil {
					t.Errorf("Expect(%s, %s) = %v", prof.Key(), k, err)
					continue
				}
				if err := checkBand(e.Band, 0); err != nil {
					t.Errorf("Expect(%s, %s).Band = %+v: %v", prof.Key(), k, e.Band, err)
				}
				if len(e.Sources) < 2 {
					t.Errorf("Expect(%s, %s).Sources = %q, want the media band's and the RAID factor's", prof.Key(), k, e.Sources)
				}
				for _, s := range e.Sources {
					if strings.HasSuffix(s, ": ") {
						t.Errorf("Expect(%s, %s) has an empty source: %q", prof.Key(), k, s)
					}
				}
			}
		}
	}
	if _, err := p.Expect(Profile{Media: NVMe}, Kind("seq-read")); !errors.Is(err, ErrNoPrior) {
		t.Errorf("Expect(seq-read) = %v, want ErrNoPrior", err)
	}
}

// TestPenaltyMatchesMeasuredTable checks the split-I/O model with the
// shipped split_access_share against DESIGN.md's measured table (Dell
// 2950 / MD1000, 15K SAS, 8 KB random, offset 31.5 KB → 64 KB).
func TestPenaltyMatchesMeasuredTable(t *testing.T) {
	t.Parallel()
	p := defaultPriorsT(t)
	tests := []struct {
		name        string
		vol         *Profile
		split       float64
		kind        Kind
		lo, hi      float64 // measured IOPS gain from aligning, as a fraction
		latencyDrop float64 // measured latency reduction (0: not published)
	}{
		{"raid10 64K reads: +11% IOPS, −10% latency", profileOfSQL("raid10", 64*kib, 4, 2), 0.125, vocab.RandomRead, 0.105, 0.115, 0.10},
		{"raid10 64K writes: +10.6%", profileOfSQL("raid10", 64*kib, 4, 2), 0.125, vocab.RandomWrite, 0.100, 0.115, 0},
		{"raid5 128K reads: +5.7%", profileOfSQL("raid5", 128*kib, 5, 4), 0.0625, vocab.RandomRead, 0.052, 0.060, 0},
		{"raid5 128K writes: +5.5%", profileOfSQL("raid5", 128*kib, 5, 4), 0.0625, vocab.RandomWrite, 0.052, 0.060, 0},
		{"raid1 64K element: ~+10%", profileOfSQL("raid1", 64*kib, 2, 1), 0.125, vocab.RandomRead, 0.09, 0.12, 0},
		{"log writes: no difference", profileOfSQL("raid1", 64*kib, 2, 1), 0.125, vocab.LogWrite, 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.vol.Split8K != tt.split {
				t.Fatalf("ProfileOf().Split8K = %v, want %v", tt.vol.Split8K, tt.split)
			}
			e, err := p.Expect(*tt.vol, tt.kind)
			if err != nil {
				t.Fatalf("Expect(%s, %s) = %v", tt.vol.Key(), tt.kind, err)
			}
			// At a fixed depth IOPS_aligned / IOPS_misaligned = 1 + penalty.
			if e.Penalty < tt.lo || e.Penalty > tt.hi {
				t.Errorf("Expect(%s, %s).Penalty = %.4f, want the measured %.3f–%.3f", tt.vol.Key(), tt.kind, e.Penalty, tt.lo, tt.hi)
			}
			if got := e.Band.Typical / e.Aligned.Typical; math.Abs(got-(1+e.Penalty)) > 1e-12 {
				t.Errorf("Expect(%s, %s): band/aligned = %v, want 1 + penalty = %v", tt.vol.Key(), tt.kind, got, 1+e.Penalty)
			}
			if tt.latencyDrop > 0 {
				drop := 1 - e.Aligned.Typical/e.Band.Typical
				if math.Abs(drop-tt.latencyDrop) > 0.01 {
					t.Errorf("Expect(%s, %s): aligning cuts latency by %.3f, want the measured %.2f", tt.vol.Key(), tt.kind, drop, tt.latencyDrop)
				}
			}
		})
	}
}

func profileOfSQL(level string, stripe uint64, disks, data uint32) *Profile {
	p := ProfileOf(judged(sqlVolume(level, stripe, disks, data, 63*512, 64*kib)))
	return &p
}

// TestRAIDFactors: RAID 5 writes cost about two accesses at QD1 (the
// read-modify-write), reads none; DESIGN.md's RAID 5 vs RAID 10 row.
func TestRAIDFactors(t *testing.T) {
	t.Parallel()
	p := defaultPriorsT(t)
	typ := func(lvl string, k Kind) float64 {
		e, err := p.Expect(Profile{Media: HDD15K, RAIDLevel: lvl, Offset: Aligned}, k)
		if err != nil {
			t.Fatalf("Expect(%s, %s) = %v", lvl, k, err)
		}
		return e.Band.Typical
	}
	if r5, r10 := typ("raid5", vocab.RandomWrite), typ("raid10", vocab.RandomWrite); r5/r10 < 1.6 || r5/r10 > 2.9 {
		t.Errorf("raid5/raid10 random-write typical = %.2f, want 1.6–2.9 (RMW at QD1; −60–65%% IOPS measured under load)", r5/r10)
	}
	if r5, r10 := typ("raid5", vocab.RandomRead), typ("raid10", vocab.RandomRead); r5 != r10 {
		t.Errorf("raid5 random-read typical = %v, raid10 = %v, want equal at QD1", r5, r10)
	}
}

func TestParsePriorsBad(t *testing.T) {
	t.Parallel()
	good := string(defaultPriors)
	mutations := []struct {
		name, old, new, want string
	}{
		{"band out of order", "      typical: 3.5ms\n", "      typical: 30ms\n", "media.hdd-15k.random_read: low 0.002, typical 0.03, high 0.007: want low <= typical <= high"},
		{"unknown media class", "  sas-ssd:\n", "  ssd:\n", `media class "ssd"`},
		{"media class missing", "  sas-ssd:\n", "  ssd:\n", "media.sas-ssd: missing"},
		{"band without a source", `source: "enterprise SAS SSD datasheet class: typical write latency`, `source: "" # `, "media.sas-ssd.random_write: missing source"},
		{"share above 1", "      value: 0.2\n", "      value: 1.2\n", "media.nvme.split_access_share: 1.2: want 0 to 1"},
		{"share without a source", `source: "as sata-ssd (DESIGN.md SSD rows), with deeper`, `source: "" # `, "media.nvme.split_access_share: missing source"},
		{"negative duration", "      low: 20us\n", "      low: -20us\n", "want positive finite values"},
		{"unknown raid level", "  raid60:\n", "  raid7:\n", `level "raid7"`},
		{"raid factor below 1", "    random_write:\n      low: 1\n      typical: 2\n      high: 3\n", "    random_write:\n      low: 0.5\n      typical: 0.8\n      high: 3\n", "raid.raid5.random_write: typical 0.8: want at least 1"},
		{"raid factor missing high", "      low: 1\n      typical: 2.2\n      high: 3.5\n", "      low: 1\n      typical: 2.2\n", "want low, typical and high"},
		{"raid none missing", "  none:\n    source: \"a single device: the media band as it is\"\n", "", "raid.none: missing"},
		{"duplicate key", "  raid60:\n", "  raid6:\n", "already defined"},
		{"unknown probe kind", "    random_read:\n", "    random_reed:\n", "random_reed: unknown key (probe kinds: random_read, random_write, log_write)"},
	}
	for _, m := range mutations {
		t.Run(m.name, func(t *testing.T) {
			if !strings.Contains(good, m.old) {
				t.Fatalf("priors.yaml has no %q to mutate", m.old)
			}
			_, err := ParsePriors([]byte(strings.Replace(good, m.old, m.new, 1)))
			if !errors.Is(err, ErrInvalidPriors) || !strings.Contains(err.Error(), m.want) {
				t.Errorf("ParsePriors(%s) = %v, want ErrInvalidPriors containing %q", m.name, err, m.want)
			}
		})
	}

	files := map[string]string{
		"bad-unknown-key.yaml": "field p99 not found",
		"bad-bare-number.yaml": `"20": want a duration with a unit`,
		"bad-version.yaml":     "version 2: want 1",
		"bad-not-yaml.yaml":    "yaml:",
		"bad-empty-media.yaml": "media.hdd-7200: missing",
	}
	matches, err := filepath.Glob("testdata/bad-*.yaml")
	if err != nil || len(matches) != len(files) {
		t.Fatalf("testdata/bad-*.yaml = %v, %v; want the %d files this test knows", matches, err, len(files))
	}
	for _, f := range matches {
		t.Run(filepath.Base(f), func(t *testing.T) {
			want, ok := files[filepath.Base(f)]
			if !ok {
				t.Fatalf("no expected error for %s", f)
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			_, err = ParsePriors(b)
			if !errors.Is(err, ErrInvalidPriors) || !strings.Contains(err.Error(), want) {
				t.Errorf("ParsePriors(%s) = %v, want ErrInvalidPriors containing %q", f, err, want)
			}
		})
	}
}

// FuzzParsePriors: any bytes give priors or ErrInvalidPriors, never a
// panic; priors that parse price every media class and probe kind.
func FuzzParsePriors(f *testing.F) {
	f.Add(defaultPriors)
	bad, _ := filepath.Glob("testdata/bad-*.yaml")
	for _, path := range bad {
		if b, err := os.ReadFile(path); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParsePriors(b)
		if err != nil {
			if !errors.Is(err, ErrInvalidPriors) {
				t.Fatalf("ParsePriors = %v, want ErrInvalidPriors", err)
			}
			return
		}
		for _, m := range MediaClasses() {
			for _, k := range Kinds() {
				if _, err := p.Expect(Profile{Media: m, RAIDLevel: "raid5", Offset: Aligned}, k); err != nil {
					t.Fatalf("parsed priors: Expect(%s, %s) = %v", m, k, err)
				}
			}
		}
	})
}
