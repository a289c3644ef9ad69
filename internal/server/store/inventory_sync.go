package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"
)

// syncBatch is how many volumes one sync transaction writes.
const syncBatch = 500

// SyncInventory repairs what the judged records cannot see when they are
// written: a host renamed by a Hello without a snapshot (its rows and
// documents take the new hostname) and rows of volumes no longer present
// (ingest removes them with the snapshot that marks them gone; this
// catches any other way). It derives nothing: ingest's judge writes every
// judged column. Safe to run concurrently, also from several replicas.
//
// With a non-zero since (an incremental sync) it only reads the latest
// receive time of a geometry record (SyncStats.LastReceived): a snapshot
// brings its volumes' judged records, and the rows of the volumes it no
// longer lists go with it. A rename shows at the next full sync, or with
// the host's next snapshot.
func (s *Store) SyncInventory(ctx context.Context, since time.Time) (SyncStats, error) {
	var st SyncStats
	last, err := s.LastGeometryReceived(ctx)
	if err != nil {
		return st, fmt.Errorf("sync inventory: %w", err)
	}
	st.LastReceived = last
	if !since.IsZero() {
		return st, nil
	}
	renamed, gone, err := s.inventoryBehind(ctx)
	if err != nil {
		return st, fmt.Errorf("sync inventory: %w", err)
	}
	for chunk := range slices.Chunk(gone, syncBatch) {
		if err := s.removeInventory(ctx, chunk); err != nil {
			return st, fmt.Errorf("sync inventory: remove: %w", err)
		}
		st.Removed += len(chunk)
	}
	if len(renamed) > 0 {
		n, err := s.renameInventory(ctx, renamed)
		if err != nil {
			return st, fmt.Errorf("sync inventory: rename: %w", err)
		}
		st.Updated = n
	}
	return st, nil
}

// inventoryBehind lists the agents whose rows carry another hostname than
// the agent's (renamed) and the ids of the rows whose volume is gone.
func (s *Store) inventoryBehind(ctx context.Context) (renamed, gone []string, err error) {
	rows, err := s.db.QueryContext(ctx, `
SELECT DISTINCT f.agent_id, '' FROM inventory_volumes f JOIN agents a ON a.agent_id = f.agent_id WHERE f.hostname <> a.hostname
UNION ALL
SELECT '', f.volume_id FROM inventory_volumes f
LEFT JOIN volumes v ON v.agent_id = f.agent_id AND v.mount_point = f.mount_point AND v.present
WHERE v.agent_id IS NULL`)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var agent, id string
		if err := rows.Scan(&agent, &id); err != nil {
			return nil, nil, err
		}
		if agent != "" {
			renamed = append(renamed, agent)
		} else {
			gone = append(gone, id)
		}
	}
	return renamed, gone, rows.Err()
}

// renameInventory gives the rows (and documents) of the agents their
// agent's hostname; it returns how many rows changed.
func (s *Store) renameInventory(ctx context.Context, agents []string) (int, error) {
	n := 0
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		n = 0
		for _, agent := range agents {
			var host string
			if err := tx.QueryRowContext(ctx, s.q(`SELECT hostname FROM agents WHERE agent_id = ?`), agent).Scan(&host); err != nil {
				return err
			}
			res, err := tx.ExecContext(ctx, s.q(`UPDATE inventory_volumes SET hostname = ? WHERE agent_id = ? AND hostname <> ?`), host, agent, host)
			if err != nil {
				return err
			}
			rows, _ := res.RowsAffected()
			n += int(rows)
			if err := s.renameDocs(ctx, tx, agent, host); err != nil {
				return err
			}
		}
		return bumpGeneration(ctx, tx)
	})
	return n, err
}

