// Package projection is what is left of the server's inventory read
// model once ingest's judge writes each volume's judged record (its
// inventory row, findings and page document) and its geometry history
// with the volume, in the same transaction: the repair loop for what a
// snapshot cannot carry, and the history's reader. The HTTP API
// (internal/server/inventory) reads the tables.
//
// Run repairs the tables off the request path (store.SyncInventory): a
// full pass every FullSyncInterval gives the rows of a host renamed
// without a new snapshot their new hostname and removes rows whose volume
// is gone by any other way than a snapshot; an incremental pass every
// SyncPeriod only reads the latest receive time of a geometry record.
// Readers only read the tables: nothing on the request path syncs (a read
// never opens a write transaction); they follow the store's inventory
// generation, which every write to the tables moves.
//
// Staleness bound: a geometry record shows when its transaction commits
// (its judged record is written in it). A host rename without a new
// snapshot shows within FullSyncInterval.
package projection

import (
	"cmp"
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/plumbline/plumbline/internal/server/store"
)

// Store is what the projection reads and writes.
type Store interface {
	SyncInventory(ctx context.Context, since time.Time) (store.SyncStats, error)
	VolumeChanges(ctx context.Context, agentID, mountPoint string) ([]store.VolumeChange, error)
}

var _ Store = (*store.Store)(nil)

// Options configure a Projection.
type Options struct {
	Logger *slog.Logger
	// SyncPeriod is how often Run syncs incrementally (default 2s).
	SyncPeriod time.Duration
	// SyncMargin is how far before the start of the last sync an
	// incremental sync looks for geometry records received (default 30s).
	SyncMargin time.Duration
	// FullSyncInterval is how often Run syncs every volume (default 5m).
	FullSyncInterval time.Duration
	// AfterSync, when set, runs after each of Run's syncs that succeeded
	// (the API brings its cached summaries to the new generation).
	AfterSync func(ctx context.Context) error
}

// Projection keeps the inventory tables in step with the volumes table.
// Build it with New.
type Projection struct {
	st   Store
	opts Options

	syncMu  sync.Mutex // held while a sync runs
	stateMu sync.Mutex // guards the fields below
	synced  bool       // a full sync has completed
	since   time.Time  // the next incremental sync's since
	lastOK  time.Time  // when the last sync that succeeded ended
	fails   float64    // syncs that failed
}

// New returns the projection over st.
func New(st Store, opts Options) *Projection {
	opts.Logger = cmp.Or(opts.Logger, slog.New(slog.DiscardHandler))
	// A duration not above 0 is the default.
	opts.SyncPeriod = cmp.Or(max(opts.SyncPeriod, 0), 2*time.Second)
	opts.SyncMargin = cmp.Or(max(opts.SyncMargin, 0), 30*time.Second)
	opts.FullSyncInterval = cmp.Or(max(opts.FullSyncInterval, 0), 5*time.Minute)
	return &Projection{st: st, opts: opts}
}

// Run is the sync loop: it keeps the inventory tables up to date until
// ctx is done — a full sync now (unless one has completed) and every
// FullSyncInterval, an incremental one every SyncPeriod, each followed by
// Options.AfterSync. Readers never sync: they read what it wrote.
func (p *Projection) Run(ctx context.Context) {
	if !p.Synced() {
		p.runSync(ctx, true)
	}
	full := time.NewTicker(p.opts.FullSyncInterval)
	defer full.Stop()
	incr := time.NewTicker(p.opts.SyncPeriod)
	defer incr.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-full.C:
			p.runSync(ctx, true)
		case <-incr.C:
			p.runSync(ctx, false)
		}
	}
}

// Synced says whether a full sync has completed in this process.
func (p *Projection) Synced() bool {
	p.stateMu.Lock()
	defer p.stateMu.Unlock()
	return p.synced
}

func (p *Projection) runSync(ctx context.Context, full bool) {
	p.syncMu.Lock()
	err := p.syncLocked(ctx, full)
	if err == nil && p.opts.AfterSync != nil {
		err = p.opts.AfterSync(ctx)
	}
	p.syncMu.Unlock()
	if err != nil && ctx.Err() == nil {
		p.opts.Logger.Warn("inventory sync", "full", full, "err", err)
	}
}

// Sync brings the inventory tables up to date: in full, or only for the
// agents seen since the last sync (less a margin); the first sync is
// always full.
func (p *Projection) Sync(ctx context.Context, full bool) error {
	p.syncMu.Lock()
	defer p.syncMu.Unlock()
	return p.syncLocked(ctx, full)
}

func (p *Projection) syncLocked(ctx context.Context, full bool) error {
	p.stateMu.Lock()
	since := p.since
	if full || !p.synced {
		since = time.Time{}
	}
	p.stateMu.Unlock()
	start := time.Now()
	st, err := p.st.SyncInventory(ctx, since)
	if err != nil {
		p.failed(ctx)
		return err
	}
	if st.Updated+st.Removed+st.Failed > 0 {
		p.opts.Logger.Debug("inventory sync", "full", since.IsZero(), "updated", st.Updated, "removed", st.Removed, "failed", st.Failed, "took", time.Since(start))
	}
	p.stateMu.Lock()
	defer p.stateMu.Unlock()
	if since.IsZero() {
		p.synced = true
	}
	p.lastOK = time.Now()
	// The next incremental sync compares the hosts with a geometry record
	// received since this one began, less the margin: for transactions
	// that were open while it read, and for replicas' clocks.
	if next := start.Add(-p.opts.SyncMargin); next.After(p.since) {
		p.since = next
	}
	return nil
}
