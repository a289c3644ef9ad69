package store

import (
	"context"
	"database/sql"
	"fmt"
)

// ScanSummarySnapshot reads what ScanSummaryRows reads — every inventory
// volume's summary columns (vol), then every finding's volume id, rule and
// severity (finding) — and the inventory generation, all in one read-only
// snapshot: a REPEATABLE READ READ ONLY transaction on PostgreSQL, a
// deferred (read) transaction on SQLite in WAL mode, which takes no write
// lock. The rows are exactly the tables at the generation returned,
// however many changes commit while they are read; and it never writes.
func (s *Store) ScanSummarySnapshot(ctx context.Context, vol func(*SummaryRow) error, finding func(volumeID, rule, severity string) error) (gen uint64, err error) {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return 0, fmt.Errorf("summary snapshot: %w", err)
	}
	defer tx.Rollback()
	var g int64
	if err := tx.QueryRowContext(ctx, `SELECT generation FROM inventory_generation WHERE id = 1`).Scan(&g); err != nil {
		return 0, fmt.Errorf("summary snapshot: generation: %w", err)
	}
	rows, err := tx.QueryContext(ctx, `SELECT f.volume_id, f.agent_id, f.hostname, f.mount_point, f.verdict, f.severity,
    f.profile, f.raid_level, f.media, f.fs_type, f.severity_rank, f.stripe_unit_bytes, f.data_offset_bytes,
    `+columnList("f", splitColumns[:]...)+`, f.stripe_unit_source, b.agent_id IS NOT NULL, COALESCE(b.degraded, FALSE)
FROM inventory_volumes f LEFT JOIN inventory_baseline b ON b.agent_id = f.agent_id AND b.mount_point = f.mount_point`)
	if err != nil {
		return 0, fmt.Errorf("summary snapshot: rows: %w", err)
	}
	var r SummaryRow
	dest := []any{&r.ID, &r.AgentID, &r.Hostname, &r.MountPoint, &r.Verdict, &r.Severity, &r.Profile,
		&r.RAIDLevel, &r.Media, &r.FSType, &r.SeverityRank, &r.StripeUnitBytes, &r.DataOffsetBytes}
	dest = appendSizeDests(dest, &r.SplitFraction)
	dest = append(dest, &r.StripeUnitSource, &r.HasBaseline, &r.Degraded)
	if err := scanEach(rows, dest, func() error { return vol(&r) }); err != nil {
		return 0, fmt.Errorf("summary snapshot: rows: %w", err)
	}
	frows, err := tx.QueryContext(ctx, `SELECT volume_id, rule, severity FROM inventory_findings`)
	if err != nil {
		return 0, fmt.Errorf("summary snapshot: findings: %w", err)
	}
	var id, rule, sev string
	if err := scanEach(frows, []any{&id, &rule, &sev}, func() error { return finding(id, rule, sev) }); err != nil {
		return 0, fmt.Errorf("summary snapshot: findings: %w", err)
	}
	return uint64(g), nil
}

// scanEach scans every row of rows into dest and calls fn after each;
// it closes rows.
func scanEach(rows *sql.Rows, dest []any, fn func() error) error {
	defer rows.Close()
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return err
		}
		if err := fn(); err != nil {
			return err
		}
	}
	return rows.Err()
}
