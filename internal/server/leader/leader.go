// Package leader elects, through the store, the one server replica that
// runs each background loop (the baseline evaluator, the inventory
// projection) when several replicas share one PostgreSQL — Nomad's
// leader loop, over a lease row instead of Raft.
//
// Why a lease row with an epoch, not a session advisory lock: an advisory
// lock lives as long as its connection, and a paused leader's connection
// stays open (the kernel answers TCP keepalives for a stopped process), so
// a SIGSTOPped or swapped-out leader would hold the loop for ever; the
// lock cannot be fenced (nothing tells a write it was made by the old
// holder); and PgBouncer in transaction mode hands the session to others,
// which breaks session locks outright. A lease expires on the database's
// clock whatever the holder does, works through any pooler (each
// statement stands alone), and its epoch fences the loop's writes
// (store.WithFence): a write under an epoch that is no longer the lease's
// is refused in its own transaction.
//
// An Elector campaigns for every loop it is given: it takes the lapsed or
// free lease, runs the loop with a fenced context while it renews the
// lease every TTL/3, and stops the loop when the lease was taken or could
// not be renewed for TTL − TTL/3 (before it lapses on the database's
// clock). On the embedded SQLite (one server) there is nothing to elect:
// Local leads every loop at once.
package leader

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	"github.com/plumbline/plumbline/internal/ctxtime"
	"github.com/plumbline/plumbline/internal/server/store"
)

// Leases is the store's side of the election.
type Leases interface {
	AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (store.Lease, bool, error)
	RenewLease(ctx context.Context, name, holder string, epoch uint64, ttl time.Duration) (bool, error)
	ReleaseLease(ctx context.Context, name string, epoch uint64) error
}

var _ Leases = (*store.Store)(nil)

// DefaultTTL is the lease's default time to live.
const DefaultTTL = 15 * time.Second

// Options configure an Elector. Zero fields take their defaults.
type Options struct {
	// TTL is how long a lease lasts unless renewed (default DefaultTTL).
	TTL time.Duration
	// Holder names this replica in the lease (default host/pid/random).
	Holder string
	Logger *slog.Logger
}

// Loop is one background loop: Run runs until ctx is done.
type Loop struct {
	Name string
	Run  func(ctx context.Context)
}

// Elector runs loops on the replica that holds their lease.
type Elector struct {
	leases Leases // nil: Local
	opts   Options

	mu    sync.Mutex
	loops []string          // every loop Run was given
	state map[string]uint64 // loop → epoch while this replica leads it
}

// New returns an Elector over leases.
func New(leases Leases, opts Options) *Elector {
	if opts.TTL <= 0 {
		opts.TTL = DefaultTTL
	}
	if opts.Holder == "" {
		opts.Holder = defaultHolder()
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Elector{leases: leases, opts: opts, state: map[string]uint64{}}
}

// Local returns an Elector that leads every loop without asking anyone:
// one server on its own database.
func Local(opts Options) *Elector { return New(nil, opts) }

func defaultHolder() string {
	host, _ := os.Hostname()
	var b [4]byte
	crand.Read(b[:])
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// Holder is this replica's name in the leases.
func (e *Elector) Holder() string { return e.opts.Holder }

// renewEvery is the renewal period, and the period of a follower's tries.
func (e *Elector) renewEvery() time.Duration { return e.opts.TTL / 3 }

// FailoverBound is how long after a leader died (its lease renewed just
// before) a follower leads at the latest: the lease lapses within TTL and
// a follower tries every TTL/3 (plus up to 10% jitter). A leader paused
// inside a fenced transaction adds up to TTL/3 (at least a second): the
// fence's idle timeout ends its session, or — when its backend is not
// idle (blocked writing to the stopped process, or waiting for a lock) —
// the follower's AcquireLease ends it after store.LeaseLockWait.
func FailoverBound(ttl time.Duration) time.Duration {
	return ttl + ttl/3 + ttl/30
}

// fenceIdle is the fence's idle timeout: the loops' transactions never
// wait on their client this long. It is also how long a follower's
// AcquireLease waits for a paused leader's fenced transactions that are
// not idle before it ends their sessions.
func (e *Elector) fenceIdle() time.Duration { return store.LeaseLockWait(e.opts.TTL) }

// Leading reports whether this replica leads loop, and under which epoch
// (0 for Local).
func (e *Elector) Leading(loop string) (bool, uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	epoch, ok := e.state[loop]
	return ok, epoch
}

func (e *Elector) set(loop string, leading bool, epoch uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if leading {
		e.state[loop] = epoch
	} else {
		delete(e.state, loop)
	}
}

// Run campaigns for every loop until ctx is done and returns when every
// loop has stopped (and its lease was released).
func (e *Elector) Run(ctx context.Context, loops ...Loop) {
	e.mu.Lock()
	for _, l := range loops {
		e.loops = append(e.loops, l.Name)
	}
	e.mu.Unlock()
	var wg sync.WaitGroup
	for _, l := range loops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if e.leases == nil {
				e.set(l.Name, true, 0)
				l.Run(ctx)
				e.set(l.Name, false, 0)
				return
			}
			e.campaign(ctx, l)
		}()
	}
	wg.Wait()
}

