package probe

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/windows"
)

// Windows probe file: opened FILE_FLAG_NO_BUFFERING | FILE_FLAG_WRITE_THROUGH
// (the cache bypass and write-through of O_DIRECT | O_DSYNC) and
// FILE_FLAG_OVERLAPPED, so that queue-depth workers issue concurrent I/O
// on one handle (a synchronous handle serializes them in the I/O manager).
// FILE_FLAG_OPEN_REPARSE_POINT opens a symbolic link, junction or other
// reparse point as itself, which the checks then refuse.
const probeFileFlags = windows.FILE_ATTRIBUTE_NORMAL | windows.FILE_FLAG_NO_BUFFERING |
	windows.FILE_FLAG_WRITE_THROUGH | windows.FILE_FLAG_OVERLAPPED | windows.FILE_FLAG_OPEN_REPARSE_POINT

// fileStorageInfo is FILE_STORAGE_INFO (28 bytes), from
// GetFileInformationByHandleEx(FileStorageInfo).
type fileStorageInfo struct {
	LogicalBytesPerSector                                 uint32
	PhysicalBytesPerSectorForAtomicity                    uint32
	PhysicalBytesPerSectorForPerformance                  uint32
	FileSystemEffectivePhysicalBytesPerSectorForAtomicity uint32
	Flags                                                 uint32
	ByteOffsetForSectorAlignment                          uint32
	ByteOffsetForPartitionAlignment                       uint32
}

// fileEndOfFileInfo is FILE_END_OF_FILE_INFO.
type fileEndOfFileInfo struct{ EndOfFile int64 }

// fileDispositionInfo is FILE_DISPOSITION_INFO.
type fileDispositionInfo struct{ DeleteFile uint8 }

// probeFile is an open, verified probe file.
type probeFile struct {
	h           windows.Handle
	dir         *probeDir
	path        string
	sector      int // logical sector: offsets and lengths are multiples of it
	memAlign    int // buffer alignment
	cacheBypass bool
	hdr         header
	created     bool
	filled      bool
	// rewrittenFrom is the old size of an existing probe file whose size
	// changed (it is written again in full); 0 otherwise.
	rewrittenFrom int64

	mu     sync.Mutex
	events []windows.Handle // free manual-reset events for overlapped I/O
	all    []windows.Handle
}

var _ target = (*probeFile)(nil)

// probeDir is the probe directory, held open without FILE_SHARE_DELETE so
// it cannot be renamed or removed while the probe runs.
type probeDir struct {
	h      windows.Handle
	path   string
	serial uint32 // volume serial number: the probe file must be on it
}

func (d *probeDir) close() {
	if d != nil && d.h != windows.InvalidHandle {
		windows.CloseHandle(d.h)
		d.h = windows.InvalidHandle
	}
}

// openDir opens dir itself and refuses a reparse point (symbolic link,
// junction, mount point) or anything that is not a directory.
func openDir(dir string) (*probeDir, error) {
	p16, err := windows.UTF16PtrFromString(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: --dir %q: %v", ErrInvalid, dir, err)
	}
	h, err := windows.CreateFile(p16, windows.FILE_READ_ATTRIBUTES, windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE, nil,
		windows.OPEN_EXISTING, windows.FILE_FLAG_BACKUP_SEMANTICS|windows.FILE_FLAG_OPEN_REPARSE_POINT, 0)
	if err != nil {
		return nil, fmt.Errorf("open --dir %s: %w", dir, err)
	}
	d := &probeDir{h: h, path: dir}
	var fi windows.ByHandleFileInformation
	if err := windows.GetFileInformationByHandle(h, &fi); err != nil {
		d.close()
		return nil, fmt.Errorf("stat --dir %s: %w", dir, err)
	}
	switch {
	case fi.FileAttributes&windows.FILE_ATTRIBUTE_REPARSE_POINT != 0:
		d.close()
		return nil, fmt.Errorf("%w: --dir %s is a reparse point (symbolic link, junction or mount point); give the real directory", ErrUnsafePath, dir)
	case fi.FileAttributes&windows.FILE_ATTRIBUTE_DIRECTORY == 0:
		d.close()
		return nil, fmt.Errorf("%w: --dir %s is not a directory", ErrUnsafePath, dir)
	}
	d.serial = fi.VolumeSerialNumber
	return d, nil
}

