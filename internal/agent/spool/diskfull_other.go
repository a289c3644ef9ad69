//go:build !windows

package spool

import (
	"errors"
	"syscall"
)

// DiskFull says whether err is the file system (or the user's quota)
// being full.
func DiskFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}
