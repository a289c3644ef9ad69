package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"
)

// Retention: records (with their probe results) older than the server's
// store.retention are pruned, in bounded batches, by the one replica that
// leads the retention loop (internal/server/retention). What is never pruned,
// whatever its age:
//
//   - a record the dedup has not settled (agent sequence above its
//     incarnation's high_water): a gap below it may still be filled;
//   - a probe record the evaluator has not judged (server sequence above
//     baseline_watermarks.evaluated_through);
//   - a geometry record the inventory history has not read (above
//     inventory_history_mark), or that a volumes row refers to (the latest
//     geometry of every volume, present or gone).
//
// The dedup keeps working over pruned rows: a prune moves the
// incarnation's pruned_through to the largest agent sequence it removed
// (never above high_water), and AppendBatchFrom takes a sequence at or
// below it as a duplicate (storeBatch). The tables derived from records
// (baseline states, probe counts, the inventory) hold one row per volume
// or per change and are kept.

// PruneStats says what one PruneBatch removed.
type PruneStats struct {
	Records      int // rows of records (probe, geometry and rejected)
	ProbeResults int // rows of probe_results
	// Done: fewer rows than the limit were eligible — nothing older is left
	// to prune until more records age.
	Done bool
	// Next is where the next batch of the same pass starts.
	Next PruneCursor
}

// PruneCursor is a position in the walk over records by receive time
// (the records_received index): a pass resumes after the rows it kept.
type PruneCursor struct {
	ReceivedNS int64
	AgentID    string
	Sequence   int64
}

// pruneKey is one record a batch removes.
type pruneKey struct {
	agentID, incarnation, kind string
	sequence, agentSeq         int64
}

// pruneCandidates reads, from after, up to limit records received before
// cutoff and the next cursor; eligible are those the rules above let go.
const pruneCandidatesSQL = `SELECT r.agent_id, r.sequence, r.incarnation, r.agent_sequence, r.kind, r.received_ns,
    CASE WHEN r.agent_sequence <= i.high_water
      AND (r.kind <> 'probe' OR r.sequence <= COALESCE((SELECT w.evaluated_through FROM baseline_watermarks w WHERE w.agent_id = r.agent_id), 0))
      AND (r.kind <> 'member-io' OR r.sequence <= COALESCE((SELECT w.judged_through FROM member_watermarks w WHERE w.agent_id = r.agent_id), 0))
      AND (r.kind <> 'database' OR r.sequence <= COALESCE((SELECT w.evaluated_through FROM database_watermarks w WHERE w.agent_id = r.agent_id), 0))
      AND (r.kind <> 'geometry' OR (r.sequence <= COALESCE((SELECT m.sequence FROM inventory_history_mark m WHERE m.agent_id = r.agent_id), 0)
        AND NOT EXISTS (SELECT 1 FROM volumes v WHERE v.agent_id = r.agent_id AND v.sequence = r.sequence)))
    THEN 1 ELSE 0 END
FROM records r
JOIN agent_incarnations i ON i.agent_id = r.agent_id AND i.incarnation = r.incarnation
WHERE r.received_ns < ? AND (r.received_ns, r.agent_id, r.sequence) > (?, ?, ?)
ORDER BY r.received_ns, r.agent_id, r.sequence
LIMIT ?`

