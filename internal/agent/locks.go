package agent

import (
	"context"
	"sync"
)

// deviceLocks lets one probe at a time run on a device. A probe takes all
// the devices under its volume at once (all or nothing), so two volumes on
// the same disk never probe together and no lock order can deadlock.
type deviceLocks struct {
	mu   sync.Mutex
	held map[string]bool
	free chan struct{} // closed and replaced on every release
}

func newDeviceLocks() *deviceLocks {
	return &deviceLocks{held: map[string]bool{}, free: make(chan struct{})}
}

// acquire waits until none of keys is held, takes them all and returns the
// release function; or returns ctx's error.
func (l *deviceLocks) acquire(ctx context.Context, keys []string) (func(), error) {
	for {
		l.mu.Lock()
		busy := false
		for _, k := range keys {
			busy = busy || l.held[k]
		}
		if !busy {
			for _, k := range keys {
				l.held[k] = true
			}
			l.mu.Unlock()
			return func() { l.release(keys) }, nil
		}
		wait := l.free
		l.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (l *deviceLocks) release(keys []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, k := range keys {
		delete(l.held, k)
	}
	close(l.free)
	l.free = make(chan struct{})
}
