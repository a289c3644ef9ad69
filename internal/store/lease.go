package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Leases (table leader_lease) elect the one replica that runs a background
// loop when several servers share one PostgreSQL. A lease is a row with a
// holder, an expiry on the database's clock and an epoch, the fencing
// token: every change of holder takes the next epoch. The loop's writes
// carry the epoch they were started under (WithFence) and are refused
// once it moved on, so a leader that was paused past its lease (a stopped
// process, a long GC, a partition) cannot write after its successor began.

// ErrFenced: a write carried a lease epoch that is no longer current — a
// newer leader holds the loop's lease.
var ErrFenced = errors.New("fenced: the lease has a newer holder")

// Lease is the state of one lease row.
type Lease struct {
	Name    string
	Holder  string
	Epoch   uint64
	Expires time.Time // on the database's clock
}

// Fence is what a fenced write checks: the lease and the epoch its
// holder was given.
type Fence struct {
	Name  string
	Epoch uint64
	// IdleTimeout, when positive, ends (on PostgreSQL) the session of a
	// fenced transaction left idle this long — a leader paused
	// mid-transaction holds the lease row's share lock, which a successor
	// waits for.
	IdleTimeout time.Duration
}

type fenceKey struct{}

// WithFence returns a context whose store writes (every transaction of the
// Store) first check that f's epoch is still the lease's, in the same
// transaction, holding the lease row against a change of holder until
// they commit: a write either commits before a successor's epoch exists,
// or fails with ErrFenced.
func WithFence(ctx context.Context, f Fence) context.Context {
	return context.WithValue(ctx, fenceKey{}, f)
}

// FenceFrom returns the fence ctx carries, if any.
func FenceFrom(ctx context.Context) (Fence, bool) {
	f, ok := ctx.Value(fenceKey{}).(Fence)
	return f, ok
}

// checkFence is the first statement of a fenced transaction. FOR KEY SHARE
// conflicts with AcquireLease's FOR UPDATE (a change of holder waits for
// the fenced transactions in flight) but not with a renewal's UPDATE of
// the expiry. SQLite transactions hold the write lock from BEGIN.
func (s *Store) checkFence(ctx context.Context, tx *sql.Tx, f Fence) error {
	query := `SELECT epoch FROM leader_lease WHERE name = ?`
	if s.engine == Postgres {
		query += ` FOR KEY SHARE`
		if f.IdleTimeout > 0 {
			// SET takes no parameters: a whole number of milliseconds.
			if _, err := tx.ExecContext(ctx, fmt.Sprintf("SET LOCAL idle_in_transaction_session_timeout = %d", f.IdleTimeout.Milliseconds())); err != nil {
				return fmt.Errorf("fence %s: %w", f.Name, err)
			}
		}
	}
	var epoch int64
	err := tx.QueryRowContext(ctx, s.q(query), f.Name).Scan(&epoch)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("%w: no lease %q", ErrFenced, f.Name)
	case err != nil:
		return fmt.Errorf("fence %s: %w", f.Name, err)
	case uint64(epoch) != f.Epoch:
		return fmt.Errorf("%w: lease %q is at epoch %d, this write was made under %d", ErrFenced, f.Name, epoch, f.Epoch)
	}
	return nil
}

// dbNowUS is the SQL expression of the database's clock in Unix
// microseconds: leases are timed on one clock, whatever the replicas'.
func (s *Store) dbNowUS() string {
	if s.engine == Postgres {
		return `CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000 AS BIGINT)`
	}
	return `CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER)`
}

