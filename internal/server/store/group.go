package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// Group commit.
//
// SQLite has one writer at a time and, with synchronous=FULL, one fsync per
// commit. A server with a thousand agents reporting would otherwise run a
// thousand write transactions a second that queue on SQLite's busy timeout
// (polling with sleeps), and collapse. Instead, every write transaction of
// a Store on SQLite (everything that goes through inTx: AppendBatch,
// AppendBatchFrom, UpsertAgent, SettleBelow, the evaluator's and the
// inventory sync's writes) is handed to one
// committer goroutine, which runs whatever writes are queued — from any
// number of agents — in ONE transaction, and commits once:
//
//   - a write that fails is undone alone (the group is run again with a
//     savepoint per write) and only its caller gets the error; the others
//     still commit;
//   - every caller gets its own result only after the shared COMMIT
//     returned, so nothing is acknowledged before it is durable; when the
//     COMMIT fails, every caller of the group gets the error and nothing of
//     the group is stored;
//   - no delay is added to wait for company: a group is what queued while
//     the previous one was committing, so one agent alone pays one commit,
//     and a busy server pays one fsync for many batches.
//
// PostgreSQL takes concurrent transactions, but one transaction per report
// still costs a BEGIN, a COMMIT and a WAL flush each, and a connection for
// as long as it runs: a thousand agents reporting at once would need a
// thousand connections (more than max_connections; the pool is bounded,
// see Open) or queue for them. There the same committer runs with several
// workers (pgCommitWorkers), each committing the group it took on its own
// connection, so PostgreSQL still works on a few groups at once. A group's
// ops are run in the order of their agent (groupOp.key, stable for one
// agent): every transaction then takes the agents' row locks in the same
// order, so two groups — of this server or of another replica — wait for
// each other but cannot deadlock on them.

// maxGroupOps bounds the writes of one group transaction (and so the
// latency a write can add to the others of its group).
const maxGroupOps = 256

// pgCommitWorkers is how many groups are committed at once on PostgreSQL
// (at most half the pool, at least one).
const pgCommitWorkers = 4

// errClosed is returned for writes handed to a closed Store.
var errClosed = errors.New("store closed")

// groupOp is one write waiting for the committer.
type groupOp struct {
	ctx context.Context
	// key is the agent whose rows the op writes ("" for other writes):
	// the order of the ops in a sorted group.
	key  string
	fn   func(ctx context.Context, tx *sql.Tx) error
	err  error
	done chan struct{}
}

// committer runs queued writes in shared transactions.
type committer struct {
	s       *Store
	ops     chan *groupOp
	quit    chan struct{} // closed by stop: the loops end after their group
	stopped chan struct{} // closed when every loop has ended
	close   sync.Once
	// sorted: run a group's ops in key order (PostgreSQL: lock order).
	sorted bool

	// groups and grouped count transactions and the writes they carried
	// (for tests).
	mu              sync.Mutex
	groups, grouped int
}

// newCommitter starts workers loops committing groups (1 on SQLite: one
// writer at a time).
func newCommitter(s *Store, workers int, sorted bool) *committer {
	c := &committer{s: s, ops: make(chan *groupOp, maxGroupOps), quit: make(chan struct{}), stopped: make(chan struct{}), sorted: sorted}
	var wg sync.WaitGroup
	for range max(workers, 1) {
		wg.Go(c.loop)
	}
	go func() { wg.Wait(); close(c.stopped) }()
	return c
}

// stop ends the loop after the group in progress and waits for it. Writes
// still queued then fail with errClosed.
func (c *committer) stop() {
	c.close.Do(func() { close(c.quit) })
	<-c.stopped
}

