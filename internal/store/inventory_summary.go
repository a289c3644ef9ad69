package store

import (
	"context"
	"fmt"
	"strings"
)

// SummaryRow is one inventory volume's summary columns (ScanSummaryRows):
// what the API's in-memory summary index keeps per volume.
type SummaryRow struct {
	ID, AgentID, Hostname, MountPoint                    string
	Verdict, Severity, Profile, RAIDLevel, Media, FSType string
	SeverityRank                                         int
	StripeUnitBytes, DataOffsetBytes                     int64
	SplitFraction8K, SplitFraction64K                    float64
	// HasBaseline: the evaluator has judged the volume; Degraded: judged
	// it degraded.
	HasBaseline, Degraded bool
}

// ScanSummaryRows reads every inventory volume's summary columns (vol),
// then every finding's volume id, rule and severity (finding). It reads
// the inventory generation before and after, outside a transaction (on
// SQLite a transaction would take the write lock): every change to the
// inventory tables moves the generation in its own transaction, so when
// before == after the rows are exactly the tables at that generation;
// otherwise they may mix states between the two.
func (s *Store) ScanSummaryRows(ctx context.Context, vol func(*SummaryRow) error, finding func(volumeID, rule, severity string) error) (before, after uint64, err error) {
	if before, err = s.InventoryGeneration(ctx); err != nil {
		return 0, 0, err
	}
	rows, err := s.db.QueryContext(ctx, `SELECT f.volume_id, f.agent_id, f.hostname, f.mount_point, f.verdict, f.severity,
    f.profile, f.raid_level, f.media, f.fs_type, f.severity_rank, f.stripe_unit_bytes, f.data_offset_bytes,
    f.split_fraction_8k, f.split_fraction_64k, b.agent_id IS NOT NULL, COALESCE(b.degraded, FALSE)
FROM inventory_volumes f LEFT JOIN inventory_baseline b ON b.agent_id = f.agent_id AND b.mount_point = f.mount_point`)
	if err != nil {
		return 0, 0, fmt.Errorf("summary rows: %w", err)
	}
	var r SummaryRow
	for rows.Next() {
		if err := rows.Scan(&r.ID, &r.AgentID, &r.Hostname, &r.MountPoint, &r.Verdict, &r.Severity, &r.Profile,
			&r.RAIDLevel, &r.Media, &r.FSType, &r.SeverityRank, &r.StripeUnitBytes, &r.DataOffsetBytes,
			&r.SplitFraction8K, &r.SplitFraction64K, &r.HasBaseline, &r.Degraded); err != nil {
			rows.Close()
			return 0, 0, fmt.Errorf("summary rows: %w", err)
		}
		if err := vol(&r); err != nil {
			rows.Close()
			return 0, 0, err
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, 0, fmt.Errorf("summary rows: %w", err)
	}
	frows, err := s.db.QueryContext(ctx, `SELECT volume_id, rule, severity FROM inventory_findings`)
	if err != nil {
		return 0, 0, fmt.Errorf("summary findings: %w", err)
	}
	defer frows.Close()
	var id, rule, sev string
	for frows.Next() {
		if err := frows.Scan(&id, &rule, &sev); err != nil {
			return 0, 0, fmt.Errorf("summary findings: %w", err)
		}
		if err := finding(id, rule, sev); err != nil {
			return 0, 0, err
		}
	}
	if err := frows.Err(); err != nil {
		return 0, 0, fmt.Errorf("summary findings: %w", err)
	}
	if after, err = s.InventoryGeneration(ctx); err != nil {
		return 0, 0, err
	}
	return before, after, nil
}

// InventoryVolumesByIDs reads the inventory volumes with these ids (with
// their top finding and baseline, as the summary's top offenders show
// them), in no particular order; ids not found are left out.
func (s *Store) InventoryVolumesByIDs(ctx context.Context, ids []string) ([]*InventoryVolume, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT `+inventoryColumns+`
FROM inventory_volumes f`+inventoryJoins+`
WHERE f.volume_id IN (`+strings.TrimSuffix(strings.Repeat("?, ", len(ids)), ", ")+`)`), args...)
	if err != nil {
		return nil, fmt.Errorf("inventory volumes: %w", err)
	}
	defer rows.Close()
	var out []*InventoryVolume
	for rows.Next() {
		v, err := scanInventory(rows, false, false)
		if err != nil {
			return nil, fmt.Errorf("inventory volumes: %w", err)
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
