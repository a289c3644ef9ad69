//go:build linux && (amd64 || arm64 || riscv64 || ppc64le || ppc64 || s390x || loong64 || mips64 || mips64le)

package probe

import (
	"errors"
	"unsafe"

	"golang.org/x/sys/unix"
)

// rawIOSupported: on these 64-bit platforms pread64/pwrite64 take the
// offset in one register.
const rawIOSupported = true

func rawPread(fd int, p []byte, off int64) (int, error) {
	return rawRW(unix.SYS_PREAD64, fd, p, off)
}

func rawPwrite(fd int, p []byte, off int64) (int, error) {
	return rawRW(unix.SYS_PWRITE64, fd, p, off)
}

func rawRW(trap uintptr, fd int, p []byte, off int64) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for {
		n, _, e := unix.RawSyscall6(trap, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)), uintptr(off), 0, 0)
		if e == 0 {
			return int(n), nil
		}
		if !errors.Is(e, unix.EINTR) {
			return 0, e
		}
	}
}

func rawFdatasync(fd int) error {
	for {
		_, _, e := unix.RawSyscall(unix.SYS_FDATASYNC, uintptr(fd), 0, 0)
		if e == 0 {
			return nil
		}
		if !errors.Is(e, unix.EINTR) {
			return e
		}
	}
}
