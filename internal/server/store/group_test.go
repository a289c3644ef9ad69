package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestAppendBatchFromConcurrentAgents: many agents report at once (on
// SQLite their batches share group-commit transactions); every record is
// stored exactly once, every caller gets its own agent's result, a replayed
// batch is acknowledged as duplicates, and an unregistered agent's batch
// fails alone.
func TestAppendBatchFromConcurrentAgents(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := open(t, dsn)
		const agents, batches, per = 40, 8, 25
		for i := range agents {
			register(t, s, fmt.Sprintf("g%02d", i))
		}
		type result struct {
			agent         string
			stored, dupes []uint64
			hw            uint64
			err           error
		}
		results := make(chan result, agents+1)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range agents {
			id := fmt.Sprintf("g%02d", i)
			wg.Go(func() {
				<-start
				r := result{agent: id}
				for b := range batches {
					from := uint64(b*per + 1)
					got, err := s.AppendBatchFrom(ctx, id, "", from, probeRecords(from, from+per-1))
					if err != nil {
						r.err = err
						break
					}
					if got.HighWater != from+per-1 {
						r.err = fmt.Errorf("batch %d..%d: HighWater = %d, want %d", from, from+per-1, got.HighWater, from+per-1)
						break
					}
					r.stored = append(r.stored, got.Stored...)
					r.dupes = append(r.dupes, got.Duplicates...)
				}
				// A replay of the last batch (a lost acknowledgement).
				from := uint64((batches-1)*per + 1)
				if got, err := s.AppendBatchFrom(ctx, id, "", from, probeRecords(from, from+per-1)); err != nil {
					r.err = err
				} else {
					r.dupes = append(r.dupes, got.Duplicates...)
					r.hw = got.HighWater
				}
				results <- r
			})
		}
		wg.Go(func() {
			<-start
			_, err := s.AppendBatchFrom(ctx, "never-registered", "", 1, probeRecords(1, 5))
			results <- result{agent: "never-registered", err: err}
		})
		close(start)
		wg.Wait()
		close(results)
		for r := range results {
			if r.agent == "never-registered" {
				if !errors.Is(r.err, ErrUnknownAgent) {
					t.Errorf("AppendBatchFrom(never-registered) error = %v, want ErrUnknownAgent", r.err)
				}
				continue
			}
			if r.err != nil {
				t.Errorf("agent %s: %v", r.agent, r.err)
				continue
			}
			if d := cmp.Diff(seqs(1, batches*per), r.stored); d != "" {
				t.Errorf("agent %s: stored (-want +got):\n%s", r.agent, d)
			}
			if d := cmp.Diff(seqs((batches-1)*per+1, batches*per), r.dupes); d != "" {
				t.Errorf("agent %s: duplicates (-want +got):\n%s", r.agent, d)
			}
			if r.hw != batches*per {
				t.Errorf("agent %s: HighWater after the replay = %d, want %d", r.agent, r.hw, batches*per)
			}
		}
		if n, want := count(t, s, "records"), agents*batches*per; n != want {
			t.Errorf("records = %d, want %d (each exactly once)", n, want)
		}
		if n, want := count(t, s, "probe_results"), agents*batches*per; n != want {
			t.Errorf("probe_results = %d, want %d", n, want)
		}
		if s.group != nil {
			s.group.mu.Lock()
			groups, grouped := s.group.groups, s.group.grouped
			s.group.mu.Unlock()
			t.Logf("%d writes in %d group transactions", grouped, groups)
			if groups >= grouped {
				t.Errorf("%d writes in %d transactions: no batches were committed together", grouped, groups)
			}
		}
	})
}

// TestGroupFailingOpUndoneAlone: in one group, an op that wrote and then
// failed is undone alone; the ops before and after it commit, and each
// caller gets its own verdict.
func TestGroupFailingOpUndoneAlone(t *testing.T) {
	t.Parallel()
	forEachEngine(t, testGroupFailingOpUndoneAlone)
}

func testGroupFailingOpUndoneAlone(t *testing.T, dsn string) {
	ctx := context.Background()
	s := open(t, dsn)
	insert := func(id string) func(context.Context, *sql.Tx) error {
		return func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, s.q(`INSERT INTO agents (agent_id, hostname, os, kernel, machine_id, agent_version, first_seen_ns, last_seen_ns)
VALUES (?, ?, '', '', '', '', 1, 1)`), id, id)
			return err
		}
	}
	boom := errors.New("boom")
	ops := []*groupOp{
		{ctx: ctx, fn: insert("before"), done: make(chan struct{})},
		{ctx: ctx, fn: func(ctx context.Context, tx *sql.Tx) error {
			if err := insert("half-done")(ctx, tx); err != nil {
				return err
			}
			return boom
		}, done: make(chan struct{})},
		{ctx: ctx, fn: insert("after"), done: make(chan struct{})},
	}
	s.group.commit(ops)
	for i, want := range []error{nil, boom, nil} {
		<-ops[i].done
		if !errors.Is(ops[i].err, want) {
			t.Errorf("op %d: error %v, want %v", i, ops[i].err, want)
		}
	}
	hosts, err := s.ListHosts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, h := range hosts {
		ids = append(ids, h.ID)
	}
	slices.Sort(ids)
	if d := cmp.Diff([]string{"after", "before"}, ids); d != "" {
		t.Errorf("agents after the group (-want +got):\n%s", d)
	}
}

// TestGroupClosedStore: a write after Close fails cleanly.
func TestGroupClosedStore(t *testing.T) {
	t.Parallel()
	s, err := Open(context.Background(), engines[0].DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := s.UpsertAgent(context.Background(), Agent{ID: "late"}); !errors.Is(err, errClosed) {
		t.Errorf("UpsertAgent after Close: %v, want errClosed", err)
	}
}
