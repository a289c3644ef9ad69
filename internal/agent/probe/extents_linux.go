package probe

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// fsIocFiemap is FS_IOC_FIEMAP, _IOWR('f', 11, struct fiemap): golang.org/x/sys
// does not define it.
const fsIocFiemap = 0xC020660B

// fiemapBatch is how many extents one FS_IOC_FIEMAP call asks for.
const fiemapBatch = 256

// extents maps the open probe file onto its file system's block device
// with FS_IOC_FIEMAP (FIEMAP_FLAG_SYNC), on the probe's own descriptor.
func (f *fdFile) extents() ([]Extent, error) {
	var all []Extent
	var start int64
	for {
		b := fiemapRequest(start, fiemapBatch)
		if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(f.fd), fsIocFiemap, uintptr(unsafe.Pointer(&b[0]))); errno != 0 {
			return nil, fmt.Errorf("FS_IOC_FIEMAP: %w", errno)
		}
		ext, last, next, err := decodeFiemap(b)
		if err != nil {
			return nil, err
		}
		all = append(all, ext...)
		if len(all) > MaxExtents {
			return nil, fmt.Errorf("%w: more than %d extents", errExtents, MaxExtents)
		}
		if last || next <= start {
			return normalizeExtents(all)
		}
		start = next
	}
}
