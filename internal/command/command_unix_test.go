//go:build unix

package command

import (
	"context"
	"syscall"
	"testing"
)

func TestContextSignals(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			ctx, stop := Context()
			defer stop()
			if err := syscall.Kill(syscall.Getpid(), sig); err != nil {
				t.Fatal(err)
			}
			<-ctx.Done() // the test's own timeout catches a signal that does not cancel it
			if cause := context.Cause(ctx); cause == nil {
				t.Errorf("%v: context done without a cause", sig)
			}
		})
	}
}
