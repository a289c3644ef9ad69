package probe

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// probeFile is an open, verified probe file.
type probeFile struct {
	fd          int
	dirFd       int
	path        string // for messages and results only; all access is fd-relative
	cacheBypass bool
	dioAlign    int // O_DIRECT offset/length alignment (logical sector)
	memAlign    int // O_DIRECT buffer alignment
	dev         uint64
	hdr         header
	rawIO       bool // see Options.RawIO
	created     bool // this run created the file
	filled      bool // this run wrote the file in full
	// rewrittenFrom is the old size of an existing probe file whose size
	// changed (it is written again in full); 0 otherwise.
	rewrittenFrom int64
}

func (f *probeFile) ReadAt(p []byte, off int64) (int, error) {
	if f.rawIO && rawIOSupported {
		return rawPread(f.fd, p, off)
	}
	return unix.Pread(f.fd, p, off)
}

func (f *probeFile) WriteAt(p []byte, off int64) (int, error) {
	if f.rawIO && rawIOSupported {
		return rawPwrite(f.fd, p, off)
	}
	return unix.Pwrite(f.fd, p, off)
}

func (f *probeFile) Datasync() error {
	if f.rawIO && rawIOSupported {
		return rawFdatasync(f.fd)
	}
	return unix.Fdatasync(f.fd)
}

func (f *probeFile) close() {
	if f.fd >= 0 {
		unix.Close(f.fd)
	}
	if f.dirFd >= 0 {
		unix.Close(f.dirFd)
	}
}

// openDir opens dir itself, refusing a symlink in its last component and
// anything that is not a directory. Every later access is relative to the
// returned descriptor, so renaming or swapping the path afterwards cannot
// redirect the probe.
func openDir(dir string) (int, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	switch {
	case errors.Is(err, unix.ELOOP):
		return -1, fmt.Errorf("%w: --dir %s is a symbolic link; give the real directory", ErrUnsafePath, dir)
	case errors.Is(err, unix.ENOTDIR):
		return -1, fmt.Errorf("%w: --dir %s is not a directory (or is a symbolic link to one)", ErrUnsafePath, dir)
	case err != nil:
		return -1, fmt.Errorf("open --dir %s: %w", dir, err)
	}
	return fd, nil
}

// noCacheBypassFS are file systems where O_DIRECT may be accepted but
// cannot reach a disk: everything lives in memory.
var noCacheBypassFS = map[int64]string{
	unix.TMPFS_MAGIC: "tmpfs",
	unix.RAMFS_MAGIC: "ramfs",
}

// checkFS refuses in-memory file systems unless cached I/O is allowed and
// returns whether O_DIRECT should be attempted.
func checkFS(dirFd int, dir string, allowCached bool) (tryDirect bool, err error) {
	var sfs unix.Statfs_t
	if err := unix.Fstatfs(dirFd, &sfs); err != nil {
		return false, fmt.Errorf("statfs %s: %w", dir, err)
	}
	if name, ok := noCacheBypassFS[int64(sfs.Type)]; ok {
		if !allowCached {
			return false, fmt.Errorf("%w: %s is on %s, which keeps files in memory; probe a directory on the database volume (or pass --allow-cached to measure the cache)", ErrNoCacheBypass, dir, name)
		}
		return false, nil
	}
	return true, nil
}

// checkFreeSpace refuses to grow the file system's usage by grow bytes when
// that would leave less free than o.FreeSpaceFloor.
func checkFreeSpace(dirFd int, grow int64, o Options) error {
	if grow <= 0 {
		return nil
	}
	var sfs unix.Statfs_t
	if err := unix.Fstatfs(dirFd, &sfs); err != nil {
		return fmt.Errorf("statfs %s: %w", o.Dir, err)
	}
	total := int64(sfs.Blocks) * int64(sfs.Bsize)
	avail := int64(sfs.Bavail) * int64(sfs.Bsize)
	floor := o.FreeSpaceFloor(total)
	if after := avail - grow; after < floor {
		return o.freeSpaceError(grow, after, total, floor)
	}
	return nil
}

