//go:build linux || windows

package probe

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"time"
)

// The probe file's life, once for every OS: open (create when missing),
// fill when needed, and Cleanup. file_linux.go and file_windows.go supply
// the directory (openDir, *probeDir), the checks that prove a file is ours
// and a handle over the open file.

// handle is what the OS-neutral code needs of an open probe file: a
// descriptor on Linux, a HANDLE on Windows.
type handle interface {
	target // ReadAt, WriteAt, Datasync
	// Allocate sets the file's size, reserving its blocks where the file
	// system can.
	Allocate(size int64) error
	// used is the space the file takes on its file system now, in bytes.
	used() (int64, error)
	// ioTarget is what measure does its I/O against; rawIO is
	// Options.RawIO (only Linux has raw system calls to offer).
	ioTarget(rawIO bool) target
	// remove deletes the file, only if its name still leads to this handle.
	remove() error
	Close() error
}

// errNoFile is openToRemove's answer when there is no probe file.
var errNoFile = errors.New("no probe file")

// fillStream is the PCG stream of the fill's random data (its seed is the
// clock): the same for every OS.
const fillStream = 0x9e3779b97f4a7c15

// fillChunk is the size of one fill write.
const fillChunk = 1 << 20

// probeFile is an open, verified probe file.
type probeFile struct {
	file        handle
	dir         *probeDir // held open while the file is
	path        string    // for messages and results only; all access is through file and dir
	memAlign    int       // buffer alignment for cache-bypassing I/O
	cacheBypass bool
	hdr         header
	created     bool // this run created the file
	filled      bool // this run wrote the file in full
	// rewrittenFrom is the old size of an existing probe file whose size
	// changed (it is written again in full); 0 otherwise.
	rewrittenFrom int64
}

func (f *probeFile) close() {
	if f.file != nil {
		f.file.Close()
	}
	f.dir.close()
}

// newHeader is the header of a file this run creates, before its fill.
func newHeader() header {
	var id [16]byte
	rand.Read(id[:])
	return header{FileSize: 0, State: stateFilling, Created: time.Now().UTC(), ID: id}
}

// checkFreeSpace refuses to grow the file system's usage by grow bytes when
// that would leave less free than o.FreeSpaceFloor.
func checkFreeSpace(d *probeDir, grow int64, o Options) error {
	if grow <= 0 {
		return nil
	}
	avail, total, err := d.freeSpace()
	if err != nil {
		return err
	}
	floor := o.FreeSpaceFloor(total)
	if after := avail - grow; after < floor {
		return o.freeSpaceError(grow, after, total, floor)
	}
	return nil
}

// openProbeFile opens the probe file in dir, creating and filling it when
// needed. Nothing is created or written before every refusal check passed.
func openProbeFile(ctx context.Context, o Options) (*probeFile, error) {
	d, err := openDir(o.Dir)
	if err != nil {
		return nil, err
	}
	f, err := d.openFile(o, joinPath(o.Dir, o.FileName))
	if err != nil {
		d.close()
		return nil, err
	}
	if f.hdr.State != stateReady || f.hdr.FileSize != o.FileSize {
		if err := f.prepare(ctx, o); err != nil {
			f.close()
			return nil, err
		}
	}
	return f, nil
}

// prepare (re)writes a file that is new, half-filled or of another size,
// after checking the free-space floor for what it grows by.
func (f *probeFile) prepare(ctx context.Context, o Options) error {
	if !f.created && f.hdr.FileSize != 0 && f.hdr.FileSize != o.FileSize {
		f.rewrittenFrom = f.hdr.FileSize
	}
	if f.hdr.FileSize != o.FileSize {
		used, err := f.file.used()
		if err != nil {
			return err
		}
		if err := checkFreeSpace(f.dir, o.FileSize-used, o); err != nil {
			return err
		}
	}
	return f.fill(ctx, o)
}

// fill writes the whole file once: header (state filling), every byte of
// the data region with pseudo-random data at no more than o.FillRate bytes
// per second, a sync, then the header again with state ready.
func (f *probeFile) fill(ctx context.Context, o Options) error {
	f.hdr.FileSize = o.FileSize
	f.hdr.State = stateFilling
	hb, freeHB, err := newIOBuffer(headerBlock, f.memAlign)
	if err != nil {
		return err
	}
	defer freeHB()
	if err := f.writeHeader(hb); err != nil {
		return err
	}
	if err := f.file.Allocate(o.FileSize); err != nil {
		return fmt.Errorf("size %s: %w", f.path, err)
	}
	buf, freeBuf, err := newIOBuffer(fillChunk, f.memAlign)
	if err != nil {
		return err
	}
	defer freeBuf()
	if err := f.fillData(ctx, o, buf); err != nil {
		return err
	}
	if err := f.file.Datasync(); err != nil {
		return fmt.Errorf("sync %s: %w", f.path, err)
	}
	f.hdr.State = stateReady
	f.filled = true
	if err := f.writeHeader(hb); err != nil {
		return err
	}
	if err := f.file.Datasync(); err != nil {
		return fmt.Errorf("sync %s: %w", f.path, err)
	}
	return nil
}

// writeHeader writes f.hdr through the header-block buffer hb.
func (f *probeFile) writeHeader(hb []byte) error {
	f.hdr.marshalInto(hb)
	if _, err := f.file.WriteAt(hb, 0); err != nil {
		return fmt.Errorf("write header of %s: %w", f.path, err)
	}
	return nil
}

// fillData writes the data region with pseudo-random chunks, paced to
// o.FillRate.
func (f *probeFile) fillData(ctx context.Context, o Options, buf []byte) error {
	rng := mrand.New(mrand.NewPCG(uint64(time.Now().UnixNano()), fillStream))
	pace := newPacer(0)
	if o.FillRate > 0 {
		pace = newPacer(float64(o.FillRate) / fillChunk)
	}
	o.Progress.startFill(o.FileSize-HeaderSize, f.rewrittenFrom)
	for off := int64(HeaderSize); off < o.FileSize; off += fillChunk {
		if err := pace.wait(ctx); err != nil {
			return fmt.Errorf("fill %s interrupted: %w", f.path, err)
		}
		fillRandom(rng, buf)
		if _, err := f.file.WriteAt(buf, off); err != nil {
			return fmt.Errorf("fill %s at offset %d: %w", f.path, off, err)
		}
		o.Progress.filled(fillChunk)
	}
	return nil
}

// Cleanup removes the probe file from dir, only if it carries the Plumbline
// header. A missing file is not an error; it reports whether one was removed.
func Cleanup(dir, name string) (bool, error) {
	if name == "" {
		name = DefaultFileName
	}
	if err := checkFileName(name); err != nil {
		return false, err
	}
	d, err := openDir(dir)
	if err != nil {
		return false, err
	}
	defer d.close()
	path := joinPath(dir, name)
	h, err := d.openToRemove(name, path)
	if errors.Is(err, errNoFile) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer h.Close()
	if err := h.remove(); err != nil {
		return false, err
	}
	return true, nil
}