// renameDocs sets the host of the agent's documents.
func (s *Store) renameDocs(ctx context.Context, tx *sql.Tx, agent, host string) error {
	rows, err := tx.QueryContext(ctx, s.q(`SELECT d.volume_id, d.doc FROM inventory_docs d
JOIN inventory_volumes f ON f.volume_id = d.volume_id WHERE f.agent_id = ?`), agent)
	if err != nil {
		return err
	}
	docs := map[string][]byte{}
	for rows.Next() {
		var id string
		var doc []byte
		if err := rows.Scan(&id, &doc); err != nil {
			rows.Close()
			return err
		}
		docs[id] = doc
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for id, doc := range docs {
		if len(doc) == 0 {
			continue // none rendered
		}
		if _, err := tx.ExecContext(ctx, s.q(`UPDATE inventory_docs SET doc = ? WHERE volume_id = ?`), docWithHost(doc, host), id); err != nil {
			return err
		}
	}
	return nil
}

// removeInventory deletes the inventory rows of volumes that are gone —
// only if the volume is still gone (a newer snapshot may list it again).
func (s *Store) removeInventory(ctx context.Context, ids []string) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		in := placeholders(len(ids))
		args := make([]any, len(ids))
		for i, id := range ids {
			args[i] = id
		}
		if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM inventory_findings WHERE volume_id IN (`+in+`)`), args...); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM inventory_docs WHERE volume_id IN (`+in+`)`), args...); err != nil {
			return err
		}
		if err := s.removeArrays(ctx, tx, args); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, s.q(`DELETE FROM inventory_volumes WHERE volume_id IN (`+in+`)
AND NOT EXISTS (SELECT 1 FROM volumes v WHERE v.agent_id = inventory_volumes.agent_id
    AND v.mount_point = inventory_volumes.mount_point AND v.present)`), args...)
		if err != nil {
			return err
		}
		return bumpGeneration(ctx, tx)
	})
}

// AnalyzeInventory gathers the planner's statistics of the inventory
// tables: the planners choose between the filter and the sort indexes
// from them. The judge runs it after a large change rather than wait for
// autovacuum (PostgreSQL) or never (SQLite).
func (s *Store) AnalyzeInventory(ctx context.Context) error {
	for _, t := range []string{"inventory_volumes", "inventory_findings", "inventory_docs"} {
		if _, err := s.db.ExecContext(ctx, "ANALYZE "+t); err != nil {
			return fmt.Errorf("analyze %s: %w", t, err)
		}
	}
	return nil
}

// LastGeometryReceived is the latest receive time of a stored geometry
// record (the zero time without any): one probe of the
// records_geometry_received index. A reader that saw it and sees it again
// has no new geometry to sync (bar transactions that commit late, which
// SyncInventory's margin covers).
func (s *Store) LastGeometryReceived(ctx context.Context) (time.Time, error) {
	var last sql.NullInt64
	if err := s.db.QueryRowContext(ctx, `SELECT MAX(received_ns) FROM records WHERE kind = 'geometry'`).Scan(&last); err != nil {
		return time.Time{}, fmt.Errorf("last geometry received: %w", err)
	}
	return fromUnixNano(last.Int64), nil
}

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

// tupleList is n copies of tuple, comma-separated: the rows of a
// multi-row VALUES list.
func tupleList(tuple string, n int) string {
	return strings.TrimSuffix(strings.Repeat(tuple+", ", n), ", ")
}

// putInventory upserts judged records (inventory rows, their documents)
// and replaces their findings, in tx, and moves the inventory generation
// on. A row of an older sequence than the stored one changes nothing.
// hashes are the records' judgedHash, one each.
func (s *Store) putInventory(ctx context.Context, tx *sql.Tx, vols []InventoryVolume, hashes []string) error {
	if len(vols) == 0 {
		return nil
	}
	for i := 0; i < len(vols); i += rowsPerInsert {
		end := min(i+rowsPerInsert, len(vols))
		chunk := vols[i:end]
		if err := s.upsertInventoryRows(ctx, tx, chunk, hashes[i:end]); err != nil {
			return fmt.Errorf("put inventory: %w", err)
		}
		ids := make([]any, len(chunk))
		for i, v := range chunk {
			ids[i] = v.ID
		}
		if _, err := s.txExec(ctx, tx, s.q(`DELETE FROM inventory_findings WHERE volume_id IN (`+placeholders(len(ids))+`)`), ids...); err != nil {
			return fmt.Errorf("put inventory findings: %w", err)
		}
		if err := s.upsertInventoryDocs(ctx, tx, chunk); err != nil {
			return fmt.Errorf("put inventory docs: %w", err)
		}
	}
	if err := s.insertFindings(ctx, tx, vols); err != nil {
		return fmt.Errorf("put inventory findings: %w", err)
	}
	if err := s.putArrays(ctx, tx, vols); err != nil {
		return fmt.Errorf("put inventory arrays: %w", err)
	}
	return bumpGeneration(ctx, tx)
}

