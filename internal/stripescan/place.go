// Package stripescan infers a volume's stripe unit from where 8 KiB reads
// land and how long they take: reads placed to straddle an odd multiple of
// a candidate unit U (crossing U but not 2U) are compared, by a rank test,
// with reads placed wholly inside a 16 KiB-aligned chunk. On a striped
// device a read that crosses a stripe-unit boundary is served by two
// members, so the straddles of every candidate from the true unit up differ
// from the inside reads, and those of every smaller candidate do not (an
// odd multiple of U < S is never a multiple of S).
//
// The package is pure: Place turns the probe file's extent map into read
// offsets, Infer turns the measured latencies into an answer. The probe
// engine (internal/agent/probe) does the I/O.
package stripescan

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/plumbline/plumbline/internal/vocab"
)

// ReadSize is the size of every stripe-scan read.
const ReadSize = 8 << 10

// The candidate units: powers of two from MinUnit to MaxUnit.
const (
	MinUnit = 16 << 10
	MaxUnit = 1 << 20
)

// MaxOps bounds a stripe-scan run (vocab defines it).
const MaxOps = vocab.StripeScanMaxOps

// Candidates lists the candidate units, smallest first.
func Candidates() []int64 {
	var out []int64
	for u := int64(MinUnit); u <= MaxUnit; u *= 2 {
		out = append(out, u)
	}
	return out
}

// Inside is the class of a read placed wholly inside a MinUnit-aligned
// chunk; classes 0… are straddles of Candidates()[class].
const Inside = -1

// Extent is a run of the probe file contiguous on the device under its file
// system: file bytes [Logical, Logical+Length) are device bytes
// [Physical, Physical+Length).
type Extent struct {
	Logical, Physical, Length int64
}

// Layout is where the probe file lies.
type Layout struct {
	Extents []Extent
	// Base is the offset of the file system's block device on the device
	// whose stripe is measured (partition start, LVM and dm offsets, md
	// data offset); 0 when unknown, and then the answer is relative to the
	// file system's device.
	Base int64
	// DataStart and DataEnd bound the file bytes reads may touch.
	DataStart, DataEnd int64
	// Align is the file offset alignment of a read (O_DIRECT's), a power
	// of two.
	Align int64
}

// Read is one placed read.
type Read struct {
	FileOffset   int64
	DeviceOffset int64 // on the measured device: Base + physical
	Class        int   // Inside, or an index into Candidates()
}

// ErrPlacement is wrapped when reads of a class cannot be placed.
var ErrPlacement = errors.New("stripescan: cannot place reads")

// Shares splits n reads into inside reads and straddles per candidate: a
// shared control group compared with m groups is best at √m times a
// group's size.
func Shares(n int) (inside int, perCandidate []int) {
	m := len(Candidates())
	sq := math.Sqrt(float64(m))
	inside = int(math.Round(float64(n) * sq / (float64(m) + sq)))
	rest := n - inside
	perCandidate = make([]int, m)
	for i := range perCandidate {
		perCandidate[i] = rest / m
		if i < rest%m {
			perCandidate[i]++
		}
	}
	return inside, perCandidate
}

// placeAttempts bounds the random tries for one read.
const placeAttempts = 256

// Place returns n reads in random order: Shares(n) of each class, at
// random places of the file's extents. It fails when a class finds no
// place (extents too short to hold a straddle of a large unit).
func Place(l Layout, n int, seed uint64) ([]Read, error) {
	if l.Align <= 0 || l.Align&(l.Align-1) != 0 {
		return nil, fmt.Errorf("%w: alignment %d is not a power of two", ErrPlacement, l.Align)
	}
	usable := clip(l)
	if len(usable) == 0 {
		return nil, fmt.Errorf("%w: no extent of the data region holds an %d-byte read", ErrPlacement, ReadSize)
	}
	rng := rand.New(rand.NewPCG(seed, 0x57a1be))
	inside, per := Shares(n)
	reads := make([]Read, 0, n)
	ends := cumulative(usable)
	add := func(class int, count int) error {
		for range count {
			r, ok := placeOne(l, usable, ends, class, rng)
			if !ok {
				return fmt.Errorf("%w: no place found for a read of class %s", ErrPlacement, className(class))
			}
			reads = append(reads, r)
		}
		return nil
	}
	if err := add(Inside, inside); err != nil {
		return nil, err
	}
	for c, k := range per {
		if err := add(c, k); err != nil {
			return nil, err
		}
	}
	rng.Shuffle(len(reads), func(i, j int) { reads[i], reads[j] = reads[j], reads[i] })
	return reads, nil
}

