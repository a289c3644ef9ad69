package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// The inventory tables (migration 00003) are a query-friendly copy of the
// volumes table: one narrow row per present volume with every filter and
// sort column broken out, and its findings. SyncInventory keeps them up to
// date; the caller derives the columns from the geometry (the store does not
// read the wire format).

// ErrNotFound: no such volume or host.
var ErrNotFound = errors.New("not found")

// VolumeID is the stable id of an agent's volume: 16 hex digits of the
// SHA-256 of agent id and mount point. It never changes while the agent
// keeps its id and the volume its mount point.
func VolumeID(agentID, mountPoint string) string {
	h := sha256.New()
	h.Write([]byte(agentID))
	h.Write([]byte{0})
	h.Write([]byte(mountPoint))
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// InventoryVolume is one row of the inventory: a present volume with its
// query columns. Sizes and fractions that are unknown are -1.
type InventoryVolume struct {
	ID         string
	AgentID    string
	MountPoint string
	Hostname   string
	Sequence   uint64
	ObservedAt time.Time
	Device     string
	FSType     string
	Verdict    string

	DataOffsetBytes     int64
	StripeUnitBytes     int64
	AllocationUnitBytes int64
	RAIDLevel           string
	Media               string
	Profile             string
	// SplitFraction8K/64K are the offset-caused split (-1: unknown);
	// GranularitySplit8K/64K the split at any offset from the allocation
	// grid (-1: unknown). See plumbline.v1.Alignment.
	SplitFraction8K     float64
	SplitFraction64K    float64
	GranularitySplit8K  float64
	GranularitySplit64K float64
	// Severity is the worst finding's severity ("none" without findings);
	// SeverityRank orders it: critical 3, warning 2, info 1, none 0.
	Severity     string
	SeverityRank int
	// Rules are the findings' rule ids, sorted, without repeats.
	Rules []string
	// Findings, worst first. Filled by SyncInventory's caller; on reads only
	// the first (TopFinding) is returned.
	Findings   []Finding
	TopFinding *Finding

	// Geometry is the stored plumbline.v1.Volume (reads with geometry only).
	Geometry []byte
	// Baseline is the evaluator's state, nil when there is none.
	Baseline *BaselineState

	// Doc is the volume's JSON document as a page lists it, without the
	// baseline (the caller's DeriveFunc renders it; the store keeps it in
	// inventory_docs and returns it on reads with WithDoc). Empty when the
	// row was derived before there were documents.
	Doc []byte
}

// Finding is one alignment finding of an inventory volume.
type Finding struct {
	Rule        string
	Severity    string
	Message     string
	Remediation string
}

// BaselineState is the evaluator's latest judgement of a volume's probe
// latencies.
type BaselineState struct {
	AgentID    string
	MountPoint string
	State      string
	Degraded   bool
	Reason     string
	UpdatedAt  time.Time
}

// DeriveFunc turns a stored volume (with Geometry, Hostname, Sequence and
// ObservedAt filled) into its inventory row. ID, AgentID, MountPoint,
// Hostname, Sequence and ObservedAt are set by the store afterwards.
type DeriveFunc func(v Volume) (InventoryVolume, error)

// SyncStats says what one SyncInventory did.
type SyncStats struct {
	Updated, Removed, Failed int
	// LastReceived is the latest receive time of a geometry record when
	// the sync began.
	LastReceived time.Time
}

// syncBatch is how many volumes one sync transaction writes.
const syncBatch = 500

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
	var last sql.NullInt64
	if err := s.db.QueryRowContext(ctx, `SELECT MAX(received_ns) FROM records WHERE kind = 'geometry'`).Scan(&last); err != nil {
		return st, fmt.Errorf("sync inventory: %w", err)
	}
	st.LastReceived = fromUnixNano(last.Int64)
	if !since.IsZero() && (!last.Valid || last.Int64 < unixNano(since)) {
		// No geometry record since: nothing can have changed (one probe of
		// records_geometry_received instead of the comparison).
		return st, nil
	}
	type key struct{ agent, mount string }
	var dirty []key
	var gone []string
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
		return st, fmt.Errorf("sync inventory: %w", err)
	}
	for rows.Next() {
		var k key
		var present bool
		var id sql.NullString
		if err := rows.Scan(&k.agent, &k.mount, &present, &id); err != nil {
			rows.Close()
			return st, fmt.Errorf("sync inventory: %w", err)
		}
		if present {
			dirty = append(dirty, k)
		} else {
			gone = append(gone, id.String)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return st, fmt.Errorf("sync inventory: %w", err)
	}

	for chunk := range slices.Chunk(gone, syncBatch) {
		err := s.inTx(ctx, func(tx *sql.Tx) error {
			in := placeholders(len(chunk))
			args := make([]any, len(chunk))
			for i, id := range chunk {
				args[i] = id
			}
			// Only if the volume is still gone (a newer snapshot may list it again).
			if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM inventory_findings WHERE volume_id IN (`+in+`)`), args...); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM inventory_docs WHERE volume_id IN (`+in+`)`), args...); err != nil {
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
		if err != nil {
			return st, fmt.Errorf("sync inventory: remove: %w", err)
		}
		st.Removed += len(chunk)
	}

	for chunk := range slices.Chunk(dirty, syncBatch) {
		var b strings.Builder
		args := make([]any, 0, 2*len(chunk))
		b.WriteString(`SELECT v.agent_id, a.hostname, v.mount_point, v.device, v.fs_type, v.sequence, v.observed_ns, v.geometry,
    v.verdict, v.data_offset_bytes, v.stripe_unit_bytes, v.split_fraction_8k, v.split_fraction_64k
FROM volumes v JOIN agents a ON a.agent_id = v.agent_id
WHERE v.present AND (v.agent_id, v.mount_point) IN (VALUES `)
		for i, k := range chunk {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("(?, ?)")
			args = append(args, k.agent, k.mount)
		}
		b.WriteString(")")
		vols, err := s.scanVolumes(ctx, s.q(b.String()), args...)
		if err != nil {
			return st, fmt.Errorf("sync inventory: %w", err)
		}
		rowsOut := make([]InventoryVolume, 0, len(vols))
		for _, v := range vols {
			iv, err := derive(v)
			if err != nil {
				st.Failed++
				continue
			}
			iv.ID = VolumeID(v.AgentID, v.MountPoint)
			iv.AgentID, iv.MountPoint, iv.Hostname = v.AgentID, v.MountPoint, v.Hostname
			iv.Sequence, iv.ObservedAt = v.Sequence, v.ObservedAt
			rowsOut = append(rowsOut, iv)
		}
		if err := s.putInventory(ctx, rowsOut); err != nil {
			return st, fmt.Errorf("sync inventory: %w", err)
		}
		st.Updated += len(rowsOut)
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

// analyzeAfter is how many changed inventory rows make a sync refresh
// SQLite's statistics.
const analyzeAfter = 5000

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
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
		var s8, s64 sql.NullFloat64
		if err := rows.Scan(&v.AgentID, &v.Hostname, &v.MountPoint, &v.Device, &v.FSType, &seq, &observed, &v.Geometry,
			&v.Verdict, &offset, &stripe, &s8, &s64); err != nil {
			return nil, err
		}
		v.Sequence, v.ObservedAt, v.StripeUnitBytes = uint64(seq), fromUnixNano(observed), uint64(stripe)
		if offset.Valid {
			o := uint64(offset.Int64)
			v.DataOffsetBytes = &o
		}
		if s8.Valid {
			v.SplitFraction8K = &s8.Float64
		}
		if s64.Valid {
			v.SplitFraction64K = &s64.Float64
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
			var b strings.Builder
			b.WriteString(`INSERT INTO inventory_volumes (volume_id, agent_id, mount_point, hostname, sequence, observed_ns,
    device, fs_type, verdict, data_offset_bytes, stripe_unit_bytes, allocation_unit_bytes, raid_level, media, profile,
    split_fraction_8k, split_fraction_64k, granularity_split_fraction_8k, granularity_split_fraction_64k,
    severity, severity_rank, findings, rules) VALUES `)
			args := make([]any, 0, len(chunk)*23)
			ids := make([]any, 0, len(chunk))
			for i, v := range chunk {
				if i > 0 {
					b.WriteString(", ")
				}
				b.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
				sev := v.Severity
				if sev == "" {
					sev = "none"
				}
				args = append(args, v.ID, v.AgentID, v.MountPoint, v.Hostname, int64(v.Sequence), unixNano(v.ObservedAt),
					v.Device, v.FSType, v.Verdict, v.DataOffsetBytes, v.StripeUnitBytes, v.AllocationUnitBytes,
					v.RAIDLevel, v.Media, v.Profile, v.SplitFraction8K, v.SplitFraction64K,
					v.GranularitySplit8K, v.GranularitySplit64K, sev, v.SeverityRank,
					len(v.Findings), strings.Join(v.Rules, ","))
				ids = append(ids, v.ID)
			}
			b.WriteString(` ON CONFLICT (volume_id) DO UPDATE SET
    hostname = excluded.hostname, sequence = excluded.sequence, observed_ns = excluded.observed_ns,
    device = excluded.device, fs_type = excluded.fs_type, verdict = excluded.verdict,
    data_offset_bytes = excluded.data_offset_bytes, stripe_unit_bytes = excluded.stripe_unit_bytes,
    allocation_unit_bytes = excluded.allocation_unit_bytes, raid_level = excluded.raid_level, media = excluded.media,
    profile = excluded.profile, split_fraction_8k = excluded.split_fraction_8k,
    split_fraction_64k = excluded.split_fraction_64k,
    granularity_split_fraction_8k = excluded.granularity_split_fraction_8k,
    granularity_split_fraction_64k = excluded.granularity_split_fraction_64k, severity = excluded.severity,
    severity_rank = excluded.severity_rank, findings = excluded.findings, rules = excluded.rules
WHERE inventory_volumes.sequence <= excluded.sequence`)
			if _, err := tx.ExecContext(ctx, s.q(b.String()), args...); err != nil {
				return fmt.Errorf("put inventory: %w", err)
			}
			if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM inventory_findings WHERE volume_id IN (`+placeholders(len(ids))+`)`), ids...); err != nil {
				return fmt.Errorf("put inventory findings: %w", err)
			}
			// The documents, under the same rule: a document rendered from an
			// older sequence than the stored one changes nothing.
			var d strings.Builder
			d.WriteString(`INSERT INTO inventory_docs (volume_id, sequence, doc) VALUES `)
			dargs := make([]any, 0, 3*len(chunk))
			for i, v := range chunk {
				if i > 0 {
					d.WriteString(", ")
				}
				d.WriteString("(?, ?, ?)")
				doc := v.Doc
				if doc == nil {
					doc = []byte{}
				}
				dargs = append(dargs, v.ID, int64(v.Sequence), doc)
			}
			d.WriteString(` ON CONFLICT (volume_id) DO UPDATE SET sequence = excluded.sequence, doc = excluded.doc
WHERE inventory_docs.sequence <= excluded.sequence`)
			if _, err := tx.ExecContext(ctx, s.q(d.String()), dargs...); err != nil {
				return fmt.Errorf("put inventory docs: %w", err)
			}
		}
		type frow struct {
			id string
			n  int
			f  Finding
		}
		var fs []frow
		for _, v := range vols {
			for i, f := range v.Findings {
				fs = append(fs, frow{v.ID, i, f})
			}
		}
		for chunk := range slices.Chunk(fs, rowsPerInsert) {
			var b strings.Builder
			b.WriteString(`INSERT INTO inventory_findings (volume_id, ordinal, rule, severity, message, remediation) VALUES `)
			args := make([]any, 0, len(chunk)*6)
			for i, r := range chunk {
				if i > 0 {
					b.WriteString(", ")
				}
				b.WriteString("(?, ?, ?, ?, ?, ?)")
				args = append(args, r.id, r.n, r.f.Rule, r.f.Severity, r.f.Message, r.f.Remediation)
			}
			b.WriteString(` ON CONFLICT (volume_id, ordinal) DO NOTHING`)
			if _, err := tx.ExecContext(ctx, s.q(b.String()), args...); err != nil {
				return fmt.Errorf("put inventory findings: %w", err)
			}
		}
		return bumpGeneration(ctx, tx)
	})
}

// PutBaselineStates records the evaluator's latest state of volumes (one
// row per agent and mount point; a newer UpdatedAt replaces an older one).
// The inventory's `degraded` filter and the summary read them.
func (s *Store) PutBaselineStates(ctx context.Context, states []BaselineState) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		for _, b := range states {
			_, err := tx.ExecContext(ctx, s.q(`
INSERT INTO inventory_baseline (agent_id, mount_point, state, degraded, reason, updated_ns) VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (agent_id, mount_point) DO UPDATE SET state = excluded.state, degraded = excluded.degraded,
    reason = excluded.reason, updated_ns = excluded.updated_ns
WHERE inventory_baseline.updated_ns <= excluded.updated_ns`),
				b.AgentID, b.MountPoint, b.State, b.Degraded, b.Reason, unixNano(b.UpdatedAt))
			if err != nil {
				return fmt.Errorf("put baseline state %s:%s: %w", b.AgentID, b.MountPoint, err)
			}
		}
		if len(states) == 0 {
			return nil
		}
		return bumpGeneration(ctx, tx)
	})
}

// bumpGeneration moves the inventory generation on, in the transaction
// that changes the inventory tables: a reader that saw generation g and
// sees it again has seen no change since.
func bumpGeneration(ctx context.Context, tx *sql.Tx) error {
	if _, err := tx.ExecContext(ctx, `UPDATE inventory_generation SET generation = generation + 1 WHERE id = 1`); err != nil {
		return fmt.Errorf("inventory generation: %w", err)
	}
	return nil
}

// InventoryGeneration returns the inventory generation: a counter that
// every change to the inventory tables (SyncInventory's writes and
// removals, PutBaselineStates) moves on in its own transaction, from any
// process sharing the database. Equal generations: equal contents.
func (s *Store) InventoryGeneration(ctx context.Context) (uint64, error) {
	var g int64
	if err := s.db.QueryRowContext(ctx, `SELECT generation FROM inventory_generation WHERE id = 1`).Scan(&g); err != nil {
		return 0, fmt.Errorf("inventory generation: %w", err)
	}
	return uint64(g), nil
}
