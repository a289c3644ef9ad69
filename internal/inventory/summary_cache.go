package inventory

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/plumbline/plumbline/internal/store"
)

// summaryCache keeps rendered summaries per query, each computed at a
// store generation (store.InventoryGeneration: moved on by every change to
// the inventory tables, from any replica). A request is answered from the
// cache when its query is there, whatever the entry's generation; Run
// brings the entries whose generation is behind up to date, off the
// request path, each at most once per SummaryRefresh (a summary of 100,000
// volumes is a few hundred milliseconds of database work). So a cached
// summary is at most SummaryRefresh + SyncPeriod + one computation behind
// the tables (defaults: 10 s + 2 s + well under a second). A query not in
// the cache is computed on its request and kept: from the in-memory
// summaryIndex when it is at the store's generation (milliseconds at
// 100,000 volumes; Run rebuilds it with the entries), else with the
// store's SQL aggregates (the filters use the inventory indexes). The
// whole fleet's summary is always kept warm.
// Entries unused for summaryKeep are dropped; at most summaryEntries are
// kept (the least recently used goes).
type summaryCache struct {
	mu      sync.Mutex
	entries map[string]*summaryEntry
}

type summaryEntry struct {
	filter store.VolumeFilter
	top    int
	gen    uint64
	body   []byte
	used   time.Time
	// computed is when the computation began.
	computed time.Time
}

const (
	summaryKeep    = 15 * time.Minute
	summaryEntries = 16
)

// summaryKey is the cache key of a summary request: its query parameters
// in a canonical order (they have been validated).
func summaryKey(r *http.Request) string {
	q := r.URL.Query()
	if q.Get("top") == "" {
		q.Del("top")
	}
	return q.Encode()
}

// get returns the rendered summary of a query, computing it when it is
// not cached.
func (c *summaryCache) get(ctx context.Context, a *API, key string, f store.VolumeFilter, top int) ([]byte, error) {
	now := time.Now()
	c.mu.Lock()
	if e := c.entries[key]; e != nil && e.top == top {
		e.used = now
		body := e.body
		c.mu.Unlock()
		return body, nil
	}
	c.mu.Unlock()
	// The generation before the computation: a change that lands while it
	// runs makes the entry behind, and the next refresh computes it again.
	gen, err := a.st.InventoryGeneration(ctx)
	if err != nil {
		return nil, err
	}
	body, err := a.summarize(ctx, f, top)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.entries[key]; e == nil || e.gen <= gen {
		c.entries[key] = &summaryEntry{filter: f, top: top, gen: gen, body: body, used: now, computed: now}
	}
	c.evictLocked(now)
	return body, nil
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

// refreshSummaries brings the cached summaries (and the whole fleet's,
// cached or not) to the store's current generation: all of them when
// force, else those computed at least SummaryRefresh ago.
func (a *API) refreshSummaries(ctx context.Context, force bool) error {
	gen, err := a.st.InventoryGeneration(ctx)
	if err != nil {
		return err
	}
	// The in-memory index first (the computations below use it when it
	// is at gen), under the same rule as the entries.
	if ix := a.sumIdx.Load(); ix == nil || (ix.gen != gen && (force || time.Since(ix.built) >= a.opts.SummaryRefresh)) {
		nix, err := buildSummaryIndex(ctx, a.st)
		if err != nil {
			return err
		}
		a.sumIdx.Store(nix)
	}
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
		if e.gen != gen && (force || now.Sub(e.computed) >= a.opts.SummaryRefresh) {
			jobs = append(jobs, job{k, e.filter, e.top})
		}
	}
	c.mu.Unlock()
	for _, j := range jobs {
		computed := time.Now()
		body, err := a.summarize(ctx, j.filter, j.top)
		if err != nil {
			return err
		}
		c.mu.Lock()
		e := c.entries[j.key]
		switch {
		case e == nil:
			c.entries[j.key] = &summaryEntry{filter: j.filter, top: j.top, gen: gen, body: body, used: now, computed: computed}
		case e.gen <= gen:
			e.gen, e.body, e.computed = gen, body, computed
		}
		c.mu.Unlock()
	}
	return nil
}
