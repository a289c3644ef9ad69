package leader

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/plumbline/plumbline/internal/lab/pgtest"
	"github.com/plumbline/plumbline/internal/server/store"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const ttl = time.Second

func openStore(t *testing.T, dsn string) *store.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := store.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// write is a loop's write: the cohorts table holds the epoch it was made
// under.
func write(ctx context.Context, st *store.Store, by int) error {
	f, _ := store.FenceFrom(ctx)
	return st.SaveBaselines(ctx, store.BaselineUpdate{Cohorts: []store.Cohort{{Profile: fmt.Sprint(by), Kind: "epoch", Volumes: int(f.Epoch)}}})
}

// replica is one server's elector and what its loop saw.
type replica struct {
	el     *Elector
	stop   context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	terms  []uint64 // epochs it led under
	writes int
	fenced int
	tried  time.Time // when its last finished AcquireLease began
}

// tries records when each of a replica's AcquireLease calls began.
type tries struct {
	Leases
	r *replica
}

func (c tries) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (store.Lease, bool, error) {
	start := time.Now()
	l, ok, err := c.Leases.AcquireLease(ctx, name, holder, ttl)
	c.r.mu.Lock()
	c.r.tried = start
	c.r.mu.Unlock()
	return l, ok, err
}

// triedSince reports whether an AcquireLease call that began after t has
// returned.
func (r *replica) triedSince(t time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tried.After(t)
}

// wrote is how many writes its loop made (fenced or not).
func (r *replica) wrote() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.writes + r.fenced
}

func startReplica(t *testing.T, i int, leases Leases, st *store.Store) *replica {
	ctx, stop := context.WithCancel(context.Background())
	r := &replica{stop: stop, done: make(chan struct{})}
	r.el = New(tries{leases, r}, Options{TTL: ttl, Holder: fmt.Sprintf("replica-%d", i)})
	go func() {
		defer close(r.done)
		r.el.Run(ctx, Loop{Name: "evaluator", Run: func(ctx context.Context) {
			f, _ := store.FenceFrom(ctx)
			r.mu.Lock()
			r.terms = append(r.terms, f.Epoch)
			r.mu.Unlock()
			for ctx.Err() == nil {
				err := write(ctx, st, i)
				r.mu.Lock()
				switch {
				case err == nil:
					r.writes++
				case errors.Is(err, store.ErrFenced):
					r.fenced++
				}
				r.mu.Unlock()
				select {
				case <-ctx.Done():
				case <-time.After(20 * time.Millisecond):
				}
			}
		}})
	}()
	t.Cleanup(func() { stop(); <-r.done })
	return r
}

func leaders(rs []*replica) (n, which int) {
	which = -1
	for i, r := range rs {
		if ok, _ := r.el.Leading("evaluator"); ok {
			n++
			which = i
		}
	}
	return n, which
}

