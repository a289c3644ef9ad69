package policy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/plumbline/plumbline/internal/ctxtime"
)

// Source holds the server's current policy entries and tells waiters
// when they change (a blocking query's wake-up).
type Source struct {
	mu      sync.Mutex
	entries []Entry
	changed chan struct{} // closed and replaced by Update
}

// NewSource returns a Source holding entries (validated by the caller).
func NewSource(entries []Entry) *Source {
	return &Source{entries: entries, changed: make(chan struct{})}
}

// Update replaces the entries (validated by the caller) and wakes every
// waiter.
func (s *Source) Update(entries []Entry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.entries = entries
	close(s.changed)
	s.changed = make(chan struct{})
}

// Entries returns the current entries and a channel closed at their next
// change.
func (s *Source) Entries() ([]Entry, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.entries, s.changed
}

// Resolve is Resolve over the current entries, with the channel closed at
// their next change.
func (s *Source) Resolve(f Facts) (Resolved, <-chan struct{}, error) {
	entries, changed := s.Entries()
	r, err := Resolve(entries, f)
	return r, changed, err
}

// LoadFunc reads the policy entries of a file (the server's
// configuration), validated.
type LoadFunc func(path string) ([]Entry, error)

// WatchFile re-reads file every interval and, when its bytes changed and
// it loads, updates s: a policy edit reaches agents without a server
// restart. A file that fails to load is logged and s keeps its entries.
// It returns when ctx ends.
func (s *Source) WatchFile(ctx context.Context, file string, every time.Duration, load LoadFunc, log *slog.Logger) {
	var last []byte
	if b, err := os.ReadFile(file); err == nil {
		sum := sha256.Sum256(b)
		last = sum[:]
	}
	ctxtime.Every(ctx, every, func(context.Context) {
		b, err := os.ReadFile(file)
		if err != nil {
			log.Warn("policy: re-reading the configuration file failed; keeping the current policy", "file", file, "err", err)
			return
		}
		sum := sha256.Sum256(b)
		if bytes.Equal(sum[:], last) {
			return
		}
		last = sum[:]
		entries, err := load(file)
		if err != nil {
			log.Error("policy: the changed configuration file does not load; keeping the current policy", "file", file, "err", err)
			return
		}
		s.Update(entries)
		log.Info("policy: reloaded", "file", file, "entries", len(entries))
	})
}
