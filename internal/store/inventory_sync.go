package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/plumbline/plumbline/internal/vocab"
)

// syncBatch is how many volumes one sync transaction writes.
const syncBatch = 500

// analyzeAfter is how many changed inventory rows make a sync refresh
// SQLite's statistics.
const analyzeAfter = 5000

// SyncInventory brings the inventory tables up to date with the volumes
// table: rows for volumes that are new, changed (a newer sequence) or whose
// host was renamed are derived again; rows of volumes that are gone are
// removed. It is safe to run concurrently, also from several replicas: a
// row is only ever replaced by one derived from the same or a newer
// sequence. A volume derive fails on is skipped (and counted).
//
// With a non-zero since, only the volumes of agents with a geometry record
// received at or after since are compared (volumes change only with a
// geometry record): a cheap incremental sync. SyncStats.LastReceived is
// the latest such receive time when the sync began: the since of the next
// incremental sync, less a margin for transactions still open and clock
// differences between replicas. A full sync now and then covers whatever
// the margin misses, and host renames (a Hello without a snapshot).
func (s *Store) SyncInventory(ctx context.Context, derive DeriveFunc, since time.Time) (SyncStats, error) {
	var st SyncStats
	last, err := s.LastGeometryReceived(ctx)
	if err != nil {
		return st, fmt.Errorf("sync inventory: %w", err)
	}
	st.LastReceived = last
	if !since.IsZero() && last.Before(since) {
		// No geometry record since: nothing can have changed (one probe of
		// records_geometry_received instead of the comparison).
		return st, nil
	}
	dirty, gone, err := s.inventoryBehind(ctx, since)
	if err != nil {
		return st, fmt.Errorf("sync inventory: %w", err)
	}
	for chunk := range slices.Chunk(gone, syncBatch) {
		if err := s.removeInventory(ctx, chunk); err != nil {
			return st, fmt.Errorf("sync inventory: remove: %w", err)
		}
		st.Removed += len(chunk)
	}
	for chunk := range slices.Chunk(dirty, syncBatch) {
		updated, failed, err := s.deriveInventory(ctx, derive, chunk)
		if err != nil {
			return st, fmt.Errorf("sync inventory: %w", err)
		}
		st.Updated, st.Failed = st.Updated+updated, st.Failed+failed
	}
	// The planners choose between the filter and the sort indexes from
	// table statistics; gather them after a large change rather than wait
	// for autovacuum (PostgreSQL) or never (SQLite).
	if st.Updated+st.Removed >= analyzeAfter {
		for _, t := range []string{"inventory_volumes", "inventory_findings", "inventory_docs"} {
			if _, err := s.db.ExecContext(ctx, "ANALYZE "+t); err != nil {
				return st, fmt.Errorf("sync inventory: analyze %s: %w", t, err)
			}
		}
	}
	return st, nil
}

// inventoryBehind lists the present volumes whose inventory row is
// missing or behind (dirty) and the ids of the rows whose volume is gone;
// with a non-zero since, only of agents with a geometry record received
// at or after it.
func (s *Store) inventoryBehind(ctx context.Context, since time.Time) (dirty []volumeKey, gone []string, err error) {
	query := `
SELECT v.agent_id, v.mount_point, v.present, f.volume_id
FROM volumes v JOIN agents a ON a.agent_id = v.agent_id
LEFT JOIN inventory_volumes f ON f.agent_id = v.agent_id AND f.mount_point = v.mount_point
WHERE ((v.present AND (f.volume_id IS NULL OR f.sequence <> v.sequence OR f.hostname <> a.hostname))
   OR (NOT v.present AND f.volume_id IS NOT NULL))`
	var args []any
	if !since.IsZero() {
		query += ` AND v.agent_id IN (SELECT DISTINCT agent_id FROM records WHERE kind = 'geometry' AND received_ns >= ?)`
		args = append(args, unixNano(since))
	}
	rows, err := s.db.QueryContext(ctx, s.q(query), args...)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var k volumeKey
		var present bool
		var id sql.NullString
		if err := rows.Scan(&k.agent, &k.mount, &present, &id); err != nil {
			return nil, nil, err
		}
		if present {
			dirty = append(dirty, k)
		} else {
			gone = append(gone, id.String)
		}
	}
	return dirty, gone, rows.Err()
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

