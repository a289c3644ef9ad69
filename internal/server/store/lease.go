package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
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
//
// On PostgreSQL the transaction also names its session after the fence
// (fenceTag, in application_name, for the transaction only): a successor
// that waited too long for the lease row ends the sessions of the lapsed
// epoch by that name (AcquireLease). The idle timeout alone does not
// bound that wait: a backend of a paused client that is not idle — blocked
// writing rows to it (wait event ClientWrite), or waiting for a row lock
// that another of its transactions holds — keeps the lease row, and
// neither idle_in_transaction_session_timeout nor a statement timeout ends
// it.
func (s *Store) checkFence(ctx context.Context, tx *sql.Tx, f Fence) error {
	query := `SELECT epoch FROM leader_lease WHERE name = ?`
	if s.engine == Postgres {
		query += ` FOR KEY SHARE`
		set := `SELECT set_config('application_name', $1, true)`
		args := []any{fenceTag(f.Name, f.Epoch)}
		if f.IdleTimeout > 0 {
			set += `, set_config('idle_in_transaction_session_timeout', $2, true)`
			args = append(args, strconv.FormatInt(f.IdleTimeout.Milliseconds(), 10))
		}
		if _, err := tx.ExecContext(ctx, set, args...); err != nil {
			return fmt.Errorf("fence %s: %w", f.Name, err)
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

// fenceTagPrefix starts the application_name of a session inside a
// fenced transaction.
const fenceTagPrefix = "plumbline fence "

// fenceTag is the application_name of a session inside a fenced
// transaction of lease name at epoch (PostgreSQL keeps 63 bytes of it:
// lease names are short).
func fenceTag(name string, epoch uint64) string {
	return fenceTagPrefix + name + " " + strconv.FormatUint(epoch, 10)
}

// LeaseLockWait is how long AcquireLease waits on PostgreSQL for the
// fenced transactions of a lapsed lease's holder before it ends their
// sessions: TTL/3, at least a second (the fence's idle timeout that the
// leader package gives its loops).
func LeaseLockWait(ttl time.Duration) time.Duration { return max(ttl/3, time.Second) }

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
// fenced transactions of the previous holder in flight to end; on
// PostgreSQL, those of a lapsed lease that are still open after
// LeaseLockWait(ttl) have their sessions ended (pg_terminate_backend, which
// the database role may do to its own sessions): they were made under
// the lapsed epoch, so they roll back, and none of them commits under
// the new one.
func (s *Store) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (cur Lease, ok bool, err error) {
	if name == "" || holder == "" || ttl <= 0 {
		return Lease{}, false, fmt.Errorf("acquire lease: %w: want a name, a holder and a positive TTL", ErrInvalid)
	}
	for {
		cur, ok, err = s.tryAcquireLease(ctx, name, holder, ttl)
		if !errors.Is(err, errLeaseLocked) {
			return cur, ok, err
		}
		lapsed, err := s.endStaleFences(ctx, name)
		if err != nil {
			return Lease{}, false, fmt.Errorf("acquire lease %s: %w", name, err)
		}
		if !lapsed { // its holder renewed it: its transactions are its own
			cur, err := s.LeaseOf(ctx, name)
			return cur, false, err
		}
	}
}

// errLeaseLocked: the lease row stayed locked by fenced transactions for
// LeaseLockWait.
var errLeaseLocked = errors.New("lease row locked")

// tryAcquireLease is one try of AcquireLease: errLeaseLocked when the
// fenced transactions in flight did not end within LeaseLockWait(ttl).
func (s *Store) tryAcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (cur Lease, ok bool, err error) {
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
		wait := strconv.FormatInt(LeaseLockWait(ttl).Milliseconds(), 10)
		if _, err := tx.ExecContext(ctx, `SELECT set_config('lock_timeout', $1, true)`, wait); err != nil {
			return Lease{}, false, fmt.Errorf("acquire lease %s: %w", name, err)
		}
	}
	var epoch, expires, now int64
	if err := tx.QueryRowContext(ctx, s.q(query), name).Scan(&cur.Holder, &epoch, &expires, &now); err != nil {
		if pgErr := (*pgconn.PgError)(nil); errors.As(err, &pgErr) && pgErr.Code == pgLockNotAvailable {
			return Lease{}, false, fmt.Errorf("acquire lease %s: %w: %w", name, errLeaseLocked, err)
		}
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

// pgLockNotAvailable is PostgreSQL's SQLSTATE of a lock_timeout.
const pgLockNotAvailable = "55P03"

// endStaleFences ends (PostgreSQL) the sessions inside fenced
// transactions of lease name's current epoch when the lease has lapsed:
// their holder is gone or paused, and they hold the lease row against
// its successor. lapsed is false when the lease runs (nothing ended).
func (s *Store) endStaleFences(ctx context.Context, name string) (lapsed bool, err error) {
	var n sql.NullInt64
	err = s.db.QueryRowContext(ctx, `
SELECT count(pg_terminate_backend(a.pid)) FILTER (WHERE a.pid IS NOT NULL)
FROM leader_lease l
LEFT JOIN pg_stat_activity a ON a.application_name = $2 || l.epoch AND a.datname = current_database()
    AND a.pid <> pg_backend_pid()
WHERE l.name = $1 AND l.expires_us < `+s.dbNowUS()+`
GROUP BY l.name`, name, fenceTagPrefix+name+" ").Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("end the sessions of the lapsed epoch: %w", err)
	}
	return true, nil
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