// PruneBatch removes, in one transaction, the eligible records among the
// next limit records received before cutoff after cur (the zero cursor:
// from the oldest), with their probe results. A fenced ctx (WithFence)
// makes it refuse with ErrFenced once another replica leads. A pass calls
// it with stats.Next until stats.Done.
func (s *Store) PruneBatch(ctx context.Context, cutoff time.Time, cur PruneCursor, limit int) (PruneStats, error) {
	if limit <= 0 {
		return PruneStats{}, fmt.Errorf("prune: %w: limit %d", ErrInvalid, limit)
	}
	var st PruneStats
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		st = PruneStats{Next: cur}
		keys, n, next, err := s.pruneCandidates(ctx, tx, cutoff, cur, limit)
		if err != nil {
			return err
		}
		st.Next, st.Done = next, n < limit
		if len(keys) == 0 {
			return nil
		}
		if st.ProbeResults, err = s.deleteKeys(ctx, tx, "probe_results", keys); err != nil {
			return err
		}
		if _, err = s.deleteKeys(ctx, tx, "member_io", keys); err != nil {
			return err
		}
		if _, err = s.deleteKeys(ctx, tx, "database_io", keys); err != nil {
			return err
		}
		if st.Records, err = s.deleteKeys(ctx, tx, "records", keys); err != nil {
			return err
		}
		return s.markPruned(ctx, tx, keys)
	})
	if err != nil {
		return PruneStats{}, fmt.Errorf("prune: %w", err)
	}
	return st, nil
}

