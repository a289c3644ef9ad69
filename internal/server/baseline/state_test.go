package baseline

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestMarshalRoundTrip: a Detector persisted and restored at any point
// goes on exactly like the one that never stopped.
func TestMarshalRoundTrip(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 3))
	series := concat(steady(rng, 70, 1*ms, 0.1), steady(rng, 20, 3*ms, 0.1), steady(rng, 30, 1*ms, 0.1))
	refs := Refs{Prior: Band{Low: 0.5 * ms, Typical: 1 * ms, High: 2.5 * ms}}
	for _, cut := range []int{0, 5, 12, 47, 61, 71, 72, 85, 91, 100} {
		live, _ := NewDetector(Config{})
		for i := range cut {
			live.Observe(at(i), series[i], refs)
		}
		b, err := live.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		restored, _ := NewDetector(Config{})
		if err := restored.UnmarshalBinary(b); err != nil {
			t.Fatalf("UnmarshalBinary(state after %d runs) = %v", cut, err)
		}
		if b2, _ := restored.MarshalBinary(); !bytes.Equal(b, b2) {
			t.Errorf("MarshalBinary(UnmarshalBinary(state after %d runs)) differs:\n%x\n%x", cut, b, b2)
		}
		for i := cut; i < len(series); i++ {
			want := live.Observe(at(i), series[i], refs)
			got := restored.Observe(at(i), series[i], refs)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("after a restore at run %d, Observe(run %d) differs (-live +restored):\n%s", cut, i, diff)
			}
		}
	}
}

func TestMarshalSize(t *testing.T) {
	t.Parallel()
	d, _ := NewDetector(Config{})
	for i := range 200 {
		d.ObserveRun(at(i), Run{Median: 1 * ms, P99: 3 * ms, Mean: 1.2 * ms, Ops: 50, IOPS: 49, Cap: 50}, Refs{})
	}
	b, _ := d.MarshalBinary()
	if len(b) > 930 {
		t.Errorf("MarshalBinary() of full windows of every signal = %d bytes, want <= 930", len(b))
	}
	t.Logf("MarshalBinary() of full windows: %d bytes", len(b))
}

// TestUnmarshalVersion1: a state written before the other signals existed
// (the median alone, format version 1) is read: the median goes on where
// it was, the other signals start learning.
func TestUnmarshalVersion1(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(8, 8))
	series := concat(steady(rng, 60, 1*ms, 0.1), steady(rng, 2, 3*ms, 0.1))
	live, _ := NewDetector(Config{Sustain: 3}) // as the version that wrote testdata/detector-v1.bin
	for i, x := range series {
		live.Observe(at(i), x, Refs{})
	}
	b, _ := live.MarshalBinary()
	// testdata/detector-v1.bin: this same series persisted by the version
	// before the other signals (commit 8edb0c2).
	old, err := os.ReadFile("testdata/detector-v1.bin")
	if err != nil {
		t.Fatal(err)
	}
	if string(old[:4]) != "PLB\x01" {
		t.Fatalf("testdata/detector-v1.bin starts %q, want version 1", old[:4])
	}
	restored, _ := NewDetector(Config{Sustain: 3})
	if err := restored.UnmarshalBinary(old); err != nil {
		t.Fatalf("UnmarshalBinary(version 1) = %v", err)
	}
	if b2, _ := restored.MarshalBinary(); !bytes.Equal(b, b2) {
		t.Errorf("version 1 restored re-encodes differently:\n%x\n%x", b, b2)
	}
	// The step goes on to degrade at its third run, as it would have.
	got := restored.Observe(at(62), 3*ms, Refs{})
	if want := live.Observe(at(62), 3*ms, Refs{}); got.Status != Degraded || got.Since != want.Since {
		t.Errorf("Observe after a version-1 restore = %v, want %v", got, want)
	}
	if s := restored.Of(SignalTail); s.Status != "" {
		t.Errorf("tail after a version-1 restore = %+v, want no state", s)
	}
}

// TestUnmarshalShorterWindow: a state written with a longer window keeps
// its most recent runs.
func TestUnmarshalShorterWindow(t *testing.T) {
	t.Parallel()
	long, _ := NewDetector(Config{Window: 100})
	for i := range 100 {
		long.Observe(at(i), float64(i+1)*ms, Refs{})
	}
	b, _ := long.MarshalBinary()
	short, _ := NewDetector(Config{Window: 10, MinHistory: 5})
	if err := short.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if h := short.History(); h.N != 10 || h.Median != 95.5*ms {
		t.Errorf("History() after restoring 100 runs into a 10-run window = %+v, want N 10, median 95.5 ms", h)
	}
}