// checkFreeSpace refuses to grow the volume's usage by grow bytes when that
// would leave less free than the floor (GetDiskFreeSpaceEx, as the caller sees it).
func checkFreeSpace(grow int64, o Options) error {
	if grow <= 0 {
		return nil
	}
	p16, err := windows.UTF16PtrFromString(o.Dir)
	if err != nil {
		return err
	}
	var availCaller, total, free uint64
	if err := windows.GetDiskFreeSpaceEx(p16, &availCaller, &total, &free); err != nil {
		return fmt.Errorf("GetDiskFreeSpaceEx %s: %w", o.Dir, err)
	}
	floor := o.FreeSpaceFloor(int64(total))
	if after := int64(availCaller) - grow; after < floor {
		return o.freeSpaceError(grow, after, int64(total), floor)
	}
	return nil
}

// sectorBuffer is a size-byte buffer from VirtualAlloc: page-aligned, so
// aligned to every sector size, and outside the Go heap.
type sectorBuffer struct {
	addr uintptr
	b    []byte
}

func newSectorBuffer(size int) (*sectorBuffer, error) {
	addr, err := windows.VirtualAlloc(0, uintptr(size), windows.MEM_COMMIT|windows.MEM_RESERVE, windows.PAGE_READWRITE)
	if err != nil {
		return nil, fmt.Errorf("VirtualAlloc %d bytes: %w", size, err)
	}
	return &sectorBuffer{addr: addr, b: unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(nil), addr)), size)}, nil
}

func (s *sectorBuffer) free() {
	if s != nil && s.addr != 0 {
		windows.VirtualFree(s.addr, 0, windows.MEM_RELEASE)
		s.addr, s.b = 0, nil
	}
}

func (f *probeFile) event() (windows.Handle, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n := len(f.events); n > 0 {
		ev := f.events[n-1]
		f.events = f.events[:n-1]
		return ev, nil
	}
	ev, err := windows.CreateEvent(nil, 1, 0, nil)
	if err != nil {
		return 0, err
	}
	f.all = append(f.all, ev)
	return ev, nil
}

func (f *probeFile) putEvent(ev windows.Handle) {
	f.mu.Lock()
	f.events = append(f.events, ev)
	f.mu.Unlock()
}

// rw issues one overlapped read or write at off and waits for it.
func (f *probeFile) rw(write bool, p []byte, off int64) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if len(p)%f.sector != 0 || off%int64(f.sector) != 0 || int(addrOf(p))%f.sector != 0 {
		return 0, fmt.Errorf("%w: unaligned I/O (%d bytes at %d) on a FILE_FLAG_NO_BUFFERING handle with %d-byte sectors", ErrInvalid, len(p), off, f.sector)
	}
	ev, err := f.event()
	if err != nil {
		return 0, err
	}
	defer f.putEvent(ev)
	windows.ResetEvent(ev)
	ov := windows.Overlapped{Offset: uint32(off), OffsetHigh: uint32(off >> 32), HEvent: ev}
	var n uint32
	if write {
		err = windows.WriteFile(f.h, p, &n, &ov)
	} else {
		err = windows.ReadFile(f.h, p, &n, &ov)
	}
	if errors.Is(err, windows.ERROR_IO_PENDING) {
		err = windows.GetOverlappedResult(f.h, &ov, &n, true)
	}
	return int(n), err
}

func (f *probeFile) ReadAt(p []byte, off int64) (int, error)  { return f.rw(false, p, off) }
func (f *probeFile) WriteAt(p []byte, off int64) (int, error) { return f.rw(true, p, off) }

// Datasync flushes the file's data and metadata (FlushFileBuffers); with
// FILE_FLAG_WRITE_THROUGH every write is already durable when it returns.
func (f *probeFile) Datasync() error { return windows.FlushFileBuffers(f.h) }

func (f *probeFile) close() {
	if f.h != windows.InvalidHandle {
		windows.CloseHandle(f.h)
		f.h = windows.InvalidHandle
	}
	for _, ev := range f.all {
		windows.CloseHandle(ev)
	}
	f.all, f.events = nil, nil
	f.dir.close()
}

