package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// Most snapshots of a fleet repeat the one before (agents refresh their
// geometry periodically). Such a snapshot judges to the same judged
// record, so its ingest keeps the stored one: the record's hash
// (inventory_volumes.judged_hash) says whether anything the judge decided
// changed, and when nothing did only where and when the volume was seen
// move on (sequence, observed time, host; the document's tail), in the
// same transaction. judged_ns, findings and arrays stay as they are.

// judgedHash is the hash of what the judge decided of a volume: its
// judged record without where it lives (id, agent, mount point, host,
// sequence, observed time) or when it was judged; the document as the
// judge rendered it, before docWhere.
func judgedHash(iv InventoryVolume) string {
	iv.ID, iv.AgentID, iv.MountPoint, iv.Hostname = "", "", "", ""
	iv.Sequence, iv.ObservedAt, iv.JudgedAt = 0, time.Time{}, time.Time{}
	iv.TopFinding, iv.Baseline = nil, nil
	b, err := json.Marshal(iv)
	if err != nil {
		return "" // never equal to a stored hash: the record is rewritten
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// judgedHashes returns the judged-record hashes of the agent's volumes,
// by mount point (those with a known hash).
func (s *Store) judgedHashes(ctx context.Context, tx *sql.Tx, agentID string) (map[string]string, error) {
	rows, err := s.txQuery(ctx, tx, s.q(`SELECT mount_point, judged_hash FROM inventory_volumes WHERE agent_id = ? AND judged_hash <> ''`), agentID)
	if err != nil {
		return nil, fmt.Errorf("judged hashes of %q: %w", agentID, err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var mp, h string
		if err := rows.Scan(&mp, &h); err != nil {
			return nil, fmt.Errorf("judged hashes of %q: %w", agentID, err)
		}
		out[mp] = h
	}
	return out, rows.Err()
}

// moveJudged moves the stored judged records of rows (each a judged
// record equal to the stored one but for where it lives) to their
// sequence, observed time, host and document, and the inventory
// generation on, a statement for each rowsPerInsert rows. A stored record
// of a newer sequence stays.
func (s *Store) moveJudged(ctx context.Context, tx *sql.Tx, rows []InventoryVolume) error {
	if len(rows) == 0 {
		return nil
	}
	for chunk := range slices.Chunk(rows, rowsPerInsert) {
		args := make([]any, 0, 4*len(chunk))
		for _, v := range chunk {
			args = append(args, v.ID, int64(v.Sequence), unixNano(v.ObservedAt), v.Hostname)
		}
		// VALUES columns are column1, column2, ... in both engines.
		if _, err := s.txExec(ctx, tx, s.q(`UPDATE inventory_volumes SET sequence = n.column2, observed_ns = n.column3, hostname = n.column4
FROM (VALUES `+tupleList("(CAST(? AS TEXT), CAST(? AS BIGINT), CAST(? AS BIGINT), CAST(? AS TEXT))", len(chunk))+`) AS n
WHERE inventory_volumes.volume_id = n.column1 AND inventory_volumes.sequence <= n.column2`), args...); err != nil {
			return fmt.Errorf("move judged records: %w", err)
		}
		if err := s.upsertInventoryDocs(ctx, tx, chunk); err != nil {
			return fmt.Errorf("move judged documents: %w", err)
		}
	}
	return bumpGeneration(ctx, tx)
}