func TestUnmarshalCorrupt(t *testing.T) {
	t.Parallel()
	d, _ := NewDetector(Config{})
	for i := range 30 {
		d.Observe(at(i), 1*ms, Refs{})
	}
	good, _ := d.MarshalBinary()
	mutate := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	tests := map[string][]byte{
		"empty":          nil,
		"bad magic":      mutate(func(b []byte) []byte { b[0] = 'X'; return b }),
		"future version": mutate(func(b []byte) []byte { b[3] = stateVersion + 1; return b }),
		"version 0":      mutate(func(b []byte) []byte { b[3] = 0; return b }),
		"bad status":     mutate(func(b []byte) []byte { b[4] = 9; return b }),
		"bad reference":  mutate(func(b []byte) []byte { b[5] = 9; return b }),
		"bad flags":      mutate(func(b []byte) []byte { b[6] |= 0x80; return b }),
		"truncated":      good[:len(good)-3],
		"trailing bytes": append(append([]byte(nil), good...), 0),
		"NaN in history": mutate(func(b []byte) []byte { copy(b[len(b)-9:], []byte{0, 0, 0, 0, 0, 0, 0xf8, 0x7f}); return b }),
	}
	before, _ := d.MarshalBinary()
	for name, b := range tests {
		if err := d.UnmarshalBinary(b); !errors.Is(err, ErrCorruptState) {
			t.Errorf("UnmarshalBinary(%s) = %v, want ErrCorruptState", name, err)
		}
		if after, _ := d.MarshalBinary(); !bytes.Equal(before, after) {
			t.Errorf("UnmarshalBinary(%s) changed the detector", name)
		}
	}
}

func FuzzUnmarshalBinary(f *testing.F) {
	d, _ := NewDetector(Config{})
	b, _ := d.MarshalBinary()
	f.Add(b)
	for i := range 80 {
		x := 1 * ms
		if i > 60 {
			x = 4 * ms
		}
		p99 := 3 * x
		if i > 70 {
			p99 = 100 * ms
		}
		d.ObserveRun(at(i), Run{Median: x, P99: p99, Mean: 1.2 * x, Ops: 50, IOPS: 50 - float64(i%3), Cap: 50}, Refs{Cohort: Stats{N: 5, Median: 1 * ms, MAD: 0.1 * ms}})
		if i%20 == 0 || i == 62 || i == 73 {
			b, _ := d.MarshalBinary()
			f.Add(b)
		}
	}
	if v1, err := os.ReadFile("testdata/detector-v1.bin"); err == nil {
		f.Add(v1)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		d, _ := NewDetector(Config{})
		if err := d.UnmarshalBinary(b); err != nil {
			if !errors.Is(err, ErrCorruptState) {
				t.Fatalf("UnmarshalBinary() = %v, want ErrCorruptState", err)
			}
			return
		}
		// Whatever was accepted re-encodes to a state that decodes to itself
		// and can go on observing.
		b2, err := d.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		d2, _ := NewDetector(Config{})
		if err := d2.UnmarshalBinary(b2); err != nil {
			t.Fatalf("UnmarshalBinary(MarshalBinary()) = %v", err)
		}
		if b3, _ := d2.MarshalBinary(); !bytes.Equal(b2, b3) {
			t.Fatalf("re-encoding is not stable:\n%x\n%x", b2, b3)
		}
		d.ObserveRun(d.State().Time.Add(time.Hour), Run{Median: 1 * ms, P99: 2 * ms, Mean: 1 * ms, Ops: 50, IOPS: 50, Cap: 50}, Refs{Cohort: Stats{N: 5, Median: 1 * ms}})
	})
}

// BenchmarkObserve updates 10,000 volumes' detectors by one run each (one
// fleet-wide probe round, full 48-run windows of every signal — median,
// p99, mean, rate — and a cohort to compare with).
func BenchmarkObserve(b *testing.B) {
	const volumes = 10000
	rng := rand.New(rand.NewPCG(9, 9))
	ds := make([]*Detector, volumes)
	for v := range ds {
		ds[v], _ = NewDetector(Config{})
		for i, x := range steady(rng, 48, 1*ms, 0.1) {
			ds[v].ObserveRun(at(i), Run{Median: x, P99: 3 * x, Mean: 1.2 * x, Ops: 50, IOPS: 49 + x/ms, Cap: 50}, Refs{})
		}
	}
	refs := Refs{Cohort: CohortOf(steady(rng, 50, 1*ms, 0.05))}
	xs := steady(rng, volumes, 1*ms, 0.1)
	run := 48
	b.ReportAllocs()
	for b.Loop() {
		t := at(run)
		for v, d := range ds {
			d.ObserveRun(t, Run{Median: xs[v], P99: 3 * xs[v], Mean: 1.2 * xs[v], Ops: 50, IOPS: 49 + xs[v]/ms, Cap: 50}, refs)
		}
		run++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/volumes, "ns/volume")
}
