//go:build !linux

package main

import (
	"context"
	"errors"
)

type fullResult struct{ Dropped uint64 }

func (fullResult) String() string { return "" }

// BenchFullBytes is the size of the bench's full file system.
const BenchFullBytes = 512 << 10

func runDiskFull(context.Context, string, string, int64) (fullResult, error) {
	return fullResult{}, errors.New("the disk-full case mounts a tmpfs: Linux only")
}
