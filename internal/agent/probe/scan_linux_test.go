package probe

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plumbline/plumbline/internal/lab/loopdev"
	"github.com/plumbline/plumbline/internal/stripescan"
)

// TestExtentsMatchTheDevice checks FS_IOC_FIEMAP against the device
// itself: the bytes of the probe file at each extent's file offset are the
// bytes of the block device at its physical offset.
func TestExtentsMatchTheDevice(t *testing.T) {
	loopdev.Require(t, "mkfs.ext4")
	d := loopdev.New(t, loopdev.Options{SizeBytes: 128 << 20})
	loopdev.Mkfs(t, d.Path, "ext4")
	dir := loopdev.Mount(t, d.Path)
	o := testOptions(dir, StripeScan)
	o.Ops = 200
	res, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(dir, DefaultFileName))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ext, err := (&fdFile{fd: int(f.Fd())}).extents()
	if err != nil {
		t.Fatal(err)
	}
	if len(ext) == 0 || len(ext) != res.StripeScan.Extents {
		t.Fatalf("%d extents, the run saw %d", len(ext), res.StripeScan.Extents)
	}
	var covered int64
	dev, err := os.Open(d.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	for _, e := range ext {
		covered += max(0, min(e.Logical+e.Length, o.FileSize)-max(e.Logical, HeaderSize))
		for _, at := range []int64{0, e.Length - 4096} {
			a, b := make([]byte, 4096), make([]byte, 4096)
			if _, err := f.ReadAt(a, e.Logical+at); err != nil {
				t.Fatal(err)
			}
			if _, err := dev.ReadAt(b, e.Physical+at); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(a, b) {
				t.Fatalf("extent %+v: file byte %d is not device byte %d", e, e.Logical+at, e.Physical+at)
			}
		}
	}
	// The data region is written in full; the header region is not (it
	// is preallocated, unwritten apart from its first block, and reads of
	// an unwritten extent never reach the device).
	if covered != o.FileSize-HeaderSize {
		t.Errorf("extents cover %d bytes of the %d-byte data region", covered, o.FileSize-HeaderSize)
	}
}

// TestStripeScanRun runs the kind end to end on ext4 on a loop device: the
// placed reads are the run's ops, every class is measured, and an unknown
// placement says what the answer is relative to.
func TestStripeScanRun(t *testing.T) {
	loopdev.Require(t, "mkfs.ext4")
	d := loopdev.New(t, loopdev.Options{SizeBytes: 128 << 20})
	loopdev.Mkfs(t, d.Path, "ext4")
	o := testOptions(loopdev.Mount(t, d.Path), StripeScan)
	o.Ops = 400
	res, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	s := res.StripeScan
	if s == nil || res.Ops != 400 || s.Placed != 400 || !res.CacheBypass {
		t.Fatalf("ops %d, bypass %v, scan %+v", res.Ops, res.CacheBypass, s)
	}
	var sum int
	for _, n := range s.Measured {
		if n == 0 {
			t.Errorf("a class measured nothing: %v", s.Measured)
		}
		sum += n
	}
	if sum != res.Ops || len(s.Candidates) != len(stripescan.Candidates()) {
		t.Errorf("measured %v (sum %d) of %d ops, %d candidates", s.Measured, sum, res.Ops, len(s.Candidates))
	}
	if s.Placement.Known || s.Placement.Basis == "" {
		t.Errorf("placement %+v: want unknown, with its basis said", s.Placement)
	}
	if !s.FreshFile || s.Unit != 0 || !strings.Contains(s.Reason, "wrote the probe file") {
		t.Errorf("the run that wrote the file: fresh %v, unit %d, reason %q", s.FreshFile, s.Unit, s.Reason)
	}
	if again, err := Run(context.Background(), o); err != nil || again.StripeScan.FreshFile {
		t.Errorf("second run: %v, fresh %v", err, again.StripeScan != nil && again.StripeScan.FreshFile)
	}
	for _, bad := range []func(*Options){
		func(o *Options) { o.Ops = stripescan.MaxOps + 1 },
		func(o *Options) { o.QueueDepth = 4 },
		func(o *Options) { o.BlockSize = 4096 },
	} {
		o := o
		bad(&o)
		if _, err := Run(context.Background(), o); err == nil {
			t.Errorf("options %+v accepted", o)
		}
	}
}