// openProbeFile opens the probe file in dir, creating and filling it when
// needed. Nothing is created or written before every refusal check passed.
func openProbeFile(ctx context.Context, o Options) (*probeFile, error) {
	dir, err := openDir(o.Dir)
	if err != nil {
		return nil, err
	}
	f := &probeFile{h: windows.InvalidHandle, dir: dir, path: joinPath(o.Dir, o.FileName), cacheBypass: true}
	ok := false
	defer func() {
		if !ok {
			f.close()
		}
	}()
	p16, err := windows.UTF16PtrFromString(f.path)
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %v", ErrInvalid, f.path, err)
	}
	h, err := windows.CreateFile(p16, windows.GENERIC_READ|windows.GENERIC_WRITE, windows.FILE_SHARE_READ, nil, windows.OPEN_EXISTING, probeFileFlags, 0)
	switch {
	case errors.Is(err, windows.ERROR_FILE_NOT_FOUND):
		if err := checkFreeSpace(o.FileSize, o); err != nil {
			return nil, err
		}
		h, err = windows.CreateFile(p16, windows.GENERIC_READ|windows.GENERIC_WRITE|windows.DELETE, windows.FILE_SHARE_READ, nil, windows.CREATE_NEW, probeFileFlags, 0)
		if err != nil {
			return nil, fmt.Errorf("create %s: %w", f.path, err)
		}
		f.h, f.created = h, true
		if err := f.learnSectors(o); err != nil {
			f.deleteOwn()
			return nil, err
		}
		var id [16]byte
		rand.Read(id[:])
		f.hdr = header{State: stateFilling, Created: time.Now().UTC(), ID: id}
	case err != nil:
		return nil, fmt.Errorf("open %s: %w", f.path, err)
	default:
		f.h = h
		if err := f.checkExisting(o); err != nil {
			return nil, err
		}
	}
	if f.hdr.State != stateReady || f.hdr.FileSize != o.FileSize {
		if !f.created && f.hdr.FileSize != 0 && f.hdr.FileSize != o.FileSize {
			f.rewrittenFrom = f.hdr.FileSize
		}
		if f.hdr.FileSize != o.FileSize {
			size, err := f.size()
			if err != nil {
				return nil, err
			}
			if err := checkFreeSpace(o.FileSize-size, o); err != nil {
				return nil, err
			}
		}
		if err := f.fill(ctx, o); err != nil {
			return nil, err
		}
	}
	ok = true
	return f, nil
}

func (f *probeFile) info() (windows.ByHandleFileInformation, error) {
	var fi windows.ByHandleFileInformation
	err := windows.GetFileInformationByHandle(f.h, &fi)
	if err != nil {
		err = fmt.Errorf("stat %s: %w", f.path, err)
	}
	return fi, err
}

func (f *probeFile) size() (int64, error) {
	fi, err := f.info()
	return int64(fi.FileSizeHigh)<<32 | int64(fi.FileSizeLow), err
}

// checkExisting proves an existing file is ours: a regular file, no
// reparse point, one link, on the directory's volume, carrying a valid
// Plumbline header. (Ownership is not compared: Windows files carry ACLs,
// and the probe directory's ACL is the operator's to set.)
func (f *probeFile) checkExisting(o Options) error {
	fi, err := f.info()
	if err != nil {
		return err
	}
	size := int64(fi.FileSizeHigh)<<32 | int64(fi.FileSizeLow)
	switch {
	case fi.FileAttributes&windows.FILE_ATTRIBUTE_REPARSE_POINT != 0:
		return fmt.Errorf("%w: %s is a reparse point (symbolic link or junction)", ErrUnsafePath, f.path)
	case fi.FileAttributes&windows.FILE_ATTRIBUTE_DIRECTORY != 0:
		return fmt.Errorf("%w: %s is not a regular file", ErrUnsafePath, f.path)
	case fi.NumberOfLinks != 1:
		return fmt.Errorf("%w: %s has %d hard links; a probe file has one", ErrUnsafePath, f.path, fi.NumberOfLinks)
	case fi.VolumeSerialNumber != f.dir.serial:
		return fmt.Errorf("%w: %s is on another volume than its directory", ErrUnsafePath, f.path)
	case size < headerFixed:
		return fmt.Errorf("%w: %s is %d bytes, too small to carry a probe header", ErrForeignFile, f.path, size)
	}
	if err := f.learnSectors(o); err != nil {
		return err
	}
	hdr, err := f.readHeader()
	if err != nil {
		return fmt.Errorf("%w: %s: %v; it was not created by Plumbline, refusing to touch it", ErrForeignFile, f.path, err)
	}
	if hdr.State == stateReady && size != hdr.FileSize {
		return fmt.Errorf("%w: %s is %d bytes but its header says %d", ErrForeignFile, f.path, size, hdr.FileSize)
	}
	f.hdr = hdr
	return nil
}

func (f *probeFile) readHeader() (header, error) {
	buf, err := newSectorBuffer(headerBlock)
	if err != nil {
		return header{}, err
	}
	defer buf.free()
	n, err := f.ReadAt(buf.b, 0)
	if err != nil && !errors.Is(err, windows.ERROR_HANDLE_EOF) {
		return header{}, err
	}
	return parseHeader(buf.b[:n])
}

// learnSectors reads the volume's sector sizes (FILE_STORAGE_INFO) and
// checks the block size against the logical sector.
func (f *probeFile) learnSectors(o Options) error {
	f.sector, f.memAlign = 4096, 4096
	var si fileStorageInfo
	if err := windows.GetFileInformationByHandleEx(f.h, windows.FileStorageInfo, (*byte)(unsafe.Pointer(&si)), uint32(unsafe.Sizeof(si))); err == nil && si.LogicalBytesPerSector >= 512 {
		f.sector = int(si.LogicalBytesPerSector)
		f.memAlign = max(4096, int(si.PhysicalBytesPerSectorForPerformance))
	}
	if o.BlockSize%f.sector != 0 {
		return fmt.Errorf("%w: block size %d is not a multiple of the volume's logical sector %d (FILE_FLAG_NO_BUFFERING needs it)", ErrInvalid, o.BlockSize, f.sector)
	}
	return nil
}

