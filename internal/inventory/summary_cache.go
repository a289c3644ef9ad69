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
// cache only when its entry is at the store's current generation (one
// query reads it), so a summary agrees with the volumes read at the same
// moment; an entry behind (or missing) is computed on the request and
// kept: from the in-memory summaryIndex, which the request first brings
// to the current generation when it is behind (one build, about 0.5 s at
// 100,000 volumes, shared by every request and by Run: indexAt), in
// milliseconds; the store's SQL aggregates only when the index cannot
// answer (a change landed during the build). At rest nothing is computed.
// Run brings the entries and the index up to date off the request path
// too, each at most once per SummaryRefresh, so a request after a quiet
// change usually finds them current. The whole fleet's summary is always
// kept warm.
// Entries unused for summaryKeep are dropped; at most summaryEntries are
// kept (the least recently used goes).
type summaryCache struct {
	mu      sync.Mutex
	entries map[string]*summaryEntry
	// buildMu makes index builds one at a time (indexAt).
	buildMu sync.Mutex
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

// get returns the rendered summary of a query at the store's current
// generation: the cached one when it is at that generation, else computed
// now (and cached).
func (c *summaryCache) get(ctx context.Context, a *API, key string, f store.VolumeFilter, top int) ([]byte, error) {
	// The generation before the computation: a change that lands while it
	// runs makes the entry behind, and the next request computes it again.
	gen, err := a.st.InventoryGeneration(ctx)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	c.mu.Lock()
	if e := c.entries[key]; e != nil && e.top == top && e.gen == gen {
		e.used = now
		body := e.body
		c.mu.Unlock()
		return body, nil
	}
	c.mu.Unlock()
	if err := a.indexAt(ctx, gen); err != nil {
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

// indexAt brings the summary index to generation gen (or later): unless
// it is there already, it is rebuilt — one build at a time; a request
// that waited for another's build uses it.
func (a *API) indexAt(ctx context.Context, gen uint64) error {
	at := func() bool {
		ix := a.sumIdx.Load()
		return ix != nil && ix.gen != 0 && ix.gen >= gen
	}
	if at() {
		return nil
	}
	a.summaries.buildMu.Lock()
	defer a.summaries.buildMu.Unlock()
	if at() {
		return nil
	}
	nix, err := buildSummaryIndex(ctx, a.st)
	if err != nil {
		return err
	}
	a.sumIdx.Store(nix)
	return nil
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
		if err := a.indexAt(ctx, gen); err != nil {
			return err
		}
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
