package probe

import (
	"errors"
	"fmt"
	"sync"
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

// winFile is the probe file's overlapped HANDLE.
type winFile struct {
	h        windows.Handle
	path     string
	sector   int // logical sector: offsets and lengths are multiples of it
	memAlign int // buffer alignment

	mu     sync.Mutex
	events []windows.Handle // free manual-reset events for overlapped I/O
	all    []windows.Handle
}

var _ handle = (*winFile)(nil)

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

// freeSpace is what GetDiskFreeSpaceEx says of the directory's volume:
// bytes available to the caller and in total.
func (d *probeDir) freeSpace() (avail, total int64, err error) {
	p16, err := windows.UTF16PtrFromString(d.path)
	if err != nil {
		return 0, 0, err
	}
	var availCaller, all, free uint64
	if err := windows.GetDiskFreeSpaceEx(p16, &availCaller, &all, &free); err != nil {
		return 0, 0, fmt.Errorf("GetDiskFreeSpaceEx %s: %w", d.path, err)
	}
	return int64(availCaller), int64(all), nil
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

// newIOBuffer is a size-byte sectorBuffer (page-aligned, so align is met)
// and the function that frees it.
func newIOBuffer(size, _ int) ([]byte, func(), error) {
	sb, err := newSectorBuffer(size)
	if err != nil {
		return nil, nil, err
	}
	return sb.b, sb.free, nil
}

func (f *winFile) event() (windows.Handle, error) {
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

func (f *winFile) putEvent(ev windows.Handle) {
	f.mu.Lock()
	f.events = append(f.events, ev)
	f.mu.Unlock()
}

// rw issues one overlapped read or write at off and waits for it.
func (f *winFile) rw(write bool, p []byte, off int64) (int, error) {
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

func (f *winFile) ReadAt(p []byte, off int64) (int, error)  { return f.rw(false, p, off) }
func (f *winFile) WriteAt(p []byte, off int64) (int, error) { return f.rw(true, p, off) }

// Datasync flushes the file's data and metadata (FlushFileBuffers); with
// FILE_FLAG_WRITE_THROUGH every write is already durable when it returns.
func (f *winFile) Datasync() error { return windows.FlushFileBuffers(f.h) }

// Allocate sets the end of file (FILE_END_OF_FILE_INFO).
func (f *winFile) Allocate(size int64) error {
	eof := fileEndOfFileInfo{EndOfFile: size}
	return windows.SetFileInformationByHandle(f.h, windows.FileEndOfFileInfo, (*byte)(unsafe.Pointer(&eof)), uint32(unsafe.Sizeof(eof)))
}

func (f *winFile) used() (int64, error) {
	fi, err := f.info()
	return int64(fi.FileSizeHigh)<<32 | int64(fi.FileSizeLow), err
}

// ioTarget is the handle itself: Options.RawIO is Linux's.
func (f *winFile) ioTarget(bool) target { return f }

// remove deletes the file through its handle (FILE_DISPOSITION_INFO), so a
// name swapped in meanwhile cannot be removed instead.
func (f *winFile) remove() error {
	di := fileDispositionInfo{DeleteFile: 1}
	if err := windows.SetFileInformationByHandle(f.h, windows.FileDispositionInfo, (*byte)(unsafe.Pointer(&di)), uint32(unsafe.Sizeof(di))); err != nil {
		return fmt.Errorf("remove %s: %w", f.path, err)
	}
	return nil
}

func (f *winFile) Close() error {
	var err error
	if f.h != windows.InvalidHandle {
		err = windows.CloseHandle(f.h)
		f.h = windows.InvalidHandle
	}
	for _, ev := range f.all {
		windows.CloseHandle(ev)
	}
	f.all, f.events = nil, nil
	return err
}

// openFile opens the probe file in d, or creates it when there is none
// (after checking the free-space floor for it). Nothing is created before
// every refusal check passed.
func (d *probeDir) openFile(o Options, path string) (*probeFile, error) {
	p16, err := windows.UTF16PtrFromString(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %v", ErrInvalid, path, err)
	}
	f := &probeFile{dir: d, path: path}
	w := &winFile{h: windows.InvalidHandle, path: path}
	h, err := windows.CreateFile(p16, windows.GENERIC_READ|windows.GENERIC_WRITE, windows.FILE_SHARE_READ, nil, windows.OPEN_EXISTING, probeFileFlags, 0)
	switch {
	case errors.Is(err, windows.ERROR_FILE_NOT_FOUND):
		if err := checkFreeSpace(d, o.FileSize, o); err != nil {
			return nil, err
		}
		h, err = windows.CreateFile(p16, windows.GENERIC_READ|windows.GENERIC_WRITE|windows.DELETE, windows.FILE_SHARE_READ, nil, windows.CREATE_NEW, probeFileFlags, 0)
		if err != nil {
			return nil, fmt.Errorf("create %s: %w", path, err)
		}
		w.h, f.created = h, true
		if err := w.learnSectors(o); err != nil {
			w.deleteNew()
			w.Close()
			return nil, err
		}
		f.hdr = newHeader()
	case err != nil:
		return nil, fmt.Errorf("open %s: %w", path, err)
	default:
		w.h = h
		hdr, err := w.checkExisting(o, d)
		if err != nil {
			w.Close()
			return nil, err
		}
		f.hdr = hdr
	}
	f.file, f.memAlign = w, w.memAlign
	f.cacheBypass = w.modeBypassesCache()
	return f, nil
}

// modeBypassesCache asks Windows whether the open handle really has
// FILE_NO_INTERMEDIATE_BUFFERING (handleBypassesCache).
func (f *winFile) modeBypassesCache() bool {
	var mode uint32
	var iosb windows.IO_STATUS_BLOCK
	err := windows.NtQueryInformationFile(f.h, &iosb, (*byte)(unsafe.Pointer(&mode)), uint32(unsafe.Sizeof(mode)), fileModeInformationClass)
	return handleBypassesCache(mode, err)
}

func (f *winFile) info() (windows.ByHandleFileInformation, error) {
	var fi windows.ByHandleFileInformation
	err := windows.GetFileInformationByHandle(f.h, &fi)
	if err != nil {
		err = fmt.Errorf("stat %s: %w", f.path, err)
	}
	return fi, err
}

// checkExisting proves an existing file is ours: a regular file, no
// reparse point, one link, on the directory's volume, carrying a valid
// Plumbline header, which it returns. (Ownership is not compared: Windows
// files carry ACLs, and the probe directory's ACL is the operator's to set.)
func (f *winFile) checkExisting(o Options, d *probeDir) (header, error) {
	fi, err := f.info()
	if err != nil {
		return header{}, err
	}
	size := int64(fi.FileSizeHigh)<<32 | int64(fi.FileSizeLow)
	switch {
	case fi.FileAttributes&windows.FILE_ATTRIBUTE_REPARSE_POINT != 0:
		return header{}, fmt.Errorf("%w: %s is a reparse point (symbolic link or junction)", ErrUnsafePath, f.path)
	case fi.FileAttributes&windows.FILE_ATTRIBUTE_DIRECTORY != 0:
		return header{}, fmt.Errorf("%w: %s is not a regular file", ErrUnsafePath, f.path)
	case fi.NumberOfLinks != 1:
		return header{}, fmt.Errorf("%w: %s has %d hard links; a probe file has one", ErrUnsafePath, f.path, fi.NumberOfLinks)
	case fi.VolumeSerialNumber != d.serial:
		return header{}, fmt.Errorf("%w: %s is on another volume than its directory", ErrUnsafePath, f.path)
	case size < headerFixed:
		return header{}, fmt.Errorf("%w: %s is %d bytes, too small to carry a probe header", ErrForeignFile, f.path, size)
	}
	if err := f.learnSectors(o); err != nil {
		return header{}, err
	}
	hdr, err := f.readHeader()
	if err != nil {
		return header{}, fmt.Errorf("%w: %s: %v; it was not created by Plumbline, refusing to touch it", ErrForeignFile, f.path, err)
	}
	if hdr.State == stateReady && size != hdr.FileSize {
		return header{}, fmt.Errorf("%w: %s is %d bytes but its header says %d", ErrForeignFile, f.path, size, hdr.FileSize)
	}
	return hdr, nil
}

func (f *winFile) readHeader() (header, error) {
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
func (f *winFile) learnSectors(o Options) error {
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

// deleteNew removes the file this run just created, through its handle.
func (f *winFile) deleteNew() { _ = f.remove() }

// openToRemove opens the probe file name for Cleanup and proves it is ours
// (errNoFile: there is none).
func (d *probeDir) openToRemove(name, path string) (handle, error) {
	p16, err := windows.UTF16PtrFromString(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %v", ErrInvalid, path, err)
	}
	h, err := windows.CreateFile(p16, windows.GENERIC_READ|windows.DELETE, windows.FILE_SHARE_READ, nil, windows.OPEN_EXISTING, probeFileFlags, 0)
	if errors.Is(err, windows.ERROR_FILE_NOT_FOUND) {
		return nil, errNoFile
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	w := &winFile{h: h, path: path}
	if _, err := w.checkExisting(Options{BlockSize: 4096}, d); err != nil {
		w.Close()
		if errors.Is(err, ErrInvalid) {
			return nil, err
		}
		return nil, fmt.Errorf("%w; not removing it", err)
	}
	return w, nil
}