// deleteOwn removes the file this run just created, through its handle.
func (f *probeFile) deleteOwn() {
	di := fileDispositionInfo{DeleteFile: 1}
	windows.SetFileInformationByHandle(f.h, windows.FileDispositionInfo, (*byte)(unsafe.Pointer(&di)), uint32(unsafe.Sizeof(di)))
}

// fill writes the whole file once: header (state filling), every byte of
// the data region with pseudo-random data at no more than o.FillRate bytes
// per second, a flush, then the header again with state ready.
func (f *probeFile) fill(ctx context.Context, o Options) error {
	f.hdr.FileSize = o.FileSize
	f.hdr.State = stateFilling
	hb, err := newSectorBuffer(headerBlock)
	if err != nil {
		return err
	}
	defer hb.free()
	f.hdr.marshalInto(hb.b)
	if _, err := f.WriteAt(hb.b, 0); err != nil {
		return fmt.Errorf("write header of %s: %w", f.path, err)
	}
	eof := fileEndOfFileInfo{EndOfFile: o.FileSize}
	if err := windows.SetFileInformationByHandle(f.h, windows.FileEndOfFileInfo, (*byte)(unsafe.Pointer(&eof)), uint32(unsafe.Sizeof(eof))); err != nil {
		return fmt.Errorf("size %s: %w", f.path, err)
	}
	const chunk = 1 << 20
	buf, err := newSectorBuffer(chunk)
	if err != nil {
		return err
	}
	defer buf.free()
	rng := mrand.New(mrand.NewPCG(uint64(time.Now().UnixNano()), 0x9e3779b97f4a7c15))
	pace := newPacer(0)
	if o.FillRate > 0 {
		pace = newPacer(float64(o.FillRate) / chunk)
	}
	o.Progress.startFill(o.FileSize-HeaderSize, f.rewrittenFrom)
	for off := int64(HeaderSize); off < o.FileSize; off += chunk {
		if err := pace.wait(ctx); err != nil {
			return fmt.Errorf("fill %s interrupted: %w", f.path, err)
		}
		fillRandom(rng, buf.b)
		if _, err := f.WriteAt(buf.b, off); err != nil {
			return fmt.Errorf("fill %s at offset %d: %w", f.path, off, err)
		}
		o.Progress.filled(chunk)
	}
	if err := f.Datasync(); err != nil {
		return fmt.Errorf("flush %s: %w", f.path, err)
	}
	f.hdr.State = stateReady
	f.filled = true
	f.hdr.marshalInto(hb.b)
	if _, err := f.WriteAt(hb.b, 0); err != nil {
		return fmt.Errorf("write header of %s: %w", f.path, err)
	}
	if err := f.Datasync(); err != nil {
		return fmt.Errorf("flush %s: %w", f.path, err)
	}
	return nil
}

// Cleanup removes the probe file from dir, only if it carries the Plumbline
// header. The file is deleted through the handle whose header was read, so
// a name swapped in between cannot be removed instead. A missing file is
// not an error; it reports whether one was removed.
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
	f := &probeFile{h: windows.InvalidHandle, dir: d, path: joinPath(dir, name)}
	defer f.close()
	p16, err := windows.UTF16PtrFromString(f.path)
	if err != nil {
		return false, fmt.Errorf("%w: %q: %v", ErrInvalid, f.path, err)
	}
	h, err := windows.CreateFile(p16, windows.GENERIC_READ|windows.DELETE, windows.FILE_SHARE_READ, nil, windows.OPEN_EXISTING, probeFileFlags, 0)
	if errors.Is(err, windows.ERROR_FILE_NOT_FOUND) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("open %s: %w", f.path, err)
	}
	f.h = h
	o := Options{BlockSize: 4096}
	if err := f.checkExisting(o); err != nil {
		if errors.Is(err, ErrInvalid) {
			return false, err
		}
		return false, fmt.Errorf("%w; not removing it", err)
	}
	di := fileDispositionInfo{DeleteFile: 1}
	if err := windows.SetFileInformationByHandle(f.h, windows.FileDispositionInfo, (*byte)(unsafe.Pointer(&di)), uint32(unsafe.Sizeof(di))); err != nil {
		return false, fmt.Errorf("remove %s: %w", f.path, err)
	}
	return true, nil
}