// AcquireLease makes holder the holder of lease name for ttl, with the
// next epoch, when the lease is free or has lapsed; ok is false (and cur
// says who holds it) when another holder's lease runs. It waits for the
// fenced transactions of the previous holder in flight to end.
func (s *Store) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (cur Lease, ok bool, err error) {
	if name == "" || holder == "" || ttl <= 0 {
		return Lease{}, false, fmt.Errorf("acquire lease: %w: want a name, a holder and a positive TTL", ErrInvalid)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return Lease{}, false, fmt.Errorf("acquire lease %s: %w", name, err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO leader_lease (name, holder, epoch, expires_us) VALUES (?, '', 0, 0) ON CONFLICT (name) DO NOTHING`), name); err != nil {
		return Lease{}, false, fmt.Errorf("acquire lease %s: %w", name, err)
	}
	query := `SELECT holder, epoch, expires_us, ` + s.dbNowUS() + ` FROM leader_lease WHERE name = ?`
	if s.engine == Postgres {
		query += ` FOR UPDATE`
	}
	var epoch, expires, now int64
	if err := tx.QueryRowContext(ctx, s.q(query), name).Scan(&cur.Holder, &epoch, &expires, &now); err != nil {
		return Lease{}, false, fmt.Errorf("acquire lease %s: %w", name, err)
	}
	cur.Name, cur.Epoch, cur.Expires = name, uint64(epoch), time.UnixMicro(expires).UTC()
	if expires >= now && cur.Holder != holder {
		return cur, false, nil
	}
	if err := tx.QueryRowContext(ctx, s.q(`UPDATE leader_lease SET holder = ?, epoch = epoch + 1, expires_us = `+s.dbNowUS()+` + ?
WHERE name = ? RETURNING epoch, expires_us`), holder, ttl.Microseconds(), name).Scan(&epoch, &expires); err != nil {
		return Lease{}, false, fmt.Errorf("acquire lease %s: %w", name, err)
	}
	if err := tx.Commit(); err != nil {
		return Lease{}, false, fmt.Errorf("acquire lease %s: commit: %w", name, err)
	}
	return Lease{Name: name, Holder: holder, Epoch: uint64(epoch), Expires: time.UnixMicro(expires).UTC()}, true, nil
}

// RenewLease extends the lease of holder at epoch by ttl from now; false
// when the lease has another epoch (a successor took it). A lease that
// lapsed and was not taken is renewed: its epoch never moved, so nothing
// was written under another.
func (s *Store) RenewLease(ctx context.Context, name, holder string, epoch uint64, ttl time.Duration) (bool, error) {
	res, err := s.db.ExecContext(ctx, s.q(`UPDATE leader_lease SET expires_us = `+s.dbNowUS()+` + ?
WHERE name = ? AND holder = ? AND epoch = ?`), ttl.Microseconds(), name, holder, int64(epoch))
	if err != nil {
		return false, fmt.Errorf("renew lease %s: %w", name, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("renew lease %s: %w", name, err)
	}
	return n == 1, nil
}

// ReleaseLease lets the lease of epoch lapse now (a replica that stops
// hands over without waiting for the TTL); nothing when another epoch
// holds it.
func (s *Store) ReleaseLease(ctx context.Context, name string, epoch uint64) error {
	if _, err := s.db.ExecContext(ctx, s.q(`UPDATE leader_lease SET expires_us = 0 WHERE name = ? AND epoch = ?`), name, int64(epoch)); err != nil {
		return fmt.Errorf("release lease %s: %w", name, err)
	}
	return nil
}

// LeaseOf returns lease name as stored (the zero Lease when none was ever
// taken).
func (s *Store) LeaseOf(ctx context.Context, name string) (Lease, error) {
	var l Lease
	var epoch, expires int64
	err := s.db.QueryRowContext(ctx, s.q(`SELECT holder, epoch, expires_us FROM leader_lease WHERE name = ?`), name).Scan(&l.Holder, &epoch, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return Lease{Name: name}, nil
	}
	if err != nil {
		return Lease{}, fmt.Errorf("lease %s: %w", name, err)
	}
	l.Name, l.Epoch, l.Expires = name, uint64(epoch), time.UnixMicro(expires).UTC()
	return l, nil
}
