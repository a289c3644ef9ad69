package raidlab

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"
	"unsafe"
)

// A lab started with MemberDevices gives every member a kernel block
// device of its own: the member's file on the lab's FUSE mount
// (MemberFile) under a loop device attached with direct I/O. The array
// then serves a request by sending its member operations to those
// devices as real I/O, and MemberIO — called where a member's file is
// served — holds each operation for its queueing and service time under
// the member's faults. The kernel accounts every member operation in the
// member device's /proc/diskstats line, from the moment the block layer
// takes it to the moment the file answers: a slow or stalling member is
// seen in the kernel's own counters, as a real disk's would be.

// maxMemberOp is the largest member operation: a request is at most
// maxRequest (1 MiB) bytes, and no member operation is longer than its request.
const maxMemberOp = 1 << 20

// devAlign is the alignment direct I/O on a member device needs (its
// logical block size; 4 KiB covers every sector size).
const devAlign = 4096

// MemberDevice is what the array needs of a member's block device: an
// open handle doing direct I/O (an *os.File opened with O_DIRECT).
type MemberDevice interface {
	io.ReaderAt
	io.WriterAt
}

// memberDevices are the members' devices and the buffers their I/O uses.
// The member files store nothing (data lives in the array's backing file),
// so every write sends zeros, from one aligned buffer all writes share,
// and every read's bytes are thrown away.
type memberDevices struct {
	devs  []MemberDevice
	zeros []byte    // written; never changed
	sinks sync.Pool // aligned maxMemberOp buffers reads land in
}

// alignedBuf returns n bytes starting at a devAlign boundary.
func alignedBuf(n int) []byte {
	b := make([]byte, n+devAlign)
	off := (devAlign - int(uintptr(unsafe.Pointer(&b[0]))%devAlign)) % devAlign
	return b[off : off+n : off+n]
}

// AttachMembers routes every member operation to devs, one per member in
// order, from now on. It is called once, before the array serves I/O.
func (a *Array) AttachMembers(devs []MemberDevice) error {
	if len(devs) != len(a.members) {
		return fmt.Errorf("raidlab: %d member devices for %d members", len(devs), len(a.members))
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.devs = &memberDevices{devs: devs, zeros: alignedBuf(maxMemberOp)}
	a.devs.sinks.New = func() any { return alignedBuf(maxMemberOp) }
	return nil
}

// MemberSize is the size of each member's device: the bytes of a member
// the array's size reaches, in whole chunks.
func (g Geometry) MemberSize() int64 {
	if !g.striped() {
		return g.Size
	}
	data := int64(g.Members)
	switch g.Level {
	case RAID5:
		data = int64(g.Members - 1)
	case RAID10:
		data = int64(g.Members / 2)
	}
	stripe := data * g.StripeUnit
	return (g.Size + stripe - 1) / stripe * g.StripeUnit
}

// runMembers waits until start (the throttle's admission), runs the
// request's phases of member operations on the member devices — every
// operation of a phase at once, the next phase when they are all done —
// and returns when the request is done (with the array's added latency).
func (a *Array) runMembers(ctx context.Context, start time.Time, phases [][]memberOp) (time.Time, error) {
	if err := waitUntil(ctx, start); err != nil {
		return time.Time{}, err
	}
	for _, ops := range phases {
		errs := make([]error, len(ops))
		var wg sync.WaitGroup
		for i, op := range ops {
			wg.Add(1)
			go func() { // owned: waited for below
				defer wg.Done()
				errs[i] = a.devs.do(op)
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return time.Time{}, err
			}
		}
	}
	a.mu.Lock()
	add := a.addLatency
	a.mu.Unlock()
	return time.Now().Add(add), nil
}

// do runs one member operation on its device.
func (d *memberDevices) do(op memberOp) error {
	if op.len > maxMemberOp || op.len <= 0 {
		return fmt.Errorf("raidlab: member %d operation of %d bytes", op.member, op.len)
	}
	var err error
	if op.write {
		_, err = d.devs[op.member].WriteAt(d.zeros[:op.len], op.off)
	} else {
		sink := d.sinks.Get().([]byte)
		_, err = d.devs[op.member].ReadAt(sink[:op.len], op.off)
		d.sinks.Put(sink)
	}
	if err != nil {
		return fmt.Errorf("raidlab: member %d %s of %d bytes at %d: %w", op.member, opName(op.write), op.len, op.off, err)
	}
	return nil
}

func opName(write bool) string {
	if write {
		return "write"
	}
	return "read"
}

// MemberIO is one operation of n bytes reaching member m's device: it
// queues behind the member's other operations (and any rebuild load),
// takes the member's service time under its faults (slow, added latency,
// stalls), and returns when it is done. Whoever sends it — the array, or
// anything else reading the device — is served the same way.
func (a *Array) MemberIO(ctx context.Context, m int, write bool, n int64) error {
	if m < 0 || m >= len(a.members) {
		return fmt.Errorf("raidlab: member %d out of range", m)
	}
	a.mu.Lock()
	if a.members[m].failed {
		a.mu.Unlock()
		return ErrMemberFailed
	}
	done := a.reserve(&a.members[m], time.Now(), n, write)
	a.mu.Unlock()
	return waitUntil(ctx, done)
}
