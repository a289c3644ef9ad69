package store

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/plumbline/plumbline/internal/lab/pgtest"
)

// TestLeasePastStuckFencedTransaction (PostgreSQL): a holder paused
// inside a fenced transaction whose backend is not idle — so the fence's
// idle timeout never ends it — still does not hold its successor up: once
// the lease has lapsed, AcquireLease ends the sessions of the lapsed
// epoch, and the paused holder's transaction does not commit.
//
//   - client write: the backend is sending rows the paused client does not
//     read (wait event ClientWrite; statement_timeout does not end it
//     either);
//   - lock wait: the fenced transaction waits for a row lock that another
//     transaction of the paused replica holds (an unfenced one, which no
//     idle timeout ends).
func TestLeasePastStuckFencedTransaction(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	cases := []struct {
		name    string
		wait    string // the stuck backend's wait event
		lease   string
		blocked func(t *testing.T, a *Store, tx *sql.Tx) func() error
	}{
		{
			name: "client write", wait: "ClientWrite", lease: "stuck-write",
			blocked: func(t *testing.T, a *Store, tx *sql.Tx) func() error {
				// 64 MiB of rows, far more than the sockets' buffers.
				rows, err := tx.QueryContext(context.Background(), `SELECT repeat('x', 8192) FROM generate_series(1, 8192)`)
				if err != nil {
					t.Fatal(err)
				}
				return func() error {
					for rows.Next() {
					}
					return rows.Err()
				}
			},
		},
		{
			name: "lock wait", wait: "transactionid", lease: "stuck-lock",
			blocked: func(t *testing.T, a *Store, tx *sql.Tx) func() error {
				other, err := a.db.BeginTx(context.Background(), nil)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { other.Rollback() })
				if _, err := other.Exec(`UPDATE inventory_generation SET generation = generation + 1 WHERE id = 1`); err != nil {
					t.Fatal(err)
				}
				done := make(chan error, 1)
				go func() {
					_, err := tx.Exec(`UPDATE inventory_generation SET generation = generation + 1 WHERE id = 1`)
					done <- err
				}()
				return func() error { other.Rollback(); return <-done }
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			a, b := open(t, dsn), open(t, dsn)
			first, ok, err := a.AcquireLease(ctx, c.lease, "a", time.Millisecond)
			if err != nil || !ok {
				t.Fatalf("AcquireLease(a) = %v, %v", ok, err)
			}
			tx, err := a.db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			if err := a.checkFence(ctx, tx, Fence{Name: c.lease, Epoch: first.Epoch, IdleTimeout: 100 * time.Millisecond}); err != nil {
				t.Fatal(err)
			}
			var pid int
			if err := tx.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
				t.Fatal(err)
			}
			finish := c.blocked(t, a, tx)
			finished := false
			defer func() { // before tx.Rollback, which waits for the statement
				if !finished {
					finish()
				}
			}()
			waitBackend(t, b, pid, c.wait)

			// The lease has lapsed (1 ms): the successor takes it, within
			// the minute of ctx (before the fix: never, while a stays
			// paused).
			l, ok, err := b.AcquireLease(ctx, c.lease, "b", 2*time.Second)
			if err != nil || !ok || l.Epoch != first.Epoch+1 {
				t.Fatalf("AcquireLease(b) past a's stuck fenced transaction = %+v, %v, %v; want epoch %d", l, ok, err, first.Epoch+1)
			}
			finished = true
			if err := finish(); err == nil {
				if err := tx.Commit(); err == nil {
					t.Fatal("the paused holder's fenced transaction committed after its successor took the lease")
				}
			}
		})
	}
}

// waitBackend waits until backend pid waits for event.
func waitBackend(t *testing.T, st *Store, pid int, event string) {
	t.Helper()
	for i := 0; ; i++ {
		var state, got string
		err := st.db.QueryRow(`SELECT state, COALESCE(wait_event, '') FROM pg_stat_activity WHERE pid = $1`, pid).Scan(&state, &got)
		if err == nil && got == event {
			t.Logf("the fenced transaction's backend: state %q, wait event %s", state, got)
			return
		}
		if err != nil && err != sql.ErrNoRows {
			t.Fatal(err)
		}
		if i == 3000 {
			t.Fatalf("backend %d: state %q, wait event %q; want %s", pid, state, got, event)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
