package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/plumbline/plumbline/internal/lab/pgtest"
)

// TestLease: one holder at a time, the epoch moves at every change of
// holder, a lapsed or released lease passes on, and a write under an old
// epoch is refused while one under the current epoch commits.
func TestLease(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		a, b := open(t, dsn), open(t, dsn) // two replicas
		const name, ttl = "evaluator", time.Minute

		la, ok, err := a.AcquireLease(ctx, name, "a", ttl)
		if err != nil || !ok || la.Epoch != 1 {
			t.Fatalf("AcquireLease(a) = %+v, %v, %v; want epoch 1", la, ok, err)
		}
		cur, ok, err := b.AcquireLease(ctx, name, "b", ttl)
		if err != nil || ok || cur.Holder != "a" || cur.Epoch != 1 {
			t.Fatalf("AcquireLease(b) while a holds it = %+v, %v, %v; want refused, held by a at 1", cur, ok, err)
		}
		if ok, err := a.RenewLease(ctx, name, "a", 1, ttl); err != nil || !ok {
			t.Fatalf("RenewLease(a, 1) = %v, %v; want true", ok, err)
		}
		fenced := func(st *Store, epoch uint64) error {
			return st.SaveBaselines(WithFence(ctx, Fence{Name: name, Epoch: epoch}), BaselineUpdate{Cohorts: []Cohort{{Profile: "p", Kind: "k", Volumes: int(epoch)}}})
		}
		if err := fenced(a, 1); err != nil {
			t.Fatalf("write of the holder: %v", err)
		}
		if err := a.ReleaseLease(ctx, name, 1); err != nil {
			t.Fatal(err)
		}
		lb, ok, err := b.AcquireLease(ctx, name, "b", ttl)
		if err != nil || !ok || lb.Epoch != 2 {
			t.Fatalf("AcquireLease(b) after release = %+v, %v, %v; want epoch 2", lb, ok, err)
		}
		if err := fenced(a, 1); !errors.Is(err, ErrFenced) {
			t.Fatalf("write under epoch 1 after b took epoch 2: %v; want ErrFenced", err)
		}
		if ok, err := a.RenewLease(ctx, name, "a", 1, ttl); err != nil || ok {
			t.Fatalf("RenewLease(a, 1) after b took it = %v, %v; want false", ok, err)
		}
		if err := fenced(b, 2); err != nil {
			t.Fatalf("write of the new holder: %v", err)
		}
		cs, err := a.ListCohorts(ctx)
		if err != nil || len(cs) != 1 || cs[0].Volumes != 2 {
			t.Fatalf("cohorts = %+v, %v; want the write of epoch 2 alone", cs, err)
		}
		if err := fenced(b, 3); !errors.Is(err, ErrFenced) {
			t.Fatalf("write under an epoch never given: %v; want ErrFenced", err)
		}

		// A lease that lapses passes on without a release.
		if ok, err := b.RenewLease(ctx, name, "b", 2, time.Millisecond); err != nil || !ok {
			t.Fatalf("RenewLease(b, 2, 1ms) = %v, %v", ok, err)
		}
		time.Sleep(20 * time.Millisecond) // a real lapse, on the database's clock
		la, ok, err = a.AcquireLease(ctx, name, "a", ttl)
		if err != nil || !ok || la.Epoch != 3 {
			t.Fatalf("AcquireLease(a) after b's lapsed = %+v, %v, %v; want epoch 3", la, ok, err)
		}
		if got, err := b.LeaseOf(ctx, name); err != nil || got.Holder != "a" || got.Epoch != 3 {
			t.Fatalf("LeaseOf = %+v, %v; want a at 3", got, err)
		}
		if _, _, err := b.AcquireLease(ctx, "", "b", ttl); !errors.Is(err, ErrInvalid) {
			t.Errorf("AcquireLease without a name: %v; want ErrInvalid", err)
		}
	})
}

// TestLeaseWaitsForFencedWrite (PostgreSQL, where replicas write at the
// same time): a change of holder waits for the old holder's fenced
// transaction in flight, which therefore commits under its epoch or not
// at all; a renewal does not wait for it; and a holder paused inside a
// fenced transaction loses its session after the fence's idle timeout,
// so its successor is not held up for ever.
func TestLeaseWaitsForFencedWrite(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a, b := open(t, dsn), open(t, dsn)
	const name = "inventory"
	if _, ok, err := a.AcquireLease(ctx, name, "a", time.Millisecond); err != nil || !ok {
		t.Fatalf("AcquireLease(a) = %v, %v", ok, err)
	}

	// a's fenced transaction is open (its lease lapses meanwhile).
	tx, err := a.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if err := a.checkFence(ctx, tx, Fence{Name: name, Epoch: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO baseline_cohorts (profile, kind, volumes, median, mad) VALUES ('p', 'k', 1, 0, 0)`); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond) // the lease lapses on the database's clock: renewing it must still not wait
	if ok, err := a.RenewLease(ctx, name, "a", 1, time.Millisecond); err != nil || !ok {
		t.Fatalf("RenewLease during a fenced transaction = %v, %v; want true, at once", ok, err)
	}
	time.Sleep(5 * time.Millisecond) // lapsed again: b may take it, once a's transaction is over
	acquired := make(chan error, 1)
	go func() {
		l, ok, err := b.AcquireLease(ctx, name, "b", time.Minute)
		if err == nil && (!ok || l.Epoch != 2) {
			err = errors.New("not acquired at epoch 2")
		}
		acquired <- err
	}()
	select {
	case err := <-acquired:
		t.Fatalf("b acquired the lease while a's fenced transaction was open (%v)", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := tx.Commit(); err != nil {
		t.Fatalf("a's fenced transaction: %v; want committed (it began under the current epoch)", err)
	}
	if err := <-acquired; err != nil {
		t.Fatal(err)
	}

	// b, now the holder, pauses inside a fenced transaction: the idle
	// timeout ends its session and a takes over.
	if ok, err := b.RenewLease(ctx, name, "b", 2, time.Millisecond); err != nil || !ok {
		t.Fatal(ok, err)
	}
	conn, err := b.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	paused, err := conn.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.checkFence(ctx, paused, Fence{Name: name, Epoch: 2, IdleTimeout: 200 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond) // b's lease lapses on the database's clock
	t0 := time.Now()
	if l, ok, err := a.AcquireLease(ctx, name, "a", time.Minute); err != nil || !ok || l.Epoch != 3 {
		t.Fatalf("AcquireLease(a) past b's paused transaction = %+v, %v, %v; want epoch 3", l, ok, err)
	}
	t.Logf("acquired past the paused transaction in %v", time.Since(t0))
	if _, err := paused.ExecContext(ctx, `INSERT INTO baseline_cohorts (profile, kind, volumes, median, mad) VALUES ('q', 'k', 1, 0, 0)`); err == nil {
		if err := paused.Commit(); err == nil {
			t.Fatal("the paused holder's transaction committed after its successor took the lease")
		}
	}
	paused.Rollback()
	var n int
	if err := a.db.QueryRowContext(ctx, `SELECT count(*) FROM baseline_cohorts WHERE profile = 'q'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("rows of the paused holder: %d, %v; want 0", n, err)
	}
}
