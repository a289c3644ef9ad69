//go:build !linux && !windows

package probe

import (
	"context"
	"fmt"
	"runtime"
)

// Run is not implemented on this operating system: probes run on Linux
// and Windows.
func Run(ctx context.Context, o Options) (Result, error) {
	if err := o.validate(); err != nil {
		return Result{}, err
	}
	return Result{}, fmt.Errorf("%w (%s)", ErrNotSupported, runtime.GOOS)
}

// Cleanup is not implemented on this operating system yet.
func Cleanup(dir, name string) (bool, error) {
	return false, fmt.Errorf("%w (%s)", ErrNotSupported, runtime.GOOS)
}
