//go:build linux

package raidlab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// ErrNotFound is returned when no lab under the state root owns a device.
var ErrNotFound = errors.New("raidlab: no lab owns that device")

// Find returns the state of the lab whose loop device is dev.
func Find(root, dev string) (State, error) {
	want := canonical(dev)
	labs, err := List(root)
	if err != nil {
		return State{}, err
	}
	for _, s := range labs {
		if s.Device != "" && canonical(s.Device) == want {
			return s, nil
		}
	}
	return State{}, fmt.Errorf("%w: %s (see raidlab list)", ErrNotFound, dev)
}

func canonical(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return filepath.Clean(p)
}

// Down removes the lab that owns dev and everything under it: file
// systems mounted on the device or its partitions are unmounted, then the
// owning daemon is stopped (it detaches the loop device and unmounts its
// FUSE mount) and Down waits until it is gone. A lab whose owner is dead is
// reaped. A lab owned by a live process that is not a raidlab daemon (a
// test) is refused: that process removes it itself.
func Down(ctx context.Context, root, dev string) error {
	s, err := Find(root, dev)
	if err != nil {
		return err
	}
	dir := filepath.Join(root, s.ID)
	if !s.Alive() {
		return reapState(dir, s)
	}
	if !s.Daemon {
		return fmt.Errorf("raidlab: %s belongs to process %d, which is not a raidlab daemon; it removes the lab itself", dev, s.PID)
	}
	// File systems first: a mounted partition keeps the loop device busy,
	// and losetup -d would only mark it for later.
	for _, mp := range mountsOf(s.Device) {
		if err := umount(mp); err != nil {
			return err
		}
	}
	if err := syscall.Kill(s.PID, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("raidlab: stop daemon %d: %w", s.PID, err)
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) && !s.Alive() {
			return nil
		}
		if !s.Alive() {
			// The daemon is gone but left something: reap it.
			if _, err := os.Stat(dir); err == nil {
				return reapState(dir, s)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("raidlab: daemon %d did not stop: %w", s.PID, ctx.Err())
		case <-tick.C:
		}
	}
}