// deriveInventory reads the volumes of keys, derives their rows and
// writes them.
func (s *Store) deriveInventory(ctx context.Context, derive DeriveFunc, keys []volumeKey) (updated, failed int, err error) {
	var b strings.Builder
	args := make([]any, 0, 2*len(keys))
	b.WriteString(`SELECT ` + volumeColumns + `
FROM volumes v JOIN agents a ON a.agent_id = v.agent_id
WHERE v.present AND (v.agent_id, v.mount_point) IN (VALUES `)
	b.WriteString(tupleList("(?, ?)", len(keys)))
	for _, k := range keys {
		args = append(args, k.agent, k.mount)
	}
	b.WriteString(")")
	vols, err := s.scanVolumes(ctx, s.q(b.String()), args...)
	if err != nil {
		return 0, 0, err
	}
	rows := make([]InventoryVolume, 0, len(vols))
	for _, v := range vols {
		iv, err := derive(v)
		if err != nil {
			failed++
			continue
		}
		iv.ID = VolumeID(v.AgentID, v.MountPoint)
		iv.AgentID, iv.MountPoint, iv.Hostname = v.AgentID, v.MountPoint, v.Hostname
		iv.Sequence, iv.ObservedAt = v.Sequence, v.ObservedAt
		rows = append(rows, iv)
	}
	if err := s.putInventory(ctx, rows); err != nil {
		return 0, failed, err
	}
	return len(rows), failed, nil
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

// scanVolumes runs a query whose columns are those of ListVolumes.
func (s *Store) scanVolumes(ctx context.Context, query string, args ...any) ([]Volume, error) {
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Volume
	for rows.Next() {
		var v Volume
		var seq, observed, stripe int64
		var offset sql.NullInt64
		var split [vocab.NumIOSizes]sql.NullFloat64
		dest := []any{&v.AgentID, &v.Hostname, &v.MountPoint, &v.Device, &v.FSType, &seq, &observed, &v.Geometry,
			&v.Verdict, &offset, &stripe}
		for i := range split {
			dest = append(dest, &split[i])
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		v.Sequence, v.ObservedAt, v.StripeUnitBytes = uint64(seq), fromUnixNano(observed), uint64(stripe)
		if offset.Valid {
			o := uint64(offset.Int64)
			v.DataOffsetBytes = &o
		}
		for i, f := range split {
			if f.Valid {
				v.SplitFraction[i] = &f.Float64
			}
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// putInventory upserts inventory rows and replaces their findings, in one
// transaction. A row derived from an older sequence than the stored one
// changes nothing.
func (s *Store) putInventory(ctx context.Context, vols []InventoryVolume) error {
	if len(vols) == 0 {
		return nil
	}
	return s.inTx(ctx, func(tx *sql.Tx) error {
		for chunk := range slices.Chunk(vols, rowsPerInsert) {
			if err := s.upsertInventoryRows(ctx, tx, chunk); err != nil {
				return fmt.Errorf("put inventory: %w", err)
			}
			ids := make([]any, len(chunk))
			for i, v := range chunk {
				ids[i] = v.ID
			}
			if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM inventory_findings WHERE volume_id IN (`+placeholders(len(ids))+`)`), ids...); err != nil {
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
	})
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
	[]string{"severity", "severity_rank", "findings", "rules"})

// upsertInventoryRows writes the rows of vols (at most rowsPerInsert); a
// stored row of a newer sequence stays.
func (s *Store) upsertInventoryRows(ctx context.Context, tx *sql.Tx, vols []InventoryVolume) error {
	cols := inventoryRowColumns
	args := make([]any, 0, len(vols)*len(cols))
	for _, v := range vols {
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
		args = append(args, sev, v.SeverityRank, len(v.Findings), strings.Join(v.Rules, ","))
	}
	set := make([]string, 0, len(cols)-3)
	for _, c := range cols[3:] { // not the key (volume_id, agent_id, mount_point)
		set = append(set, c+" = excluded."+c)
	}
	_, err := tx.ExecContext(ctx, s.q(insertValues("inventory_volumes", cols, len(vols))+`
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
	_, err := tx.ExecContext(ctx, s.q(insertValues("inventory_docs", []string{"volume_id", "sequence", "doc"}, len(vols))+`
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
		_, err := tx.ExecContext(ctx, s.q(insertValues("inventory_findings", cols, n)+` ON CONFLICT (volume_id, ordinal) DO NOTHING`), args...)
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
