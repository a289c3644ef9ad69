package membernoise

import (
	"compress/gzip"
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

// recording is testdata/noise.txt.gz, or the file MEMBERNOISE_RECORDING
// names (a recording of record.sh's format made elsewhere, e.g. on a lab
// array; plain or gzipped).
func recording(t testing.TB) *Recording {
	t.Helper()
	path := "testdata/noise.txt.gz"
	if p := os.Getenv("MEMBERNOISE_RECORDING"); p != "" {
		path = p
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		zr, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		r = zr
	}
	rec, err := Parse(r)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return rec
}

// Seven days of real member noise name no member: the line the slow-member
// bench reads (noise_days, noise_named).
func TestReplayNoise(t *testing.T) {
	t.Parallel()
	rec := recording(t)
	res, err := Replay(rec, Options{Days: 7})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("recording: %d devices over %s; replayed %d intervals, %d member-intervals compared", len(rec.Devices), rec.Duration().Round(time.Second), res.Intervals, res.Judged)
	t.Logf("noise_days=7 noise_named=%d", len(res.Named))
	if res.Intervals != 7*24*60 {
		t.Errorf("%d intervals replayed, want %d", res.Intervals, 7*24*60)
	}
	if res.Judged < res.Intervals*len(rec.Devices)/2 {
		t.Errorf("only %d of %d member-intervals compared: the replay says little", res.Judged, res.Intervals*len(rec.Devices))
	}
	if len(res.Named) != 0 {
		t.Errorf("members named over 7 days of noise: %v", res.Named)
	}
}

// Twenty draws of seven days (140 days) of the same noise, at other
// offsets into the recording: still none named.
func TestReplayNoiseSeeds(t *testing.T) {
	t.Parallel()
	rec := recording(t)
	named := 0
	for seed := uint64(1); seed <= 20; seed++ {
		res, err := Replay(rec, Options{Days: 7, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		named += len(res.Named)
	}
	t.Logf("noise_days=140 noise_named=%d", named)
	if named != 0 {
		t.Errorf("%d members named over 140 days of noise", named)
	}
}

// The same noise with one member's request time doubled (or more) names
// that member, and only it, within minutes.
func TestReplayNamesSlowMember(t *testing.T) {
	t.Parallel()
	rec := recording(t)
	for _, f := range []float64{2, 3, 5} {
		slow := rec.Devices[1]
		res, err := Replay(rec, Options{Days: 1, Slow: map[string]float64{slow: f}, Seed: uint64(f)})
		if err != nil {
			t.Fatal(err)
		}
		when, ok := res.Named[slow]
		if !ok || len(res.Named) != 1 {
			t.Errorf("×%g on %s: named %v; want %s alone", f, slow, res.Named, slow)
			continue
		}
		if when > 15*time.Minute {
			t.Errorf("×%g on %s: named after %s, want within 15m", f, slow, when)
		}
		t.Logf("×%g on %s: named after %s", f, slow, when)
	}
}

// BenchmarkReplayWeek is the cost of judging a week of one group's
// intervals.
func BenchmarkReplayWeek(b *testing.B) {
	rec := recording(b)
	for b.Loop() {
		if _, err := Replay(rec, Options{Days: 7}); err != nil {
			b.Fatal(err)
		}
	}
}