// openProbeFile opens the probe file in dir, creating and filling it when
// needed. Nothing is created or written before every refusal check passed.
func openProbeFile(ctx context.Context, o Options) (*probeFile, error) {
	dirFd, err := openDir(o.Dir)
	if err != nil {
		return nil, err
	}
	f := &probeFile{fd: -1, dirFd: dirFd, path: joinPath(o.Dir, o.FileName)}
	ok := false
	defer func() {
		if !ok {
			f.close()
		}
	}()
	var dst unix.Stat_t
	if err := unix.Fstat(dirFd, &dst); err != nil {
		return nil, fmt.Errorf("stat %s: %w", o.Dir, err)
	}
	f.dev = dst.Dev
	tryDirect, err := checkFS(dirFd, o.Dir, o.AllowCached)
	if err != nil {
		return nil, err
	}

	var st unix.Stat_t
	err = unix.Fstatat(dirFd, o.FileName, &st, unix.AT_SYMLINK_NOFOLLOW)
	switch {
	case errors.Is(err, unix.ENOENT):
		if err := checkFreeSpace(dirFd, o.FileSize, o); err != nil {
			return nil, err
		}
		if err := f.create(o, tryDirect); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, fmt.Errorf("stat %s: %w", f.path, err)
	default:
		if err := f.openExisting(o, &st, tryDirect); err != nil {
			return nil, err
		}
	}

	if f.hdr.State != stateReady || f.hdr.FileSize != o.FileSize {
		if !f.created && f.hdr.FileSize != 0 && f.hdr.FileSize != o.FileSize {
			f.rewrittenFrom = f.hdr.FileSize
		}
		if f.hdr.FileSize != o.FileSize {
			var cur unix.Stat_t
			if err := unix.Fstat(f.fd, &cur); err != nil {
				return nil, fmt.Errorf("stat %s: %w", f.path, err)
			}
			if err := checkFreeSpace(dirFd, o.FileSize-cur.Blocks*512, o); err != nil {
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

// create makes the probe file with O_EXCL (it must not exist) and
// O_NOFOLLOW, then switches it to O_DIRECT. If the file system refuses
// O_DIRECT, the just-created empty file is removed again before refusing.
func (f *probeFile) create(o Options, tryDirect bool) error {
	fd, err := unix.Openat(f.dirFd, o.FileName, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("create %s: %w", f.path, err)
	}
	f.fd = fd
	f.created = true
	if err := f.setDirect(o, tryDirect); err != nil {
		f.removeOwn(o.FileName)
		return err
	}
	var id [16]byte
	rand.Read(id[:])
	f.hdr = header{FileSize: 0, State: stateFilling, Created: time.Now().UTC(), ID: id}
	return nil
}

// removeOwn unlinks the file we just created, only if the name still
// points at our descriptor's inode.
func (f *probeFile) removeOwn(name string) {
	var mine, there unix.Stat_t
	if unix.Fstat(f.fd, &mine) != nil || unix.Fstatat(f.dirFd, name, &there, unix.AT_SYMLINK_NOFOLLOW) != nil {
		return
	}
	if mine.Dev == there.Dev && mine.Ino == there.Ino && mine.Size == 0 {
		unix.Unlinkat(f.dirFd, name, 0)
	}
}

// openExisting opens a probe file left by an earlier run and proves it is
// ours: a regular file, not a link of any kind, on the directory's file
// system, owned by us, carrying a valid Plumbline header.
func (f *probeFile) openExisting(o Options, st *unix.Stat_t, tryDirect bool) error {
	if err := checkOwnFile(f.path, st, f.dev); err != nil {
		return err
	}
	// O_NONBLOCK: should the name be swapped for a FIFO between the stat
	// and the open, the open must not hang; the fstat below then refuses it.
	fd, err := unix.Openat(f.dirFd, o.FileName, unix.O_RDWR|unix.O_NOFOLLOW|unix.O_NOCTTY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ELOOP) {
		return fmt.Errorf("%w: %s is a symbolic link", ErrUnsafePath, f.path)
	}
	if err != nil {
		return fmt.Errorf("open %s: %w", f.path, err)
	}
	f.fd = fd
	var fst unix.Stat_t
	if err := unix.Fstat(fd, &fst); err != nil {
		return fmt.Errorf("stat %s: %w", f.path, err)
	}
	if fst.Dev != st.Dev || fst.Ino != st.Ino {
		return fmt.Errorf("%w: %s changed while being opened", ErrUnsafePath, f.path)
	}
	if err := checkOwnFile(f.path, &fst, f.dev); err != nil {
		return err
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		return fmt.Errorf("open %s: %w", f.path, err)
	}
	hdr, err := readHeader(fd)
	if err != nil {
		return fmt.Errorf("%w: %s: %v; it was not created by Plumbline, refusing to touch it", ErrForeignFile, f.path, err)
	}
	if hdr.State == stateReady && fst.Size != hdr.FileSize {
		return fmt.Errorf("%w: %s is %d bytes but its header says %d", ErrForeignFile, f.path, fst.Size, hdr.FileSize)
	}
	f.hdr = hdr
	return f.setDirect(o, tryDirect)
}

// checkOwnFile refuses anything but a regular, single-linked file of ours
// on the directory's file system.
func checkOwnFile(path string, st *unix.Stat_t, dirDev uint64) error {
	switch {
	case st.Mode&unix.S_IFMT == unix.S_IFLNK:
		return fmt.Errorf("%w: %s is a symbolic link", ErrUnsafePath, path)
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return fmt.Errorf("%w: %s is not a regular file", ErrUnsafePath, path)
	case st.Nlink != 1:
		return fmt.Errorf("%w: %s has %d hard links; a probe file has one", ErrUnsafePath, path, st.Nlink)
	case st.Dev != dirDev:
		return fmt.Errorf("%w: %s is on another file system than its directory", ErrUnsafePath, path)
	case int(st.Uid) != os.Geteuid():
		return fmt.Errorf("%w: %s belongs to uid %d, not to this agent (uid %d)", ErrForeignFile, path, st.Uid, os.Geteuid())
	case st.Size < headerFixed:
		return fmt.Errorf("%w: %s is %d bytes, too small to carry a probe header", ErrForeignFile, path, st.Size)
	}
	return nil
}

// readHeader reads the header block with a plain (buffered) read, before
// O_DIRECT is switched on.
func readHeader(fd int) (header, error) {
	b := make([]byte, headerBlock)
	n, err := unix.Pread(fd, b, 0)
	if err != nil {
		return header{}, err
	}
	return parseHeader(b[:n])
}

// setDirect switches the descriptor to O_DIRECT and learns its alignment.
func (f *probeFile) setDirect(o Options, tryDirect bool) error {
	f.dioAlign, f.memAlign = MinBlockSize, 4096
	if tryDirect {
		flags, err := unix.FcntlInt(uintptr(f.fd), unix.F_GETFL, 0)
		if err == nil {
			_, err = unix.FcntlInt(uintptr(f.fd), unix.F_SETFL, flags|unix.O_DIRECT)
		}
		switch {
		case err == nil:
			f.cacheBypass = true
		case errors.Is(err, unix.EINVAL) && o.AllowCached:
		case errors.Is(err, unix.EINVAL):
			return fmt.Errorf("%w: the file system under %s refused O_DIRECT (EINVAL); probe a directory on the database volume (or pass --allow-cached to measure the cache)", ErrNoCacheBypass, o.Dir)
		default:
			return fmt.Errorf("set O_DIRECT on %s: %w", f.path, err)
		}
	}
	if f.cacheBypass {
		var stx unix.Statx_t
		if err := unix.Statx(f.fd, "", unix.AT_EMPTY_PATH, unix.STATX_DIOALIGN, &stx); err == nil && stx.Mask&unix.STATX_DIOALIGN != 0 && stx.Dio_offset_align > 0 {
			f.dioAlign = int(stx.Dio_offset_align)
			f.memAlign = max(int(stx.Dio_mem_align), 4096)
		}
		if o.BlockSize%f.dioAlign != 0 {
			return fmt.Errorf("%w: block size %d is not a multiple of the device's direct-I/O alignment %d (its logical sector)", ErrInvalid, o.BlockSize, f.dioAlign)
		}
	}
	if o.Kind == LogWrite && o.Sync == SyncDsync {
		return f.reopenDsync(o)
	}
	return nil
}

// reopenDsync replaces the descriptor with one opened O_DSYNC (O_DSYNC can
// only be set at open time), verifying it is the same file.
func (f *probeFile) reopenDsync(o Options) error {
	flags := unix.O_RDWR | unix.O_NOFOLLOW | unix.O_NOCTTY | unix.O_NONBLOCK | unix.O_CLOEXEC | unix.O_DSYNC
	if f.cacheBypass {
		flags |= unix.O_DIRECT
	}
	fd, err := unix.Openat(f.dirFd, o.FileName, flags, 0)
	if err != nil {
		return fmt.Errorf("reopen %s O_DSYNC: %w", f.path, err)
	}
	var a, b unix.Stat_t
	if err := unix.Fstat(f.fd, &a); err != nil {
		unix.Close(fd)
		return err
	}
	if err := unix.Fstat(fd, &b); err != nil {
		unix.Close(fd)
		return err
	}
	if a.Dev != b.Dev || a.Ino != b.Ino {
		unix.Close(fd)
		return fmt.Errorf("%w: %s changed while being reopened", ErrUnsafePath, f.path)
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return err
	}
	unix.Close(f.fd)
	f.fd = fd
	return nil
}

// fill writes the whole file once: header (state filling), every byte of
// the data region with pseudo-random data at no more than o.FillRate bytes
// per second, a sync, then the header again with state ready.
func (f *probeFile) fill(ctx context.Context, o Options) error {
	f.hdr.FileSize = o.FileSize
	f.hdr.State = stateFilling
	hb := alignedBuffer(headerBlock, f.memAlign)
	f.hdr.marshalInto(hb)
	if _, err := unix.Pwrite(f.fd, hb, 0); err != nil {
		return fmt.Errorf("write header of %s: %w", f.path, err)
	}
	if err := unix.Ftruncate(f.fd, o.FileSize); err != nil {
		return fmt.Errorf("size %s: %w", f.path, err)
	}
	// Reserve the blocks up front so a filling file system fails now, not
	// half-way; not every file system supports it, and that is fine.
	_ = unix.Fallocate(f.fd, 0, 0, o.FileSize)

	const chunk = 1 << 20
	buf := alignedBuffer(chunk, f.memAlign)
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
		fillRandom(rng, buf)
		if _, err := unix.Pwrite(f.fd, buf, off); err != nil {
			return fmt.Errorf("fill %s at offset %d: %w", f.path, off, err)
		}
		o.Progress.filled(chunk)
	}
	if err := unix.Fdatasync(f.fd); err != nil {
		return fmt.Errorf("sync %s: %w", f.path, err)
	}
	f.hdr.State = stateReady
	f.filled = true
	f.hdr.marshalInto(hb)
	if _, err := unix.Pwrite(f.fd, hb, 0); err != nil {
		return fmt.Errorf("write header of %s: %w", f.path, err)
	}
	if err := unix.Fdatasync(f.fd); err != nil {
		return fmt.Errorf("sync %s: %w", f.path, err)
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
	dirFd, err := openDir(dir)
	if err != nil {
		return false, err
	}
	f := &probeFile{fd: -1, dirFd: dirFd, path: joinPath(dir, name)}
	defer f.close()
	var dst, st unix.Stat_t
	if err := unix.Fstat(dirFd, &dst); err != nil {
		return false, fmt.Errorf("stat %s: %w", dir, err)
	}
	f.dev = dst.Dev
	if err := unix.Fstatat(dirFd, name, &st, unix.AT_SYMLINK_NOFOLLOW); errors.Is(err, unix.ENOENT) {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("stat %s: %w", f.path, err)
	}
	if err := checkOwnFile(f.path, &st, f.dev); err != nil {
		return false, err
	}
	fd, err := unix.Openat(dirFd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NOCTTY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, fmt.Errorf("open %s: %w", f.path, err)
	}
	f.fd = fd
	var fst unix.Stat_t
	if err := unix.Fstat(fd, &fst); err != nil {
		return false, err
	}
	if fst.Dev != st.Dev || fst.Ino != st.Ino {
		return false, fmt.Errorf("%w: %s changed while being opened", ErrUnsafePath, f.path)
	}
	if _, err := readHeader(fd); err != nil {
		return false, fmt.Errorf("%w: %s: %v; not removing a file Plumbline did not create", ErrForeignFile, f.path, err)
	}
	// Last check right before the unlink: the name still points at the
	// inode whose header we read.
	if err := unix.Fstatat(dirFd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || st.Ino != fst.Ino || st.Dev != fst.Dev {
		return false, fmt.Errorf("%w: %s changed while being checked", ErrUnsafePath, f.path)
	}
	if err := unix.Unlinkat(dirFd, name, 0); err != nil {
		return false, fmt.Errorf("remove %s: %w", f.path, err)
	}
	return true, nil
}
