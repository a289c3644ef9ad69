// Package ctxtime waits on the clock and on a context at once: the sleeps
// between retries and the periodic loops of the agent and the server, each
// of which must end as soon as its owner cancels it.
package ctxtime

import (
	"context"
	"time"
)

// Sleep waits d or until ctx is done, whichever comes first. It returns
// ctx.Err() when ctx ended first (or had already ended), else nil; a d of
// zero or less does not wait.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Every calls f every d until ctx is done, the first time d from now, and
// returns when ctx is done. The calls run on the caller's goroutine, one at
// a time: a call that takes longer than d is followed by the next one at
// once, and the ticks missed meanwhile are dropped (time.Ticker). d must be
// greater than zero.
func Every(ctx context.Context, d time.Duration, f func(context.Context)) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f(ctx)
		}
	}
}
