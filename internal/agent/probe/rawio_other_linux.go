//go:build linux && !(amd64 || arm64 || riscv64 || ppc64le || ppc64 || s390x || loong64 || mips64 || mips64le)

package probe

import "golang.org/x/sys/unix"

// rawIOSupported is false where pread64 splits its offset over two
// registers; Options.RawIO then falls back to the ordinary calls and these
// are never reached.
const rawIOSupported = false

func rawPread(fd int, p []byte, off int64) (int, error)  { return 0, unix.ENOSYS }
func rawPwrite(fd int, p []byte, off int64) (int, error) { return 0, unix.ENOSYS }
func rawFdatasync(fd int) error                          { return unix.ENOSYS }