// inventoryRowColumns are the columns of inventory_volumes that
// upsertInventoryRows writes, volume_id first (computed once, never
// written).
var inventoryRowColumns = slices.Concat([]string{"volume_id", "agent_id", "mount_point", "hostname", "sequence", "observed_ns",
	"device", "fs_type", "verdict", "data_offset_bytes", "stripe_unit_bytes", "allocation_unit_bytes", "raid_level", "media", "profile"},
	splitColumns[:], granularityColumns[:],
	[]string{"stripe_unit_source", "stripe_unit_confidence", "measured_split_cost_seconds", "measured_split_cost_low_seconds",
		"measured_split_cost_high_seconds"},
	penaltyColumns[:],
	[]string{"severity", "severity_rank", "findings", "rules", "rules_version", "judged_ns", "rules_epoch", "judged_hash"})

// upsertInventoryRows writes the rows of vols (at most rowsPerInsert); a
// stored row of a newer sequence stays.
func (s *Store) upsertInventoryRows(ctx context.Context, tx *sql.Tx, vols []InventoryVolume, hashes []string) error {
	cols := inventoryRowColumns
	args := make([]any, 0, len(vols)*len(cols))
	for i, v := range vols {
		sev := v.Severity
		if sev == "" {
			sev = "none"
		}
		args = append(args, v.ID, v.AgentID, v.MountPoint, v.Hostname, int64(v.Sequence), unixNano(v.ObservedAt),
			v.Device, v.FSType, v.Verdict, v.DataOffsetBytes, v.StripeUnitBytes, v.AllocationUnitBytes,
			v.RAIDLevel, v.Media, v.Profile)
		args = appendSizes(args, v.SplitFraction)
		args = appendSizes(args, v.GranularitySplit)
		args = append(args, v.StripeUnitSource, v.StripeUnitConfidence, v.MeasuredSplitCost, v.MeasuredSplitCostLow, v.MeasuredSplitCostHigh)
		args = appendSizes(args, v.MeasuredPenalty)
		args = append(args, sev, v.SeverityRank, len(v.Findings), strings.Join(v.Rules, ","), v.RulesVersion, unixNano(v.JudgedAt), v.RulesEpoch, hashes[i])
	}
	set := make([]string, 0, len(cols)-3)
	for _, c := range cols[3:] { // not the key (volume_id, agent_id, mount_point)
		set = append(set, c+" = excluded."+c)
	}
	_, err := s.txExec(ctx, tx, s.q(insertValues("inventory_volumes", cols, len(vols))+`
ON CONFLICT (volume_id) DO UPDATE SET `+strings.Join(set, ", ")+`
WHERE inventory_volumes.sequence <= excluded.sequence`), args...)
	return err
}

// upsertInventoryDocs writes the documents of vols under the rows' rule:
// a document rendered from an older sequence than the stored one changes
// nothing.
func (s *Store) upsertInventoryDocs(ctx context.Context, tx *sql.Tx, vols []InventoryVolume) error {
	args := make([]any, 0, 3*len(vols))
	for _, v := range vols {
		doc := v.Doc
		if doc == nil {
			doc = []byte{}
		}
		args = append(args, v.ID, int64(v.Sequence), doc)
	}
	_, err := s.txExec(ctx, tx, s.q(insertValues("inventory_docs", []string{"volume_id", "sequence", "doc"}, len(vols))+`
ON CONFLICT (volume_id) DO UPDATE SET sequence = excluded.sequence, doc = excluded.doc
WHERE inventory_docs.sequence <= excluded.sequence`), args...)
	return err
}

// insertFindings writes the findings of vols (their old ones deleted).
func (s *Store) insertFindings(ctx context.Context, tx *sql.Tx, vols []InventoryVolume) error {
	var args []any
	n := 0
	flush := func() error {
		if n == 0 {
			return nil
		}
		cols := []string{"volume_id", "ordinal", "rule", "severity", "message", "remediation"}
		_, err := s.txExec(ctx, tx, s.q(insertValues("inventory_findings", cols, n)+` ON CONFLICT (volume_id, ordinal) DO NOTHING`), args...)
		args, n = args[:0], 0
		return err
	}
	for _, v := range vols {
		for i, f := range v.Findings {
			args = append(args, v.ID, i, f.Rule, f.Severity, f.Message, f.Remediation)
			if n++; n == rowsPerInsert {
				if err := flush(); err != nil {
					return err
				}
			}
		}
	}
	return flush()
}

// insertValues is "INSERT INTO table (cols) VALUES (?, ...), ..." for rows
// rows.
func insertValues(table string, cols []string, rows int) string {
	row := "(" + placeholders(len(cols)) + ")"
	return "INSERT INTO " + table + " (" + strings.Join(cols, ", ") + ") VALUES " +
		tupleList(row, rows)
}