func className(class int) string {
	if class == Inside {
		return "inside"
	}
	return fmt.Sprintf("straddle %d", Candidates()[class])
}

// clip keeps the parts of the extents inside the data region, at least one
// read long, with their cumulative lengths for weighted picking.
func clip(l Layout) []Extent {
	var out []Extent
	for _, e := range l.Extents {
		lo, hi := max(e.Logical, l.DataStart), min(e.Logical+e.Length, l.DataEnd)
		if hi-lo < ReadSize {
			continue
		}
		out = append(out, Extent{Logical: lo, Physical: e.Physical + (lo - e.Logical), Length: hi - lo})
	}
	return out
}

// cumulative is the running total of the extents' lengths.
func cumulative(ext []Extent) []int64 {
	ends := make([]int64, len(ext))
	var total int64
	for i, e := range ext {
		total += e.Length
		ends[i] = total
	}
	return ends
}

// placeOne places one read of class in a random extent, weighted by length
// (ends: cumulative lengths).
func placeOne(l Layout, ext []Extent, ends []int64, class int, rng *rand.Rand) (Read, bool) {
	total := ends[len(ends)-1]
	for range placeAttempts {
		pick := rng.Int64N(total)
		i, _ := slices.BinarySearch(ends, pick+1)
		e := ext[i]
		pick -= ends[i] - e.Length
		dev0 := l.Base + e.Physical // device offset of file byte e.Logical
		p := dev0 + pick
		// r: the residue (mod Align) every device offset of this extent
		// must have for its file offset to be aligned.
		r := posMod(dev0-e.Logical, l.Align)
		d, ok := target(class, p, r, l.Align, rng)
		if !ok || d < dev0 || d+ReadSize > dev0+e.Length {
			continue
		}
		return Read{FileOffset: e.Logical + (d - dev0), DeviceOffset: d, Class: class}, true
	}
	return Read{}, false
}

// target is a device offset for a read of class near p, with d ≡ r mod
// align: a straddle crosses the first odd multiple of its unit at or after
// p; an inside read lies in the MinUnit chunk holding p.
func target(class int, p, r, align int64, rng *rand.Rand) (int64, bool) {
	var lo, hi int64 // the read's start may be any aligned d in [lo, hi]
	if class == Inside {
		c := p / MinUnit * MinUnit
		lo, hi = c, c+MinUnit-ReadSize
	} else {
		u := Candidates()[class]
		k := (p + u - 1) / u
		if k%2 == 0 {
			k++
		}
		b := k * u
		lo, hi = b-ReadSize+1, b-1
	}
	first := lo + posMod(r-lo, align)
	if first > hi {
		return 0, false
	}
	return first + rng.Int64N((hi-first)/align+1)*align, true
}

func posMod(a, m int64) int64 {
	a %= m
	if a < 0 {
		a += m
	}
	return a
}

// Classify is the class of an 8 KiB read at device offset d: Inside when
// it crosses no MinUnit boundary; the index of the largest candidate whose
// multiple it crosses otherwise; -2 when it crosses a boundary of a unit
// larger than MaxUnit (such a read is not placed).
func Classify(d int64) int {
	end := d + ReadSize - 1
	if d/MinUnit == end/MinUnit {
		return Inside
	}
	b := end / MinUnit * MinUnit // the boundary crossed (reads are shorter than MinUnit)
	class := -2
	for i, u := range Candidates() {
		if b%u == 0 {
			class = i
		}
	}
	if b%(2*MaxUnit) == 0 {
		return -2
	}
	return class
}

// MinOps is the fewest reads a run needs for Infer to test every
// candidate: Shares gives each class at least MinPerClass reads.
func MinOps() int {
	for n := MinPerClass; n <= MaxOps; n++ {
		inside, per := Shares(n)
		if inside >= MinPerClass && slices.Min(per) >= MinPerClass {
			return n
		}
	}
	return MaxOps
}