// do runs fn in the next group transaction and returns its error once the
// group is committed (or failed). fn must do nothing but statements on tx,
// and write rows of agent key only ("" when it writes others).
func (c *committer) do(ctx context.Context, key string, fn func(ctx context.Context, tx *sql.Tx) error) error {
	op := &groupOp{ctx: ctx, key: key, fn: fn, done: make(chan struct{})}
	select {
	case c.ops <- op:
	case <-c.quit:
		return errClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	// Once queued, wait for the verdict even if ctx ends: the group may be
	// committing it, and the caller must not be told "failed" for a write
	// that is durable (a retry would be recognised as a replay anyway).
	select {
	case <-op.done:
		return op.err
	case <-c.stopped:
		select {
		case <-op.done:
			return op.err
		default:
			return errClosed // queued after the last group: never run
		}
	}
}

func (c *committer) loop() {
	group := make([]*groupOp, 0, maxGroupOps)
	for {
		select {
		case <-c.quit:
			return
		case op := <-c.ops:
			group = append(group[:0], op)
		}
	more:
		for len(group) < maxGroupOps {
			select {
			case op := <-c.ops:
				group = append(group, op)
			default:
				break more
			}
		}
		c.commit(group)
		clear(group)
	}
}

// commit runs one group in one transaction. It first runs every op
// straight (no savepoints: a savepoint makes SQLite copy every page it
// touches to a sub-journal); only when an op fails does it roll the
// transaction back and run the group again with a savepoint per op, so
// that the failing op is undone alone.
func (c *committer) commit(group []*groupOp) {
	var live []*groupOp
	for _, op := range group {
		if err := op.ctx.Err(); err != nil {
			op.err = err // its caller is gone: not stored, not acknowledged
			close(op.done)
			continue
		}
		live = append(live, op)
	}
	if len(live) == 0 {
		return
	}
	if c.sorted {
		slices.SortStableFunc(live, func(a, b *groupOp) int { return strings.Compare(a.key, b.key) })
	}
	err := c.run(live, false)
	if errors.Is(err, errOpFailed) {
		for _, op := range live {
			op.err = nil
		}
		err = c.run(live, true)
	}
	ran := 0
	for _, op := range live {
		if err != nil && !errors.Is(err, errOpFailed) && op.err == nil {
			op.err = err
		}
		if op.err == nil {
			ran++
		}
		close(op.done)
	}
	c.mu.Lock()
	if err == nil || errors.Is(err, errOpFailed) {
		c.groups++
		c.grouped += ran
	}
	c.mu.Unlock()
}

// errOpFailed: an op of the group failed (its error is in op.err).
var errOpFailed = errors.New("an operation of the group failed")

// run runs the ops in one transaction and commits it. Without savepoints
// it stops at the first failing op, rolls back and returns errOpFailed;
// with them, a failing op is rolled back to its savepoint and the others
// commit (errOpFailed is returned after the commit).
func (c *committer) run(ops []*groupOp, savepoints bool) error {
	// The transaction is the committer's, not one caller's: a caller that
	// gives up must not roll back the others.
	ctx := context.Background()
	tx, err := c.s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if c.s.engine == SQLite {
		ctx = context.WithValue(ctx, stmtCacheKey{}, stmtCache{})
	}
	if err := c.s.boundIdle(ctx, tx); err != nil {
		tx.Rollback()
		return err
	}
	failed := false
	exec := func(stmt string) error {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			tx.Rollback()
			return fmt.Errorf("%s: %w", stmt, err)
		}
		return nil
	}
	for _, op := range ops {
		if savepoints {
			if err := exec("SAVEPOINT group_op"); err != nil {
				return err
			}
		}
		if err := op.fn(ctx, tx); err != nil {
			op.err, failed = err, true
			if !savepoints {
				tx.Rollback()
				return errOpFailed
			}
			if err := exec("ROLLBACK TO SAVEPOINT group_op"); err != nil {
				return err
			}
		}
		if savepoints {
			if err := exec("RELEASE SAVEPOINT group_op"); err != nil {
				return err
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	if failed {
		return errOpFailed
	}
	return nil
}

// write runs fn, which writes the rows of agent key only ("" when it writes
// others), in a group transaction.
func (s *Store) write(ctx context.Context, key string, fn func(ctx context.Context, tx *sql.Tx) error) error {
	if s.group == nil {
		return s.inTx(ctx, func(tx *sql.Tx) error { return fn(ctx, tx) })
	}
	return s.group.do(ctx, key, fn)
}

// Prepared statements of a group transaction.
//
// The modernc SQLite driver compiles a statement's text at every execution
// (sqlite3_prepare_v2: a quarter of the committer's time at 10,000
// records/s). The ops of one group run the same few statements again and
// again, so on SQLite a group transaction prepares each text once, on first
// use, and the ops execute the prepared statement; database/sql closes them
// when the transaction ends. (pgx caches prepared statements per
// connection by itself.)

type stmtCacheKey struct{}

// stmtCache is one transaction's statements by text; used by one
// goroutine at a time (the committer running the group).
type stmtCache map[string]*sql.Stmt

// stmt returns the transaction's prepared statement for query, or nil when
// ctx carries no cache (outside a SQLite group transaction).
func stmt(ctx context.Context, tx *sql.Tx, query string) (*sql.Stmt, error) {
	c, _ := ctx.Value(stmtCacheKey{}).(stmtCache)
	if c == nil {
		return nil, nil
	}
	if st := c[query]; st != nil {
		return st, nil
	}
	st, err := tx.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	c[query] = st
	return st, nil
}

func (s *Store) txExec(ctx context.Context, tx *sql.Tx, query string, args ...any) (sql.Result, error) {
	st, err := stmt(ctx, tx, query)
	if err != nil {
		return nil, err
	}
	if st == nil {
		return tx.ExecContext(ctx, query, args...)
	}
	return st.ExecContext(ctx, args...)
}

func (s *Store) txQuery(ctx context.Context, tx *sql.Tx, query string, args ...any) (*sql.Rows, error) {
	st, err := stmt(ctx, tx, query)
	if err != nil {
		return nil, err
	}
	if st == nil {
		return tx.QueryContext(ctx, query, args...)
	}
	return st.QueryContext(ctx, args...)
}

// txQueryRow is tx.QueryRowContext through the cache; a failed prepare
// shows as the row's error, as with QueryRowContext.
func (s *Store) txQueryRow(ctx context.Context, tx *sql.Tx, query string, args ...any) rowScanner {
	st, err := stmt(ctx, tx, query)
	if err != nil {
		return errRow{err}
	}
	if st == nil {
		return tx.QueryRowContext(ctx, query, args...)
	}
	return st.QueryRowContext(ctx, args...)
}

type rowScanner interface{ Scan(dest ...any) error }

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
