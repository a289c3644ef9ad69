// Package retention prunes the server's stored records older than
// store.retention: the loop one replica runs (elected like the
// evaluator), in bounded batches with a pause between them, so that it
// never holds PostgreSQL's row locks, or SQLite's write lock, for long.
// What may be pruned (judged, synced, settled, not a volume's latest
// geometry) is the store's rule (store.PruneBatch); so is which spool
// incarnation rows go after them (store.PruneIncarnations).
package retention

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/plumbline/plumbline/internal/ctxtime"
	"github.com/plumbline/plumbline/internal/server/store"
)

// Store is the store's side of the pruning.
type Store interface {
	PruneBatch(ctx context.Context, cutoff time.Time, cur store.PruneCursor, limit int) (store.PruneStats, error)
	// PruneIncarnations removes the spool incarnation rows the dedup no
	// longer needs (store.pruneIncarnationsSQL states the rule).
	PruneIncarnations(ctx context.Context, cutoff time.Time, limit int) (n int, done bool, err error)
}

var _ Store = (*store.Store)(nil)

// Defaults of Options.
const (
	DefaultBatch    = 5000
	DefaultPause    = 100 * time.Millisecond
	DefaultInterval = time.Hour
)

// Options configure a Pruner. Zero fields take their defaults.
type Options struct {
	// Retention is how long records are kept; 0 keeps them for ever (Run
	// returns at once).
	Retention time.Duration
	// Batch is the most records one transaction reads (DefaultBatch).
	Batch int
	// Pause is the wait between two batches (DefaultPause): writers get
	// the locks in between.
	Pause time.Duration
	// Interval is the time between two passes (DefaultInterval).
	Interval time.Duration
	Logger   *slog.Logger
	Now      func() time.Time
}

// Pruner runs passes over the store; it is a prometheus.Collector of
// what it pruned, over every term it ran.
type Pruner struct {
	st   Store
	opts Options

	mu      sync.Mutex
	records float64
	probes  float64
	incs    float64
	lastRun time.Time // the last pass that completed
	fails   float64
}

// New returns a Pruner over st.
func New(st Store, opts Options) *Pruner {
	if opts.Batch <= 0 {
		opts.Batch = DefaultBatch
	}
	if opts.Pause <= 0 {
		opts.Pause = DefaultPause
	}
	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Pruner{st: st, opts: opts}
}

// Run runs a pass now and then every Interval until ctx is done (the end
// of this replica's term: ctx is the elector's, fenced).
func (p *Pruner) Run(ctx context.Context) {
	if p.opts.Retention <= 0 {
		return
	}
	for ctx.Err() == nil {
		p.Pass(ctx)
		if ctxtime.Sleep(ctx, p.opts.Interval) != nil {
			return
		}
	}
}

// Pass prunes everything older than the retention, batch by batch, and
// logs one line; false when a batch failed (the next pass starts over).
func (p *Pruner) Pass(ctx context.Context) bool {
	start := p.opts.Now()
	cutoff := start.Add(-p.opts.Retention)
	var total store.PruneStats
	var cur store.PruneCursor
	batches := 0
	for {
		st, err := p.st.PruneBatch(ctx, cutoff, cur, p.opts.Batch)
		if err != nil {
			p.mu.Lock()
			p.fails++
			p.mu.Unlock()
			if ctx.Err() == nil {
				p.opts.Logger.Error("retention pass failed", "err", err, "records", total.Records, "probe_results", total.ProbeResults)
			}
			return false
		}
		batches++
		total.Records += st.Records
		total.ProbeResults += st.ProbeResults
		p.count(st)
		if st.Done {
			break
		}
		cur = st.Next
		if ctxtime.Sleep(ctx, p.opts.Pause) != nil {
			return false
		}
	}
	incs, ok := p.pruneIncarnations(ctx, cutoff)
	if !ok {
		return false
	}
	p.mu.Lock()
	p.lastRun = p.opts.Now()
	p.mu.Unlock()
	p.opts.Logger.Info("retention pass", "cutoff", cutoff.UTC().Format(time.RFC3339), "records", total.Records,
		"probe_results", total.ProbeResults, "incarnations", incs, "batches", batches, "duration", p.opts.Now().Sub(start).Round(time.Millisecond))
	return true
}

// pruneIncarnations removes, batch by batch after the records (whose
// pruning lets their incarnations go), the incarnation rows the store's
// rule lets go; false when a batch failed.
func (p *Pruner) pruneIncarnations(ctx context.Context, cutoff time.Time) (int, bool) {
	total := 0
	for {
		n, done, err := p.st.PruneIncarnations(ctx, cutoff, p.opts.Batch)
		if err != nil {
			p.mu.Lock()
			p.fails++
			p.mu.Unlock()
			if ctx.Err() == nil {
				p.opts.Logger.Error("retention pass failed", "err", err, "incarnations", total)
			}
			return total, false
		}
		total += n
		p.mu.Lock()
		p.incs += float64(n)
		p.mu.Unlock()
		if done {
			return total, true
		}
		if ctxtime.Sleep(ctx, p.opts.Pause) != nil {
			return total, false
		}
	}
}

func (p *Pruner) count(st store.PruneStats) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.records += float64(st.Records)
	p.probes += float64(st.ProbeResults)
}

var (
	prunedDesc = prometheus.NewDesc("plumbline_server_retention_pruned_rows_total",
		"Rows this server replica pruned as older than store.retention, by table.", []string{"table"}, nil)
	lastRunDesc = prometheus.NewDesc("plumbline_server_retention_last_success_timestamp_seconds",
		"When this replica's last retention pass completed (Unix seconds); 0 when none has.", nil, nil)
	failuresDesc = prometheus.NewDesc("plumbline_server_retention_failures_total",
		"Retention passes of this replica that failed (a batch was refused or errored).", nil, nil)
)

// Describe implements prometheus.Collector.
func (p *Pruner) Describe(ch chan<- *prometheus.Desc) {
	ch <- prunedDesc
	ch <- lastRunDesc
	ch <- failuresDesc
}

// Collect implements prometheus.Collector.
func (p *Pruner) Collect(ch chan<- prometheus.Metric) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(prunedDesc, prometheus.CounterValue, p.records, "records")
	ch <- prometheus.MustNewConstMetric(prunedDesc, prometheus.CounterValue, p.probes, "probe_results")
	ch <- prometheus.MustNewConstMetric(prunedDesc, prometheus.CounterValue, p.incs, "agent_incarnations")
	last := 0.0
	if !p.lastRun.IsZero() {
		last = float64(p.lastRun.UnixNano()) / 1e9
	}
	ch <- prometheus.MustNewConstMetric(lastRunDesc, prometheus.GaugeValue, last)
	ch <- prometheus.MustNewConstMetric(failuresDesc, prometheus.CounterValue, p.fails)
}