// waitFor polls cond until it holds, at most limit.
func waitFor(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", limit, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitLeader waits (at most bound) for exactly one replica to lead and
// returns it and how long it took.
func waitLeader(t *testing.T, rs []*replica, bound time.Duration) (int, time.Duration) {
	t.Helper()
	start := time.Now()
	for time.Since(start) < bound {
		if n, which := leaders(rs); n == 1 {
			return which, time.Since(start)
		} else if n > 1 {
			t.Fatalf("%d replicas lead at once", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no replica led within %v", bound)
	return -1, 0
}

// TestElection: three replicas on one PostgreSQL, one leads at a time; a
// leader that stops hands over at once (it releases the lease); the loop's
// writes carry increasing epochs; the gauge says who leads.
func TestElection(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	st := openStore(t, dsn)
	var rs []*replica
	for i := range 3 {
		s := openStore(t, dsn)
		rs = append(rs, startReplica(t, i, s, s))
	}
	first, took := waitLeader(t, rs, FailoverBound(ttl)+time.Second)
	t.Logf("replica %d leads after %v", first, took)
	// Renewals keep it: wait until the first lease, unrenewed, would have
	// lapsed and each follower has tried for it since.
	lapsed := time.Now().Add(ttl)
	for i, r := range rs {
		if i != first {
			waitFor(t, fmt.Sprintf("replica %d to try for the lease after it would have lapsed", i), 3*ttl,
				func() bool { return r.triedSince(lapsed) })
		}
	}
	if n, which := leaders(rs); n != 1 || which != first {
		t.Fatalf("a TTL on, with every follower trying: %d leaders, replica %d; want replica %d alone", n, which, first)
	}
	want := "# HELP plumbline_server_leader Whether this server replica runs the background loop (1) or another replica does (0).\n# TYPE plumbline_server_leader gauge\nplumbline_server_leader{loop=\"evaluator\"} 1\n"
	if err := testutil.CollectAndCompare(rs[first].el, strings.NewReader(want), "plumbline_server_leader"); err != nil {
		t.Error(err)
	}
	if got := testutil.ToFloat64(gaugeOf(rs[(first+1)%3].el)); got != 0 {
		t.Errorf("a follower's plumbline_server_leader = %v, want 0", got)
	}

	// Graceful stop: released, another leads well within one TTL. The
	// followers try in step, every TTL/3, and have just tried: stop half a
	// period on, between their tries, where a stop at a random moment
	// falls on average (stopping just after their tries leaves the
	// handover a whole period).
	time.Sleep(ttl / 6)
	rs[first].stop()
	<-rs[first].done
	rest := append(append([]*replica{}, rs[:first]...), rs[first+1:]...)
	second, took := waitLeader(t, rest, ttl)
	t.Logf("after a graceful stop, another leads in %v", took)
	waitFor(t, "the new leader's loop to write", time.Minute, func() bool { return rest[second].wrote() > 0 })

	l, err := st.LeaseOf(context.Background(), "evaluator")
	if err != nil || l.Epoch != 2 || l.Holder != rest[second].el.Holder() {
		t.Fatalf("lease = %+v, %v; want epoch 2 held by %s", l, err, rest[second].el.Holder())
	}
	for i, r := range rs {
		r.mu.Lock()
		t.Logf("replica %d: terms %v, %d writes, %d fenced", i, r.terms, r.writes, r.fenced)
		if r.fenced != 0 {
			t.Errorf("replica %d had %d writes fenced; a replica that leads alone and steps down cleanly has none", i, r.fenced)
		}
		r.mu.Unlock()
	}
}

// pausable is a replica's store connection that can be frozen, as a
// stopped process is: its calls wait while paused.
type pausable struct {
	Leases
	mu     sync.Mutex
	resume chan struct{} // nil: running
}

func (p *pausable) wait() {
	p.mu.Lock()
	ch := p.resume
	p.mu.Unlock()
	if ch != nil {
		<-ch
	}
}

func (p *pausable) pause() {
	p.mu.Lock()
	p.resume = make(chan struct{})
	p.mu.Unlock()
}

func (p *pausable) cont() {
	p.mu.Lock()
	close(p.resume)
	p.resume = nil
	p.mu.Unlock()
}

func (p *pausable) RenewLease(ctx context.Context, name, holder string, epoch uint64, ttl time.Duration) (bool, error) {
	p.wait()
	return p.Leases.RenewLease(ctx, name, holder, epoch, ttl)
}

// TestFencing: a leader frozen past its lease (renewals and its loop held
// up, as SIGSTOP does) is replaced; when it wakes, its loop's write — made
// under the old epoch — is refused, the new leader's writes stand, and the
// old leader stands down.
func TestFencing(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stA, stB := openStore(t, dsn), openStore(t, dsn)
	pa := &pausable{Leases: stA}

	frozen, wake, woke := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	elA := New(pa, Options{TTL: ttl, Holder: "a"})
	actx, stopA := context.WithCancel(ctx)
	aDone := make(chan struct{})
	go func() {
		defer close(aDone)
		elA.Run(actx, Loop{Name: "evaluator", Run: func(ctx context.Context) {
			if err := write(ctx, stA, 0); err != nil {
				woke <- fmt.Errorf("first write of the leader: %w", err)
				return
			}
			pa.pause()
			close(frozen)
			<-wake // frozen: neither renewals nor the loop go on
			woke <- write(ctx, stA, 0)
			<-ctx.Done()
		}})
	}()
	defer func() { stopA(); <-aDone }()
	select {
	case <-frozen:
	case err := <-woke:
		t.Fatal(err)
	case <-ctx.Done():
		t.Fatal("a never led")
	}
	paused := time.Now()

	rb := startReplica(t, 1, stB, stB)
	if _, took := waitLeader(t, []*replica{rb}, FailoverBound(ttl)+time.Second); took > 0 {
		t.Logf("b leads %v after a froze", time.Since(paused))
	}
	waitFor(t, "b to write", time.Minute, func() bool { return rb.wrote() > 0 })
	// It wakes: the loop first (its context still says it leads), then
	// the renewals.
	close(wake)
	if err := <-woke; !errors.Is(err, store.ErrFenced) {
		t.Fatalf("the woken leader's write: %v; want ErrFenced", err)
	}
	pa.cont()
	deadline := time.Now().Add(ttl)
	for {
		ok, _ := elA.Leading("evaluator")
		if !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the woken leader still leads one TTL after it woke")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cs, err := stB.ListCohorts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 || cs[0].Profile != "1" || cs[0].Volumes != 2 {
		t.Fatalf("cohorts after the woken leader's write = %+v; want b's write under epoch 2 alone", cs)
	}
}

// TestLocal: without leases every loop leads at once, with epoch 0 and no
// fence on its writes.
func TestLocal(t *testing.T) {
	t.Parallel()
	el := Local(Options{})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	fenced := make(chan bool, 2)
	loop := func(ctx context.Context) {
		_, ok := store.FenceFrom(ctx)
		fenced <- ok
		wg.Done()
		<-ctx.Done()
	}
	done := make(chan struct{})
	go func() { el.Run(ctx, Loop{"evaluator", loop}, Loop{"inventory", loop}); close(done) }()
	wg.Wait()
	for _, name := range []string{"evaluator", "inventory"} {
		if ok, epoch := el.Leading(name); !ok || epoch != 0 {
			t.Errorf("Leading(%s) = %v, %d; want true, 0", name, ok, epoch)
		}
	}
	if <-fenced || <-fenced {
		t.Error("a local loop's context carries a fence")
	}
	cancel()
	<-done
	if ok, _ := el.Leading("evaluator"); ok {
		t.Error("still leading after Run returned")
	}
}

func gaugeOf(el *Elector) prometheus.Collector {
	return filtered{el}
}

// filtered is el's plumbline_server_leader alone.
type filtered struct{ el *Elector }

func (f filtered) Describe(ch chan<- *prometheus.Desc) { ch <- leaderDesc }
func (f filtered) Collect(ch chan<- prometheus.Metric) {
	all := make(chan prometheus.Metric, 16)
	f.el.Collect(all)
	close(all)
	for m := range all {
		if m.Desc() == leaderDesc {
			ch <- m
		}
	}
}

// unreachable is a replica's store connection that fails (the database
// or the network to it is gone) once cut.
type unreachable struct {
	Leases
	mu  sync.Mutex
	cut bool
}

func (u *unreachable) down() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.cut
}

func (u *unreachable) RenewLease(ctx context.Context, name, holder string, epoch uint64, ttl time.Duration) (bool, error) {
	if u.down() {
		return false, errors.New("connection refused")
	}
	return u.Leases.RenewLease(ctx, name, holder, epoch, ttl)
}

func (u *unreachable) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (store.Lease, bool, error) {
	if u.down() {
		return store.Lease{}, false, errors.New("connection refused")
	}
	return u.Leases.AcquireLease(ctx, name, holder, ttl)
}

// TestStepDownWhenUnreachable: a leader that loses its database stops its
// loop before its lease lapses (TTL − TTL/3 after its last renewal), and
// a replica that can reach the database leads once it has lapsed.
func TestStepDownWhenUnreachable(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	stA, stB := openStore(t, dsn), openStore(t, dsn)
	ua := &unreachable{Leases: stA}
	ra := startReplica(t, 0, ua, stA)
	waitLeader(t, []*replica{ra}, FailoverBound(ttl)+time.Second)
	rb := startReplica(t, 1, stB, stB)

	ua.mu.Lock()
	ua.cut = true
	ua.mu.Unlock()
	cut := time.Now()
	for {
		if ok, _ := ra.el.Leading("evaluator"); !ok {
			break
		}
		if time.Since(cut) > ttl {
			t.Fatal("the cut-off leader still leads one TTL after its last chance to renew")
		}
		time.Sleep(10 * time.Millisecond)
	}
	steppedDown := time.Since(cut)
	_, took := waitLeader(t, []*replica{ra, rb}, FailoverBound(ttl)+time.Second)
	if ok, _ := rb.el.Leading("evaluator"); !ok {
		t.Fatal("the replica that can reach the database does not lead")
	}
	t.Logf("the cut-off leader stood down %v after the cut; the other leads %v later", steppedDown.Round(time.Millisecond), (steppedDown + took).Round(time.Millisecond))
}
