package baseline

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestMarshalRoundTrip: a Detector persisted and restored at any point
// goes on exactly like the one that never stopped.
func TestMarshalRoundTrip(t *testing.T) {
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
	d, _ := NewDetector(Config{})
	for i := range 200 {
		d.Observe(at(i), 1*ms, Refs{})
	}
	b, _ := d.MarshalBinary()
	if len(b) > 460 {
		t.Errorf("MarshalBinary() of a full 48-run window = %d bytes, want <= 460", len(b))
	}
}

// TestUnmarshalShorterWindow: a state written with a longer window keeps
// its most recent runs.
func TestUnmarshalShorterWindow(t *testing.T) {
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
	d, _ := NewDetector(Config{})
	for i := range 30 {
		d.Observe(at(i), 1*ms, Refs{})
	}
	good, _ := d.MarshalBinary()
	mutate := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	tests := map[string][]byte{
		"empty":          nil,
		"bad magic":      mutate(func(b []byte) []byte { b[0] = 'X'; return b }),
		"future version": mutate(func(b []byte) []byte { b[3] = 2; return b }),
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
		d.Observe(at(i), x, Refs{Cohort: Stats{N: 5, Median: 1 * ms, MAD: 0.1 * ms}})
		if i%20 == 0 || i == 62 {
			b, _ := d.MarshalBinary()
			f.Add(b)
		}
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
		d.Observe(d.State().Time.Add(time.Hour), 1*ms, Refs{Cohort: Stats{N: 5, Median: 1 * ms}})
	})
}

// BenchmarkObserve updates 10,000 volumes' detectors by one run each (one
// fleet-wide probe round, full 48-run windows, a cohort to compare with).
func BenchmarkObserve(b *testing.B) {
	const volumes = 10000
	rng := rand.New(rand.NewPCG(9, 9))
	ds := make([]*Detector, volumes)
	for v := range ds {
		ds[v], _ = NewDetector(Config{})
		for i, x := range steady(rng, 48, 1*ms, 0.1) {
			ds[v].Observe(at(i), x, Refs{})
		}
	}
	refs := Refs{Cohort: CohortOf(steady(rng, 50, 1*ms, 0.05))}
	xs := steady(rng, volumes, 1*ms, 0.1)
	run := 48
	b.ReportAllocs()
	for b.Loop() {
		t := at(run)
		for v, d := range ds {
			d.Observe(t, xs[v], refs)
		}
		run++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/volumes, "ns/volume")
}
