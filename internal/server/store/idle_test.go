package store

import (
	"context"
	"database/sql"
	"sync"
	"testing"
	"time"

	"github.com/plumbline/plumbline/internal/lab/pgtest"
)

// TestPausedGroupReleasesLocks (PostgreSQL): a replica paused inside a
// group commit (its client sends no next statement) holds the rows it
// wrote only for the Store's idle timeout: another replica's write of
// the same row goes through while the first stays paused, and the
// paused transaction ends (resumed, the committer runs the write again
// in a new one).
func TestPausedGroupReleasesLocks(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, b := open(t, dsn), open(t, dsn)
	a.idleInTx = 200 * time.Millisecond
	const bump = `UPDATE inventory_generation SET generation = generation + 1 WHERE id = 1`

	locked, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	resume := func() { once.Do(func() { close(release) }) }
	defer resume()
	paused := make(chan error, 1) // the paused run's next statement
	done := make(chan error, 1)
	go func() {
		first := true
		done <- a.write(ctx, "", func(ctx context.Context, tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, bump); err != nil || !first {
				return err
			}
			first = false
			close(locked)
			<-release // the process is stopped
			_, err := tx.ExecContext(ctx, `SELECT 1`)
			paused <- err
			return err
		})
	}()
	<-locked
	if _, err := b.db.ExecContext(ctx, bump); err != nil {
		t.Fatalf("write of the row a paused group holds: %v; want it through once the group's idle timeout ended it", err)
	}
	resume()
	if err := <-paused; err == nil {
		t.Fatal("the paused group's transaction went on after its session was ended")
	}
	<-done
}