func (s *Store) pruneCandidates(ctx context.Context, tx *sql.Tx, cutoff time.Time, cur PruneCursor, limit int) (keys []pruneKey, n int, next PruneCursor, err error) {
	next = cur
	rows, err := tx.QueryContext(ctx, s.q(pruneCandidatesSQL), unixNano(cutoff), cur.ReceivedNS, cur.AgentID, cur.Sequence, limit)
	if err != nil {
		return nil, 0, next, fmt.Errorf("candidates: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var k pruneKey
		var eligible int
		if err := rows.Scan(&k.agentID, &k.sequence, &k.incarnation, &k.agentSeq, &k.kind, &next.ReceivedNS, &eligible); err != nil {
			return nil, 0, next, fmt.Errorf("candidates: %w", err)
		}
		n++
		next.AgentID, next.Sequence = k.agentID, k.sequence
		if eligible == 1 {
			keys = append(keys, k)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, 0, next, fmt.Errorf("candidates: %w", err)
	}
	return keys, n, next, nil
}

// deleteKeys deletes the rows of table (records or probe_results) with
// the keys' (agent_id, sequence), rowsPerInsert keys a statement.
func (s *Store) deleteKeys(ctx context.Context, tx *sql.Tx, table string, keys []pruneKey) (int, error) {
	total := 0
	for start := 0; start < len(keys); start += rowsPerInsert {
		chunk := keys[start:min(start+rowsPerInsert, len(keys))]
		var b strings.Builder
		b.WriteString("DELETE FROM " + table + " WHERE (agent_id, sequence) IN (VALUES ")
		args := make([]any, 0, 2*len(chunk))
		b.WriteString(tupleList("(?, CAST(? AS BIGINT))", len(chunk)))
		for _, k := range chunk {
			args = append(args, k.agentID, k.sequence)
		}
		b.WriteString(")")
		res, err := tx.ExecContext(ctx, s.q(b.String()), args...)
		if err != nil {
			return total, fmt.Errorf("delete %s: %w", table, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return total, fmt.Errorf("delete %s: %w", table, err)
		}
		total += int(n)
	}
	return total, nil
}

// markPruned moves each incarnation's pruned_through up to the largest
// agent sequence the batch removed of it, and counts the removed records
// by kind (records_pruned: RecordCounts adds them back).
func (s *Store) markPruned(ctx context.Context, tx *sql.Tx, keys []pruneKey) error {
	type inc struct{ agentID, incarnation string }
	top := map[inc]int64{}
	kinds := map[string]int64{}
	for _, k := range keys {
		i := inc{k.agentID, k.incarnation}
		top[i] = max(top[i], k.agentSeq)
		kinds[k.kind]++
	}
	for kind, n := range kinds {
		if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO records_pruned (kind, pruned) VALUES (?, ?)
ON CONFLICT (kind) DO UPDATE SET pruned = records_pruned.pruned + excluded.pruned`), kind, n); err != nil {
			return fmt.Errorf("pruned counts: %w", err)
		}
	}
	for i, seq := range top {
		if _, err := tx.ExecContext(ctx, s.q(`UPDATE agent_incarnations SET pruned_through = ?
WHERE agent_id = ? AND incarnation = ? AND pruned_through < ?`), seq, i.agentID, i.incarnation, seq); err != nil {
			return fmt.Errorf("pruned through: %w", err)
		}
	}
	return nil
}

// prunedThrough is the incarnation's pruned_through: replays at or below
// it are duplicates even when their row is gone.
func (s *Store) prunedThrough(ctx context.Context, tx *sql.Tx, agentID, incarnation string) (uint64, error) {
	var seq int64
	if err := s.txQueryRow(ctx, tx, s.q(`SELECT pruned_through FROM agent_incarnations WHERE agent_id = ? AND incarnation = ?`),
		agentID, incarnation).Scan(&seq); err != nil && err != sql.ErrNoRows {
		return 0, fmt.Errorf("pruned through: %w", err)
	}
	return uint64(seq), nil
}

// Incarnation rows. An agent starts a new spool incarnation at every
// start, so agent_incarnations gains a row per agent start; retention
// removes the rows the dedup no longer needs. The rule: a row goes when
//
//   - it is not the agent's current incarnation (agents.incarnation, the
//     one that said Hello last) — and the agent has one: an agent that
//     never said Hello with an incarnation keeps all its rows;
//   - it is not the legacy, empty incarnation (an upgraded agent sends its
//     older records with it after its new incarnation's Hello);
//   - no record of it is stored any more (all pruned, or none ever was):
//     records above its high_water are never pruned, so an incarnation
//     with a gap still to fill keeps its row;
//   - and it was last seen (Hello or report) before the retention cutoff.
//
// Why this keeps the replay dedup: an agent sends the records of its
// spool oldest incarnation first, saying Hello with each before its
// records, and never speaks with an incarnation again once a newer one
// said Hello (internal/agent/spool). So once the current incarnation is
// another, the agent can no longer replay this one's records; the
// last-seen condition adds the retention period as a margin: a second
// agent sharing the identity, still reporting with it, keeps its row (and
// its identity conflict counted), and so does a spool that, its ack file
// damaged, resends acknowledged segments it had not deleted yet. Records within retention keep their
// incarnation's row through the third condition.
const pruneIncarnationsSQL = `DELETE FROM agent_incarnations
WHERE last_seen_ns < ? AND incarnation <> '' AND (agent_id, incarnation) IN (
  SELECT i.agent_id, i.incarnation FROM agent_incarnations i JOIN agents a ON a.agent_id = i.agent_id
  WHERE a.incarnation <> '' AND i.incarnation <> '' AND i.incarnation <> a.incarnation AND i.last_seen_ns < ?
    AND NOT EXISTS (SELECT 1 FROM records r WHERE r.agent_id = i.agent_id AND r.incarnation = i.incarnation)
  ORDER BY i.agent_id, i.incarnation
  LIMIT ?)
AND incarnation <> (SELECT a.incarnation FROM agents a WHERE a.agent_id = agent_incarnations.agent_id)`

// PruneIncarnations removes, in one transaction, up to limit incarnation
// rows that the rule above lets go, last seen before cutoff; done when
// fewer were removed (nothing more to prune now). A fenced ctx makes it
// refuse with ErrFenced once another replica leads.
func (s *Store) PruneIncarnations(ctx context.Context, cutoff time.Time, limit int) (n int, done bool, err error) {
	if limit <= 0 {
		return 0, false, fmt.Errorf("prune incarnations: %w: limit %d", ErrInvalid, limit)
	}
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		c := unixNano(cutoff)
		res, err := tx.ExecContext(ctx, s.q(pruneIncarnationsSQL), c, c, limit)
		if err != nil {
			return err
		}
		m, err := res.RowsAffected()
		n = int(m)
		return err
	})
	if err != nil {
		return 0, false, fmt.Errorf("prune incarnations: %w", err)
	}
	return n, n < limit, nil
}
