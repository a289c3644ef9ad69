package stripescan

import (
	"errors"
	"slices"
	"testing"
)

// TestPlaceLandsEachClass places a full run on a fragmented file behind a
// 31.5 KiB partition offset (the seeds' 63 sectors) and checks every read
// against an independent classification of its device offset.
func TestPlaceLandsEachClass(t *testing.T) {
	l := Layout{
		Extents: []Extent{
			{Logical: 0, Physical: 8 << 20, Length: 3 << 20},
			{Logical: 3 << 20, Physical: 40<<20 + 4096, Length: 5<<20 + 12288},
			{Logical: 8<<20 + 12288, Physical: 100 << 20, Length: 56<<20 - 12288},
		},
		Base:      63 * 512,
		DataStart: 1 << 20,
		DataEnd:   64 << 20,
		Align:     4096,
	}
	reads, err := Place(l, MaxOps, 42)
	if err != nil {
		t.Fatal(err)
	}
	inside, per := Shares(MaxOps)
	count := map[int]int{}
	for _, r := range reads {
		count[r.Class]++
		if got := Classify(r.DeviceOffset); got != r.Class {
			t.Fatalf("read at device offset %d placed as class %d, classified %d", r.DeviceOffset, r.Class, got)
		}
		if r.FileOffset%4096 != 0 || r.FileOffset < l.DataStart || r.FileOffset+ReadSize > l.DataEnd {
			t.Fatalf("file offset %d: unaligned or outside the data region", r.FileOffset)
		}
		in := false
		for _, e := range l.Extents {
			if r.FileOffset >= e.Logical && r.FileOffset+ReadSize <= e.Logical+e.Length {
				in = r.DeviceOffset == l.Base+e.Physical+(r.FileOffset-e.Logical)
			}
		}
		if !in {
			t.Fatalf("read %+v is not inside one extent at its device offset", r)
		}
	}
	if count[Inside] != inside {
		t.Errorf("%d inside reads, want %d", count[Inside], inside)
	}
	for i, n := range per {
		if count[i] != n {
			t.Errorf("candidate %d: %d reads, want %d", Candidates()[i], count[i], n)
		}
	}
	// Interleaved: the first hundred reads are not all of one class.
	first := map[int]bool{}
	for _, r := range reads[:100] {
		first[r.Class] = true
	}
	if len(first) < 4 {
		t.Errorf("the first 100 reads have %d classes: not interleaved", len(first))
	}
}

func TestPlaceRefusesShortExtents(t *testing.T) {
	// 512 KiB of 64 KiB extents scattered at even MiB offsets: no extent
	// crosses an odd multiple of 1 MiB.
	var ext []Extent
	for i := range int64(8) {
		ext = append(ext, Extent{Logical: i << 16, Physical: i << 21, Length: 1 << 16})
	}
	_, err := Place(Layout{Extents: ext, DataEnd: 1 << 20, Align: 4096}, 200, 1)
	if !errors.Is(err, ErrPlacement) {
		t.Fatalf("err = %v, want ErrPlacement", err)
	}
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		d    int64
		want int
	}{
		{0, Inside},
		{8 << 10, Inside},
		{12 << 10, 0},          // crosses 16 KiB
		{28 << 10, 1},          // crosses 32 KiB
		{60 << 10, 2},          // crosses 64 KiB
		{(1 << 20) - 4096, 6},  // crosses 1 MiB
		{(2 << 20) - 4096, -2}, // crosses 2 MiB: beyond the candidates
		{(3 << 20) - 512, 6},   // crosses 3 MiB
	} {
		if got := Classify(tc.d); got != tc.want {
			t.Errorf("Classify(%d) = %d, want %d", tc.d, got, tc.want)
		}
	}
}

// FuzzPlace: whatever extent map the file system reports, Place either
// refuses or returns reads inside one extent of the data region, of the
// class their device offset has, aligned.
func FuzzPlace(f *testing.F) {
	f.Add(int64(0), int64(1<<20), int64(64<<20), int64(0), int64(1<<30), int64(32<<20), int64(32256), uint8(3))
	f.Add(int64(4096), int64(8192), int64(12288), int64(1<<20), int64(4096), int64(1<<20), int64(-5), uint8(200))
	f.Fuzz(func(t *testing.T, l1, p1, n1, l2, p2, n2, base int64, ops uint8) {
		ext := []Extent{{Logical: l1, Physical: p1, Length: n1}, {Logical: l2, Physical: p2, Length: n2}}
		for _, e := range ext {
			if e.Logical < 0 || e.Physical < 0 || e.Length <= 0 || e.Logical > 1<<40 || e.Physical > 1<<40 || e.Length > 1<<40 {
				return // the decoders bound these
			}
		}
		if base < 0 || base > 1<<40 {
			return
		}
		l := Layout{Extents: ext, Base: base, DataStart: 1 << 20, DataEnd: 1 << 41, Align: 4096}
		reads, err := Place(l, int(ops), 1)
		if err != nil {
			return
		}
		for _, r := range reads {
			if Classify(r.DeviceOffset) != r.Class || r.FileOffset%4096 != 0 || r.FileOffset < l.DataStart {
				t.Fatalf("read %+v", r)
			}
			in := false
			for _, e := range ext {
				if r.FileOffset >= e.Logical && r.FileOffset+ReadSize <= e.Logical+e.Length && r.DeviceOffset == base+e.Physical+r.FileOffset-e.Logical {
					in = true
				}
			}
			if !in {
				t.Fatalf("read %+v outside the extents %+v", r, ext)
			}
		}
	})
}

// MinOps is the fewest reads whose Shares give every class MinPerClass:
// more than an agent schedule's default 50, within a run's budget.
func TestMinOps(t *testing.T) {
	n := MinOps()
	enough := func(n int) bool {
		inside, per := Shares(n)
		return inside >= MinPerClass && slices.Min(per) >= MinPerClass
	}
	if !enough(n) || enough(n-1) {
		t.Errorf("MinOps() = %d: Shares(%d) enough %v, Shares(%d) enough %v; want the least n that is", n, n, enough(n), n-1, enough(n-1))
	}
	if n <= 50 || n > MaxOps {
		t.Errorf("MinOps() = %d, want above 50 and at most %d", n, MaxOps)
	}
}
