//go:build linux

// Package raidlabtest holds what the tests of lab arrays share (the
// package's own and cmd/raidlab's): the array's loop device opened for
// direct I/O, and buffers aligned for it.
package raidlabtest

import (
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// OpenDirect opens a block device for O_DIRECT reads and writes; the test
// closes it at its end.
func OpenDirect(t testing.TB, dev string) *os.File {
	t.Helper()
	f, err := os.OpenFile(dev, os.O_RDWR|unix.O_DIRECT, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// AlignedBuf is an n-byte buffer at a 4 KiB boundary, as O_DIRECT wants.
func AlignedBuf(n int) []byte {
	b := make([]byte, n+4096)
	off := 0
	if r := int(uintptr(unsafe.Pointer(unsafe.SliceData(b))) % 4096); r != 0 {
		off = 4096 - r
	}
	return b[off : off+n]
}
