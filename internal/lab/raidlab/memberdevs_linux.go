//go:build linux

package raidlab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// attachMembers attaches a loop device with direct I/O to every member's
// file, records them in the state file (so that a reaper finds them if
// this process dies), opens them with O_DIRECT and routes the array's
// member operations through them.
func (l *Lab) attachMembers(ctx context.Context) error {
	for m := range l.Geometry.Members {
		dev, err := attachLoop(ctx, filepath.Join(l.Mountpoint, MemberFile(m)))
		if err != nil {
			return fmt.Errorf("raidlab: member %d: %w", m, err)
		}
		l.Members = append(l.Members, dev)
		if err := l.writeState(); err != nil {
			return err
		}
	}
	devs := make([]MemberDevice, len(l.Members))
	for m, dev := range l.Members {
		f, err := os.OpenFile(dev, os.O_RDWR|syscall.O_DIRECT, 0)
		if err != nil {
			return fmt.Errorf("raidlab: member %d: %w", m, err)
		}
		l.devs = append(l.devs, f)
		devs[m] = f
	}
	return l.arr.AttachMembers(devs)
}

// detachMembers closes the member devices and detaches their loop
// devices (while they are still attached to this lab's member files).
// The array's own loop device must be gone first: nothing may still
// send member operations.
func (l *Lab) detachMembers() error {
	for _, f := range l.devs {
		f.Close()
	}
	l.devs = nil
	var errs []error
	for m, dev := range l.Members {
		errs = append(errs, teardownDevice(dev, filepath.Join(l.Mountpoint, MemberFile(m))))
	}
	return errors.Join(errs...)
}

// Fault applies a fault to the array and, for a lab with member devices,
// rewrites its md sysfs tree so that the tree states it (a failed member
// is faulty, a rebuild runs).
func (l *Lab) Fault(f Fault) error {
	if err := l.arr.Apply(f); err != nil {
		return err
	}
	if l.Sysfs == "" {
		return nil
	}
	return l.WriteSysfs()
}
