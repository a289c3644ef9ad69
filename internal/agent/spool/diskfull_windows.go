package spool

import (
	"errors"
	"syscall"
)

// DiskFull says whether err is the volume being full
// (ERROR_DISK_FULL, ERROR_HANDLE_DISK_FULL).
func DiskFull(err error) bool {
	return errors.Is(err, syscall.Errno(112)) || errors.Is(err, syscall.Errno(39))
}
