//go:build linux

package raidlab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// ArrayFile is the name of the file a lab's FUSE mount serves.
const ArrayFile = "array"

// maxRequest is the largest read or write the kernel sends the FUSE
// server (its max_write/max_pages), so that a loop request up to 1 MiB
// reaches the array whole and the array, not FUSE, decides how it splits.
const maxRequest = 1 << 20

// MemberFile is the name of member m's file on a lab's FUSE mount (a lab
// started with MemberDevices).
func MemberFile(m int) string { return fmt.Sprintf("member%d", m) }

// fsRoot is the mount's root directory: the array's file, and with
// member devices one file per member.
type fsRoot struct {
	fs.Inode
	arr     *Array
	members bool
}

var _ fs.NodeOnAdder = (*fsRoot)(nil)

func (r *fsRoot) OnAdd(ctx context.Context) {
	ch := r.NewPersistentInode(ctx, &arrayNode{arr: r.arr}, fs.StableAttr{Mode: syscall.S_IFREG, Ino: 2})
	r.AddChild(ArrayFile, ch, false)
	if !r.members {
		return
	}
	for m := range r.arr.geo.Members {
		ch := r.NewPersistentInode(ctx, &memberNode{arr: r.arr, m: m}, fs.StableAttr{Mode: syscall.S_IFREG, Ino: uint64(3 + m)})
		r.AddChild(MemberFile(m), ch, false)
	}
}

// memberNode is one member's file: MemberSize bytes that store nothing
// (reads return zeros, writes are dropped) and take the member's time.
// The loop device over it is the member's block device.
type memberNode struct {
	fs.Inode
	arr *Array
	m   int
}

var (
	_ fs.NodeOpener    = (*memberNode)(nil)
	_ fs.NodeGetattrer = (*memberNode)(nil)
	_ fs.NodeReader    = (*memberNode)(nil)
	_ fs.NodeWriter    = (*memberNode)(nil)
	_ fs.NodeFsyncer   = (*memberNode)(nil)
	_ fs.NodeFlusher   = (*memberNode)(nil)
)

func (n *memberNode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	return nil, fuse.FOPEN_DIRECT_IO, 0
}

func (n *memberNode) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	size := n.arr.geo.MemberSize()
	out.Mode = syscall.S_IFREG | 0o600
	out.Size = uint64(size)
	out.Blocks = uint64(size / 512)
	out.Blksize = 4096
	out.Nlink = 1
	now := time.Now()
	out.SetTimes(&now, &now, &now)
	return 0
}

// extent is how much of an operation of n bytes at off lies inside the
// member.
func (n *memberNode) extent(off int64, length int) int64 {
	return max(0, min(int64(length), n.arr.geo.MemberSize()-off))
}

func (n *memberNode) Read(ctx context.Context, f fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	got := n.extent(off, len(dest))
	if got == 0 {
		return fuse.ReadResultData(nil), 0
	}
	if err := n.arr.MemberIO(ctx, n.m, false, got); err != nil {
		return nil, errno(err)
	}
	clear(dest[:got])
	return fuse.ReadResultData(dest[:got]), 0
}

func (n *memberNode) Write(ctx context.Context, f fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	got := n.extent(off, len(data))
	if got < int64(len(data)) {
		return 0, syscall.ENOSPC
	}
	if err := n.arr.MemberIO(ctx, n.m, true, got); err != nil {
		return 0, errno(err)
	}
	return uint32(got), 0
}

func (n *memberNode) Fsync(ctx context.Context, f fs.FileHandle, flags uint32) syscall.Errno {
	return 0
}

func (n *memberNode) Flush(ctx context.Context, f fs.FileHandle) syscall.Errno { return 0 }

// arrayNode is the array's file. Every open gets FOPEN_DIRECT_IO: the
// kernel's page cache never answers for the array, each read and write
// reaches ReadAt/WriteAt.
type arrayNode struct {
	fs.Inode
	arr *Array
}

var (
	_ fs.NodeOpener    = (*arrayNode)(nil)
	_ fs.NodeGetattrer = (*arrayNode)(nil)
	_ fs.NodeSetattrer = (*arrayNode)(nil)
	_ fs.NodeReader    = (*arrayNode)(nil)
	_ fs.NodeWriter    = (*arrayNode)(nil)
	_ fs.NodeFsyncer   = (*arrayNode)(nil)
	_ fs.NodeFlusher   = (*arrayNode)(nil)
)

func (n *arrayNode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	return nil, fuse.FOPEN_DIRECT_IO, 0
}

func (n *arrayNode) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode = syscall.S_IFREG | 0o600
	out.Size = uint64(n.arr.geo.Size)
	out.Blocks = uint64(n.arr.geo.Size / 512)
	out.Blksize = 4096
	out.Nlink = 1
	now := time.Now()
	out.SetTimes(&now, &now, &now)
	return 0
}

// Setattr accepts only what does not change the array: its own size (an
// O_TRUNC to the same size never happens; a truncate to another size is
// refused) and times.
func (n *arrayNode) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if sz, ok := in.GetSize(); ok && int64(sz) != n.arr.geo.Size {
		return syscall.EPERM
	}
	return n.Getattr(ctx, f, out)
}

func (n *arrayNode) Read(ctx context.Context, f fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	got, err := n.arr.ReadAt(ctx, dest, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, errno(err)
	}
	return fuse.ReadResultData(dest[:got]), 0
}

func (n *arrayNode) Write(ctx context.Context, f fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	got, err := n.arr.WriteAt(ctx, data, off)
	if err != nil {
		return 0, errno(err)
	}
	return uint32(got), 0
}

func (n *arrayNode) Fsync(ctx context.Context, f fs.FileHandle, flags uint32) syscall.Errno {
	if err := n.arr.Sync(); err != nil {
		return syscall.EIO
	}
	return 0
}

func (n *arrayNode) Flush(ctx context.Context, f fs.FileHandle) syscall.Errno { return 0 }

func errno(err error) syscall.Errno {
	switch {
	case errors.Is(err, ErrOutOfRange):
		return syscall.ENOSPC
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return syscall.EINTR
	}
	return syscall.EIO
}

// mountArray serves arr at dir (and its members' files, if members). It mounts with mount(2) directly (no
// fusermount, so root is needed) and negotiates CAP_ASYNC_DIO, without
// which the kernel serializes a loop device's direct I/O to the file.
func mountArray(dir, name string, arr *Array, members bool) (*fuse.Server, error) {
	srv, err := fs.Mount(dir, &fsRoot{arr: arr, members: members}, &fs.Options{
		MountOptions: fuse.MountOptions{
			FsName:            name,
			Name:              "raidlab",
			DirectMountStrict: true,
			MaxWrite:          maxRequest,
			MaxBackground:     256,
			ExtraCapabilities: fuse.CAP_ASYNC_DIO,
			DisableXAttrs:     true,
		},
		FirstAutomaticIno: 10,
	})
	if err != nil {
		return nil, fmt.Errorf("raidlab: mount FUSE at %s: %w", dir, err)
	}
	if err := srv.WaitMount(); err != nil {
		srv.Unmount()
		return nil, fmt.Errorf("raidlab: FUSE mount at %s: %w", dir, err)
	}
	return srv, nil
}