// campaign tries for the loop's lease every renewal period, with jitter,
// and leads whenever it holds it.
func (e *Elector) campaign(ctx context.Context, l Loop) {
	log := e.opts.Logger.With("loop", l.Name)
	failing := false
	for {
		start := time.Now()
		// Time for a wait on the lease row (fenceIdle) and a try after.
		actx, cancel := context.WithTimeout(ctx, e.opts.TTL+e.fenceIdle())
		lease, ok, err := e.leases.AcquireLease(actx, l.Name, e.opts.Holder, e.opts.TTL)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			if !failing {
				log.Warn("cannot reach the lease; following until it can", "err", err)
			}
			failing = true
		case ok:
			failing = false
			e.lead(ctx, l, lease.Epoch, start)
			if ctx.Err() != nil {
				return
			}
		default:
			failing = false
			log.Debug("following", "leader", lease.Holder, "epoch", lease.Epoch)
		}
		wait := e.renewEvery() + rand.N(e.renewEvery()/10+1)
		if ctxtime.Sleep(ctx, wait) != nil {
			return
		}
	}
}

// lead runs the loop under epoch, renewing the lease, until ctx is done or
// the lease is lost; then it stops the loop and waits for it. renewed is
// when the request that gave or last renewed the lease was sent.
func (e *Elector) lead(ctx context.Context, l Loop, epoch uint64, renewed time.Time) {
	log := e.opts.Logger.With("loop", l.Name, "epoch", epoch)
	fenced := store.WithFence(ctx, store.Fence{Name: l.Name, Epoch: epoch, IdleTimeout: e.fenceIdle()})
	term, stop := context.WithCancel(fenced)
	done := make(chan struct{})
	e.set(l.Name, true, epoch)
	log.Info("leading", "holder", e.opts.Holder)
	go func() { defer close(done); l.Run(term) }()
	defer func() {
		stop()
		<-done
		e.set(l.Name, false, 0)
	}()

	t := time.NewTicker(e.renewEvery())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			stop()
			<-done
			rctx, cancel := context.WithTimeout(context.Background(), e.renewEvery())
			defer cancel()
			if err := e.leases.ReleaseLease(rctx, l.Name, epoch); err != nil {
				log.Warn("releasing the lease (it lapses on its own)", "err", err)
			}
			log.Info("stopped leading: stopping")
			return
		case <-done:
			log.Error("loop returned on its own; standing down")
			return
		case <-t.C:
		}
		start := time.Now()
		rctx, cancel := context.WithTimeout(ctx, e.renewEvery())
		ok, err := e.leases.RenewLease(rctx, l.Name, e.opts.Holder, epoch, e.opts.TTL)
		cancel()
		switch {
		case ctx.Err() != nil:
			continue // the stop above
		case err == nil && ok:
			renewed = start
		case err == nil:
			log.Warn("stopped leading: another replica holds the lease")
			return
		case time.Since(renewed) >= e.opts.TTL-e.renewEvery():
			log.Warn("stopped leading: the lease could not be renewed before it lapses", "err", err)
			return
		default:
			log.Warn("renewing the lease failed; trying again", "err", err)
		}
	}
}
