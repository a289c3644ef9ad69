package inventory

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/plumbline/plumbline/internal/server/store"
)

// The summary is read from the newest complete summaryIndex, which
// refreshIndex — run by the API's loop (Run: every SyncPeriod, and after
// each sync of a projection the API owns), never by a request — keeps at
// the store's inventory generation (store.InventoryGeneration, moved by
// every change to the inventory tables from any replica): when the
// generation has moved it builds a new index from one read-only snapshot
// of the tables, recomputes the cached summaries from it and swaps it in
// (an atomic pointer). A request opens no write transaction and
// builds nothing: it answers from the index it finds, whose generation
// and snapshot time it states in the Plumbline-Summary-Generation and
// Plumbline-Summary-As-Of headers. A change shows in summaries within
// SyncPeriod plus three builds (refreshLoop; a build is about 0.5 s at
// 100,000 volumes, a few seconds at 1,000,000 on PostgreSQL); until the
// first index is built every read answers 503 (errNotReady).

// summaryCache keeps rendered summaries per query, each computed from
// the index of one generation; a request whose entry is of an older
// index computes it from the current one (milliseconds) and keeps it.
// Entries unused for summaryKeep are dropped; at most summaryEntries are
// kept (the least recently used goes).
type summaryCache struct {
	mu      sync.Mutex
	entries map[string]*summaryEntry
	// buildMu makes refreshes one at a time (refreshIndex).
	buildMu sync.Mutex
}

type summaryEntry struct {
	filter store.VolumeFilter
	top    int
	// gen and asOf are those of the index it was computed from.
	gen  uint64
	asOf time.Time
	body []byte
	used time.Time
}

const (
	summaryKeep    = 15 * time.Minute
	summaryEntries = 16
)

// errNotReady: the API has no summary index yet (nor, when it owns its
// projection, a completed sync): reads answer 503.
var errNotReady = errors.New("the inventory is not ready yet: its first sync or summary index is being built; retry in a few seconds")

// summaryKey is the cache key of a summary request: its query parameters
// in a canonical order (they have been validated).
func summaryKey(r *http.Request) string {
	q := r.URL.Query()
	if q.Get("top") == "" {
		q.Del("top")
	}
	return q.Encode()
}

// get returns the rendered summary of a query, and the generation and
// snapshot time of the index it comes from: the cached one when it was
// computed from index ix or a newer one (refreshIndex computes the cached
// entries from a new index before it swaps it in), else computed from ix
// now (and cached).
func (c *summaryCache) get(ctx context.Context, a *API, ix *summaryIndex, key string, f store.VolumeFilter, top int) ([]byte, uint64, time.Time, error) {
	now := time.Now()
	c.mu.Lock()
	if e := c.entries[key]; e != nil && e.top == top && e.gen >= ix.gen {
		e.used = now
		body, gen, asOf := e.body, e.gen, e.asOf
		c.mu.Unlock()
		return body, gen, asOf, nil
	}
	c.mu.Unlock()
	body, err := a.summarize(ctx, ix, f, top)
	if err != nil {
		return nil, 0, time.Time{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.entries[key]; e == nil || e.gen <= ix.gen {
		c.entries[key] = &summaryEntry{filter: f, top: top, gen: ix.gen, asOf: ix.built, body: body, used: now}
	}
	c.evictLocked(now)
	return body, ix.gen, ix.built, nil
}

// evictLocked drops entries unused for summaryKeep and, above
// summaryEntries, the least recently used ones (never the whole fleet's).
func (c *summaryCache) evictLocked(now time.Time) {
	for k, e := range c.entries {
		if k != "" && now.Sub(e.used) > summaryKeep {
			delete(c.entries, k)
		}
	}
	for len(c.entries) > summaryEntries {
		oldest := ""
		for k, e := range c.entries {
			if k != "" && (oldest == "" || e.used.Before(c.entries[oldest].used)) {
				oldest = k
			}
		}
		if oldest == "" {
			return
		}
		delete(c.entries, oldest)
	}
}

// refreshIndex brings the summary index to the store's current
// generation — a new one from a snapshot, unless the current one is at
// it — and the cached summaries (and the whole fleet's, cached or not) to
// it, before it swaps it in, so that a request finds them computed; one
// refresh at a time. Then the API is ready, unless it owns a projection
// that has not completed its first sync.
func (a *API) refreshIndex(ctx context.Context) error {
	c := &a.summaries
	c.buildMu.Lock()
	defer c.buildMu.Unlock()
	gen, err := a.st.InventoryGeneration(ctx)
	if err != nil {
		return err
	}
	ix := a.sumIdx.Load()
	if ix == nil || ix.gen != gen {
		if ix, err = buildSummaryIndex(ctx, a.st); err != nil {
			return err
		}
		if err := a.recomputeSummaries(ctx, ix); err != nil {
			return err
		}
		a.sumIdx.Store(ix)
		a.lastBuild.Store(int64(time.Since(ix.built)))
	} else if err := a.recomputeSummaries(ctx, ix); err != nil {
		return err
	}
	if !a.ownProj || a.proj.Synced() {
		a.readyOnce.Do(func() { close(a.readyCh) })
	}
	return nil
}

// recomputeSummaries brings the cached summaries, and the whole fleet's,
// to index ix.
func (a *API) recomputeSummaries(ctx context.Context, ix *summaryIndex) error {
	c := &a.summaries
	now := time.Now()
	c.mu.Lock()
	c.evictLocked(now)
	type job struct {
		key    string
		filter store.VolumeFilter
		top    int
	}
	var jobs []job
	if _, ok := c.entries[""]; !ok {
		jobs = append(jobs, job{"", store.VolumeFilter{}, defaultTop})
	}
	for k, e := range c.entries {
		if e.gen != ix.gen {
			jobs = append(jobs, job{k, e.filter, e.top})
		}
	}
	c.mu.Unlock()
	for _, j := range jobs {
		body, err := a.summarize(ctx, ix, j.filter, j.top)
		if err != nil {
			return err
		}
		c.mu.Lock()
		switch e := c.entries[j.key]; {
		case e == nil:
			c.entries[j.key] = &summaryEntry{filter: j.filter, top: j.top, gen: ix.gen, asOf: ix.built, body: body, used: now}
		case e.gen <= ix.gen:
			e.gen, e.asOf, e.body = ix.gen, ix.built, body
		}
		c.mu.Unlock()
	}
	return nil
}

// refreshLoop is refreshIndex as the API's loop runs it: not before a
// projection the API owns has completed its first sync (which refreshes
// after it), and not sooner after the last build than that build took,
// so that building uses at most about half of one core however busy the
// fleet (a change that lands just after a build began waits for it, the
// pause and its own build: at most SyncPeriod plus three builds).
func (a *API) refreshLoop(ctx context.Context) error {
	if a.ownProj && !a.proj.Synced() {
		return nil
	}
	if ix := a.sumIdx.Load(); ix != nil && time.Since(ix.built) < 2*time.Duration(a.lastBuild.Load()) {
		return nil
	}
	return a.refreshIndex(ctx)
}

// ready waits, at most ReadyWait, until the API can answer a read (see
// refreshIndex); errNotReady after that.
func (a *API) ready(ctx context.Context) error {
	select {
	case <-a.readyCh:
		return nil
	default:
	}
	t := time.NewTimer(a.opts.ReadyWait)
	defer t.Stop()
	select {
	case <-a.readyCh:
		return nil
	case <-t.C:
		return errNotReady
	case <-ctx.Done():
		return ctx.Err()
	}
}
