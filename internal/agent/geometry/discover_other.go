//go:build !linux && !windows

package geometry

import (
	"context"
	"fmt"
	"runtime"
)

type recorder interface{}

func discover(ctx context.Context, opts Options, rec recorder) (Result, error) {
	return Result{}, fmt.Errorf("%s: %w", runtime.GOOS, ErrUnsupported)
}
