//go:build !linux

package main

import (
	"context"
	"errors"
)

type fullResult struct{}

func (fullResult) String() string { return "" }

func runDiskFull(context.Context, string, string) (fullResult, error) {
	return fullResult{}, errors.New("the disk-full case mounts a tmpfs: Linux only")
}
