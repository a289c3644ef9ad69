package geometry

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// statBlockSize is the file-system block size statfs(2) reports for a
// mount point.
func statBlockSize(mountPoint string) (uint32, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(mountPoint, &st); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", mountPoint, err)
	}
	if st.Bsize <= 0 || st.Bsize > 1<<30 {
		return 0, fmt.Errorf("statfs %s: block size %d out of range", mountPoint, st.Bsize)
	}
	return uint32(st.Bsize), nil
}

// readDeviceHead reads the first n bytes of a mounted device, read-only,
// without following symlinks. A block device node must carry the device
// number the mount table gives; a regular file (a captured superblock) is
// read as is.
func readDeviceHead(path string, major, minor uint32, n int) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, err // *PathError names the path
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return nil, fmt.Errorf("stat %s: %w", path, err)
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFBLK:
		if unix.Major(st.Rdev) != major || unix.Minor(st.Rdev) != minor {
			return nil, fmt.Errorf("%s is device %d:%d, the mount table says %d:%d", path, unix.Major(st.Rdev), unix.Minor(st.Rdev), major, minor)
		}
	case unix.S_IFREG:
	default:
		return nil, fmt.Errorf("%s is neither a block device nor a captured superblock file", path)
	}
	buf := make([]byte, n)
	got, err := f.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return buf[:got], nil
}
