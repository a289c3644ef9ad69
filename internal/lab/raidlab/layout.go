// Package raidlab is an emulated disk array served as a real block device:
// a FUSE file system (one file per array, opened with direct I/O and
// asynchronous direct I/O negotiated) under a loop device attached with
// --direct-io=on, so every request the kernel's block layer sends to the
// loop device reaches the emulator's own code. The emulator maps each
// request onto member disks by the array's RAID level and stripe unit,
// queues one operation at a time per member, waits out each member's
// service time, and stores the data in a sparse backing file.
//
// It is a test and lab tool: it shells out to losetup, umount and partx,
// and must never be imported by the agent.
package raidlab

import (
	"errors"
	"fmt"
	"strings"
)

// Level is a RAID level the emulator serves.
type Level string

// The levels.
const (
	Single Level = "single" // one disk
	RAID0  Level = "raid0"  // striping, no redundancy
	RAID1  Level = "raid1"  // every member holds every byte
	RAID5  Level = "raid5"  // striping with rotating parity, left-symmetric
	RAID10 Level = "raid10" // striped mirrors, md's near-2 layout
)

// ParseLevel reads a level name ("raid10", "RAID10", "10", "single").
func ParseLevel(s string) (Level, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	t = strings.TrimPrefix(t, "raid")
	switch t {
	case "single", "disk", "jbod":
		return Single, nil
	case "0":
		return RAID0, nil
	case "1":
		return RAID1, nil
	case "5":
		return RAID5, nil
	case "10":
		return RAID10, nil
	}
	return "", fmt.Errorf("raidlab: unknown level %q (want single, raid0, raid1, raid5 or raid10)", s)
}

// Geometry is an array's shape.
type Geometry struct {
	Level      Level
	Members    int   // member disks
	StripeUnit int64 // bytes per member per stripe (the chunk); unused by single and raid1
	Size       int64 // bytes the array presents
}

// Validate reports a geometry the emulator cannot serve.
func (g Geometry) Validate() error {
	var errs []error
	switch g.Level {
	case Single:
		if g.Members != 1 {
			errs = append(errs, fmt.Errorf("single disk: members = %d, want 1", g.Members))
		}
	case RAID0:
		if g.Members < 2 {
			errs = append(errs, fmt.Errorf("raid0: members = %d, want ≥ 2", g.Members))
		}
	case RAID1:
		if g.Members < 2 {
			errs = append(errs, fmt.Errorf("raid1: members = %d, want ≥ 2", g.Members))
		}
	case RAID5:
		if g.Members < 3 {
			errs = append(errs, fmt.Errorf("raid5: members = %d, want ≥ 3", g.Members))
		}
	case RAID10:
		if g.Members < 4 || g.Members%2 != 0 {
			errs = append(errs, fmt.Errorf("raid10 (near 2): members = %d, want an even number ≥ 4", g.Members))
		}
	default:
		errs = append(errs, fmt.Errorf("unknown level %q", g.Level))
	}
	if g.Members > 64 {
		errs = append(errs, fmt.Errorf("members = %d, want ≤ 64", g.Members))
	}
	if g.striped() && (g.StripeUnit < 4096 || g.StripeUnit%4096 != 0 || g.StripeUnit > 64<<20) {
		errs = append(errs, fmt.Errorf("stripe unit %d: want a multiple of 4 KiB between 4 KiB and 64 MiB", g.StripeUnit))
	}
	if g.Size < 1<<20 || g.Size%4096 != 0 {
		errs = append(errs, fmt.Errorf("size %d: want a multiple of 4 KiB, at least 1 MiB", g.Size))
	}
	if len(errs) > 0 {
		return fmt.Errorf("raidlab: bad geometry: %w", errors.Join(errs...))
	}
	return nil
}

// striped says whether the level has a stripe unit.
func (g Geometry) striped() bool {
	return g.Level == RAID0 || g.Level == RAID5 || g.Level == RAID10
}

// memberOp is one operation on one member disk.
type memberOp struct {
	member int
	off    int64 // byte offset on the member
	len    int64
	write  bool
}

// piece is the part of a request that falls in one chunk.
type piece struct {
	chunk    int64 // array-wide data chunk number
	inChunk  int64 // offset inside the chunk
	len      int64
	stripe   int64 // row of chunks across the members
	dataIdx  int   // position of the chunk among the stripe's data chunks
	member   int   // member holding the chunk (raid0/raid5; first mirror for raid10)
	memberOf int64 // byte offset on that member
}

// pieces cuts [off, off+n) at stripe-unit boundaries.
func (g Geometry) pieces(off, n int64) []piece {
	u := g.StripeUnit
	var ps []piece
	for n > 0 {
		c := off / u
		in := off % u
		l := min(n, u-in)
		p := piece{chunk: c, inChunk: in, len: l}
		switch g.Level {
		case RAID0:
			p.stripe = c / int64(g.Members)
			p.dataIdx = int(c % int64(g.Members))
			p.member = p.dataIdx
		case RAID10:
			pairs := int64(g.Members / 2)
			p.stripe = c / pairs
			p.dataIdx = int(c % pairs)
			p.member = 2 * p.dataIdx
		case RAID5:
			data := int64(g.Members - 1)
			p.stripe = c / data
			p.dataIdx = int(c % data)
			p.member = (g.parityMember(p.stripe) + 1 + p.dataIdx) % g.Members
		}
		p.memberOf = p.stripe*u + in
		ps = append(ps, p)
		off += l
		n -= l
	}
	return ps
}

// parityMember is the member holding stripe s's parity in the
// left-symmetric layout: the last member for stripe 0, moving one member
// left per stripe; data chunks follow the parity, wrapping around.
func (g Geometry) parityMember(s int64) int {
	n := int64(g.Members)
	return int(n - 1 - s%n)
}

// Split reports whether a request of n bytes at off spans more than one
// chunk, i.e. costs more than one member operation where one would do.
// Levels without a stripe unit never split.
func (g Geometry) Split(off, n int64) bool {
	if !g.striped() || n <= 0 {
		return false
	}
	return off/g.StripeUnit != (off+n-1)/g.StripeUnit
}

// mergeOps joins operations on the same member that touch adjacent bytes
// in the same direction, as a disk would serve them in one operation.
func mergeOps(ops []memberOp) []memberOp {
	out := ops[:0:0]
	for _, o := range ops {
		joined := false
		for i := range out {
			p := &out[i]
			if p.member == o.member && p.write == o.write {
				if p.off+p.len == o.off {
					p.len += o.len
					joined = true
				} else if o.off+o.len == p.off {
					p.off = o.off
					p.len += o.len
					joined = true
				} else if o.off >= p.off && o.off+o.len <= p.off+p.len {
					joined = true // already covered (a parity range)
				}
			}
			if joined {
				break
			}
		}
		if !joined {
			out = append(out, o)
		}
	}
	return out
}
