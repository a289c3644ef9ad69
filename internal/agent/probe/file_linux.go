package probe

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// probeDir is the probe directory, held open: every access to the probe
// file is relative to its descriptor.
type probeDir struct {
	fd   int
	path string
	dev  uint64 // st_dev: the file system (and device) the directory is on
}

func (d *probeDir) close() {
	if d != nil && d.fd >= 0 {
		unix.Close(d.fd)
		d.fd = -1
	}
}

// openDir opens dir itself, refusing a symlink in its last component and
// anything that is not a directory. Every later access is relative to the
// returned descriptor, so renaming or swapping the path afterwards cannot
// redirect the probe.
func openDir(dir string) (*probeDir, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	switch {
	case errors.Is(err, unix.ELOOP):
		return nil, fmt.Errorf("%w: --dir %s is a symbolic link; give the real directory", ErrUnsafePath, dir)
	case errors.Is(err, unix.ENOTDIR):
		return nil, fmt.Errorf("%w: --dir %s is not a directory (or is a symbolic link to one)", ErrUnsafePath, dir)
	case err != nil:
		return nil, fmt.Errorf("open --dir %s: %w", dir, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("stat --dir %s: %w", dir, err)
	}
	return &probeDir{fd: fd, path: dir, dev: st.Dev}, nil
}

// freeSpace is what statfs says of the directory's file system: bytes
// available to us and in total.
func (d *probeDir) freeSpace() (avail, total int64, err error) {
	var sfs unix.Statfs_t
	if err := unix.Fstatfs(d.fd, &sfs); err != nil {
		return 0, 0, fmt.Errorf("statfs %s: %w", d.path, err)
	}
	return int64(sfs.Bavail) * int64(sfs.Bsize), int64(sfs.Blocks) * int64(sfs.Bsize), nil
}

// fdFile is the probe file's descriptor.
type fdFile struct {
	fd   int
	dir  *probeDir // not owned: probeFile closes it
	name string    // the file's name in dir
	path string    // for messages
}

var _ handle = (*fdFile)(nil)

func (f *fdFile) ReadAt(p []byte, off int64) (int, error)  { return unix.Pread(f.fd, p, off) }
func (f *fdFile) WriteAt(p []byte, off int64) (int, error) { return unix.Pwrite(f.fd, p, off) }
func (f *fdFile) Datasync() error                          { return unix.Fdatasync(f.fd) }

// Allocate sizes the file and reserves its blocks up front, so that a
// filling file system fails now, not half-way; not every file system
// supports the reservation, and that is fine.
func (f *fdFile) Allocate(size int64) error {
	if err := unix.Ftruncate(f.fd, size); err != nil {
		return err
	}
	_ = unix.Fallocate(f.fd, 0, 0, size)
	return nil
}

func (f *fdFile) used() (int64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(f.fd, &st); err != nil {
		return 0, fmt.Errorf("stat %s: %w", f.path, err)
	}
	return st.Blocks * 512, nil
}

// ioTarget issues the probe's I/O as raw system calls when rawIO is set
// and the platform has them (Options.RawIO).
func (f *fdFile) ioTarget(rawIO bool) target {
	if rawIO && rawIOSupported {
		return rawFile{fd: f.fd}
	}
	return f
}

func (f *fdFile) Close() error {
	if f.fd < 0 {
		return nil
	}
	err := unix.Close(f.fd)
	f.fd = -1
	return err
}

// rawFile is the probe file's descriptor used with raw system calls.
type rawFile struct{ fd int }

func (r rawFile) ReadAt(p []byte, off int64) (int, error)  { return rawPread(r.fd, p, off) }
func (r rawFile) WriteAt(p []byte, off int64) (int, error) { return rawPwrite(r.fd, p, off) }
func (r rawFile) Datasync() error                          { return rawFdatasync(r.fd) }

// newIOBuffer is a size-byte buffer aligned to align, from the Go heap
// (which does not move objects); it needs no freeing.
func newIOBuffer(size, align int) ([]byte, func(), error) {
	return alignedBuffer(size, align), func() {}, nil
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

// openFile opens the probe file in d, or creates it when there is none
// (after checking the free-space floor for it). Nothing is created before
// every refusal check passed.
func (d *probeDir) openFile(o Options, path string) (*probeFile, error) {
	tryDirect, err := checkFS(d.fd, o.Dir, o.AllowCached)
	if err != nil {
		return nil, err
	}
	f := &probeFile{dir: d, path: path}
	var st unix.Stat_t
	err = unix.Fstatat(d.fd, o.FileName, &st, unix.AT_SYMLINK_NOFOLLOW)
	switch {
	case errors.Is(err, unix.ENOENT):
		if err := checkFreeSpace(d, o.FileSize, o); err != nil {
			return nil, err
		}
		err = d.create(f, o, tryDirect)
	case err != nil:
		return nil, fmt.Errorf("stat %s: %w", path, err)
	default:
		err = d.openExisting(f, o, &st, tryDirect)
	}
	if err != nil {
		if f.file != nil {
			f.file.Close()
		}
		return nil, err
	}
	return f, nil
}

// create makes the probe file with O_EXCL (it must not exist) and
// O_NOFOLLOW, then switches it to O_DIRECT. If the file system refuses
// O_DIRECT, the just-created empty file is removed again before refusing.
func (d *probeDir) create(f *probeFile, o Options, tryDirect bool) error {
	fd, err := unix.Openat(d.fd, o.FileName, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("create %s: %w", f.path, err)
	}
	h := &fdFile{fd: fd, dir: d, name: o.FileName, path: f.path}
	f.file, f.created = h, true
	if err := h.setDirect(f, o, tryDirect); err != nil {
		h.removeNew()
		return err
	}
	f.hdr = newHeader()
	return nil
}

// removeNew unlinks the file we just created, only if the name still
// points at our descriptor's inode.
func (f *fdFile) removeNew() {
	var mine, there unix.Stat_t
	if unix.Fstat(f.fd, &mine) != nil || unix.Fstatat(f.dir.fd, f.name, &there, unix.AT_SYMLINK_NOFOLLOW) != nil {
		return
	}
	if mine.Dev == there.Dev && mine.Ino == there.Ino && mine.Size == 0 {
		unix.Unlinkat(f.dir.fd, f.name, 0)
	}
}

// openOwn opens the existing file name in d, which st (its lstat) says is
// there, and proves it is ours: a regular file, not a link of any kind, on
// the directory's file system, owned by us. flags are added to the open's.
func (d *probeDir) openOwn(name, path string, st *unix.Stat_t, flags int) (*fdFile, *unix.Stat_t, error) {
	if err := checkOwnFile(path, st, d.dev); err != nil {
		return nil, nil, err
	}
	// O_NONBLOCK: should the name be swapped for a FIFO between the stat
	// and the open, the open must not hang; the fstat below then refuses it.
	fd, err := unix.Openat(d.fd, name, flags|unix.O_NOFOLLOW|unix.O_NOCTTY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ELOOP) {
		return nil, nil, fmt.Errorf("%w: %s is a symbolic link", ErrUnsafePath, path)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("open %s: %w", path, err)
	}
	var fst unix.Stat_t
	if err := unix.Fstat(fd, &fst); err != nil {
		unix.Close(fd)
		return nil, nil, fmt.Errorf("stat %s: %w", path, err)
	}
	if fst.Dev != st.Dev || fst.Ino != st.Ino {
		unix.Close(fd)
		return nil, nil, fmt.Errorf("%w: %s changed while being opened", ErrUnsafePath, path)
	}
	return &fdFile{fd: fd, dir: d, name: name, path: path}, &fst, nil
}

// openExisting opens a probe file left by an earlier run and proves it is
// ours: a regular file, not a link of any kind, on the directory's file
// system, owned by us, carrying a valid Plumbline header.
func (d *probeDir) openExisting(f *probeFile, o Options, st *unix.Stat_t, tryDirect bool) error {
	h, fst, err := d.openOwn(o.FileName, f.path, st, unix.O_RDWR)
	if err != nil {
		return err
	}
	f.file = h
	if err := checkOwnFile(f.path, fst, d.dev); err != nil {
		return err
	}
	if err := unix.SetNonblock(h.fd, false); err != nil {
		return fmt.Errorf("open %s: %w", f.path, err)
	}
	hdr, err := readHeader(h.fd)
	if err != nil {
		return fmt.Errorf("%w: %s: %v; it was not created by Plumbline, refusing to touch it", ErrForeignFile, f.path, err)
	}
	if hdr.State == stateReady && fst.Size != hdr.FileSize {
		return fmt.Errorf("%w: %s is %d bytes but its header says %d", ErrForeignFile, f.path, fst.Size, hdr.FileSize)
	}
	f.hdr = hdr
	return h.setDirect(f, o, tryDirect)
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

// setDirect switches the descriptor to O_DIRECT and learns its alignment
// (f.cacheBypass, f.memAlign).
func (h *fdFile) setDirect(f *probeFile, o Options, tryDirect bool) error {
	dioAlign := MinBlockSize // O_DIRECT offset/length alignment (logical sector)
	f.memAlign = 4096
	if tryDirect {
		flags, err := unix.FcntlInt(uintptr(h.fd), unix.F_GETFL, 0)
		if err == nil {
			_, err = unix.FcntlInt(uintptr(h.fd), unix.F_SETFL, flags|unix.O_DIRECT)
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
		if err := unix.Statx(h.fd, "", unix.AT_EMPTY_PATH, unix.STATX_DIOALIGN, &stx); err == nil && stx.Mask&unix.STATX_DIOALIGN != 0 && stx.Dio_offset_align > 0 {
			dioAlign = int(stx.Dio_offset_align)
			f.memAlign = max(int(stx.Dio_mem_align), 4096)
		}
		if o.BlockSize%dioAlign != 0 {
			return fmt.Errorf("%w: block size %d is not a multiple of the device's direct-I/O alignment %d (its logical sector)", ErrInvalid, o.BlockSize, dioAlign)
		}
	}
	if o.Kind.Spec().Synced && o.Sync == SyncDsync {
		return h.reopenDsync(f.cacheBypass)
	}
	return nil
}

// reopenDsync replaces the descriptor with one opened O_DSYNC (O_DSYNC can
// only be set at open time), verifying it is the same file.
func (f *fdFile) reopenDsync(direct bool) error {
	flags := unix.O_RDWR | unix.O_NOFOLLOW | unix.O_NOCTTY | unix.O_NONBLOCK | unix.O_CLOEXEC | unix.O_DSYNC
	if direct {
		flags |= unix.O_DIRECT
	}
	fd, err := unix.Openat(f.dir.fd, f.name, flags, 0)
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

// openToRemove opens the probe file name for Cleanup and proves it is ours
// (errNoFile: there is none).
func (d *probeDir) openToRemove(name, path string) (handle, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); errors.Is(err, unix.ENOENT) {
		return nil, errNoFile
	} else if err != nil {
		return nil, fmt.Errorf("stat %s: %w", path, err)
	}
	h, _, err := d.openOwn(name, path, &st, unix.O_RDONLY)
	if err != nil {
		return nil, err
	}
	if _, err := readHeader(h.fd); err != nil {
		h.Close()
		return nil, fmt.Errorf("%w: %s: %v; not removing a file Plumbline did not create", ErrForeignFile, path, err)
	}
	return h, nil
}

// remove unlinks the file, after a last check right before the unlink that
// the name still points at the open inode (whose header Cleanup read).
func (f *fdFile) remove() error {
	var fst, st unix.Stat_t
	if err := unix.Fstat(f.fd, &fst); err != nil {
		return fmt.Errorf("stat %s: %w", f.path, err)
	}
	if err := unix.Fstatat(f.dir.fd, f.name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || st.Ino != fst.Ino || st.Dev != fst.Dev {
		return fmt.Errorf("%w: %s changed while being checked", ErrUnsafePath, f.path)
	}
	if err := unix.Unlinkat(f.dir.fd, f.name, 0); err != nil {
		return fmt.Errorf("remove %s: %w", f.path, err)
	}
	return nil
}
