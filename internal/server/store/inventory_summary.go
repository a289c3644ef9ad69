package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/plumbline/plumbline/internal/vocab"
)

// SummaryRow is one inventory volume's summary columns (ScanSummaryRows):
// what the API's in-memory summary index keeps per volume.
type SummaryRow struct {
	ID, AgentID, Hostname, MountPoint                    string
	Verdict, Severity, Profile, RAIDLevel, Media, FSType string
	SeverityRank                                         int
	StripeUnitBytes, DataOffsetBytes                     int64
	SplitFraction                                        [vocab.NumIOSizes]float64
	StripeUnitSource                                     string
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
    `+columnList("f", splitColumns[:]...)+`, f.stripe_unit_source, b.agent_id IS NOT NULL, COALESCE(b.degraded, FALSE)
FROM inventory_volumes f LEFT JOIN inventory_baseline b ON b.agent_id = f.agent_id AND b.mount_point = f.mount_point`)
	if err != nil {
		return 0, 0, fmt.Errorf("summary rows: %w", err)
	}
	var r SummaryRow
	dest := []any{&r.ID, &r.AgentID, &r.Hostname, &r.MountPoint, &r.Verdict, &r.Severity, &r.Profile,
		&r.RAIDLevel, &r.Media, &r.FSType, &r.SeverityRank, &r.StripeUnitBytes, &r.DataOffsetBytes}
	dest = appendSizeDests(dest, &r.SplitFraction)
	dest = append(dest, &r.StripeUnitSource, &r.HasBaseline, &r.Degraded)
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
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
	var out []*InventoryVolume
	err := eachRow(ctx, s, "inventory volumes", `SELECT `+inventoryColumns+`
FROM inventory_volumes f`+inventoryJoins+`
WHERE f.volume_id IN (`+placeholders(len(ids))+`)`, args, scanSummaryVolume, func(v *InventoryVolume) error {
		out = append(out, v)
		return nil
	})
	return out, err
}

// scanSummaryVolume reads a row of inventoryColumns.
func scanSummaryVolume(rows *sql.Rows) (*InventoryVolume, error) {
	return scanInventory(rows, false, false)
}

// RuleCount is how many volumes have a finding of a rule at a severity.
type RuleCount struct {
	Rule     string
	Severity string
	Volumes  int64
}

// Penalty is the fleet's predicted split I/O for one I/O size.
type Penalty struct {
	IOSizeBytes int
	// Affected is the number of volumes with a split fraction above 0.
	Affected int64
	// VolumeEquivalents is the sum of the split fractions: how many
	// volumes' worth of I/Os take two stripe units.
	VolumeEquivalents float64
	// Known is the number of volumes with a known split fraction.
	Known int64
}

// InventorySummary aggregates the inventory volumes a filter selects.
type InventorySummary struct {
	Volumes    int64
	Hosts      int64
	ByVerdict  map[string]int64
	ByProfile  map[string]int64
	BySeverity map[string]int64
	ByRule     []RuleCount
	// Degraded and WithBaseline count volumes the evaluator judged
	// degraded, and judged at all.
	Degraded     int64
	WithBaseline int64
	Penalties    []Penalty
	// TopOffenders are the volumes with the highest predicted split
	// fraction of the smallest I/O size (then of each larger size in turn,
	// then severity), split fraction above 0 only.
	TopOffenders []*InventoryVolume
}

// SummarizeVolumes aggregates the volumes f selects; top bounds the
// offenders listed. Its five queries (verdict × severity with the penalty
// sums, profiles, rules, hosts and baselines, top offenders) run at once
// on separate connections of the pool.
func (s *Store) SummarizeVolumes(ctx context.Context, f VolumeFilter, top int) (*InventorySummary, error) {
	sum := &InventorySummary{ByVerdict: map[string]int64{}, ByProfile: map[string]int64{}, BySeverity: map[string]int64{}}
	var args []any
	where, err := s.volumeWhere(f, &args)
	if err != nil {
		return nil, fmt.Errorf("summary: %w", err)
	}
	parts := []func() error{
		func() error { return s.summaryCounts(ctx, where, args, sum) },
		func() error { return s.summaryProfiles(ctx, where, args, sum) },
		func() error { return s.summaryRules(ctx, where, args, sum) },
		func() error {
			err := s.db.QueryRowContext(ctx, s.q(`SELECT COUNT(DISTINCT f.agent_id),
    COUNT(b.agent_id), SUM(CASE WHEN b.degraded THEN 1 ELSE 0 END)
FROM inventory_volumes f LEFT JOIN inventory_baseline b ON b.agent_id = f.agent_id AND b.mount_point = f.mount_point
WHERE `+where), args...).Scan(&sum.Hosts, &sum.WithBaseline, nullInt{&sum.Degraded})
			if err != nil {
				return fmt.Errorf("summary: %w", err)
			}
			return nil
		},
	}
	if top > 0 {
		parts = append(parts, func() error { return s.summaryOffenders(ctx, where, args, top, sum) })
	}
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for i, part := range parts {
		wg.Go(func() { errs[i] = part() })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return sum, nil
}

// summaryCounts fills the counts by verdict and severity and the
// penalties: one scan, verdict × severity groups carry every per-volume
// total.
func (s *Store) summaryCounts(ctx context.Context, where string, args []any, sum *InventorySummary) error {
	var ps, part [vocab.NumIOSizes]Penalty
	var verdict, sev string
	var n int64
	dest := []any{&verdict, &sev, &n}
	for i := range ps {
		ps[i].IOSizeBytes = int(vocab.IOSize(i))
		dest = append(dest, &part[i].Affected, &part[i].VolumeEquivalents, &part[i].Known)
	}
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT f.verdict, f.severity, COUNT(*), `+penaltySums+`
FROM inventory_volumes f WHERE `+where+` GROUP BY f.verdict, f.severity`), args...)
	if err != nil {
		return fmt.Errorf("summary: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return fmt.Errorf("summary: %w", err)
		}
		sum.Volumes += n
		sum.ByVerdict[verdict] += n
		sum.BySeverity[sev] += n
		for i, p := range part {
			ps[i].Affected, ps[i].VolumeEquivalents, ps[i].Known = ps[i].Affected+p.Affected, ps[i].VolumeEquivalents+p.VolumeEquivalents, ps[i].Known+p.Known
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("summary: %w", err)
	}
	sum.Penalties = ps[:]
	return nil
}

// penaltySums are summaryCounts' aggregates per I/O size: the volumes
// with a split fraction above 0, its sum over them, and the volumes with
// a known one.
var penaltySums = func() string {
	var b strings.Builder
	for i, c := range splitColumns {
		if i > 0 {
			b.WriteString(",\n    ")
		}
		fmt.Fprintf(&b, "SUM(CASE WHEN f.%[1]s > 0 THEN 1 ELSE 0 END), SUM(CASE WHEN f.%[1]s > 0 THEN f.%[1]s ELSE 0 END), "+
			"SUM(CASE WHEN f.%[1]s >= 0 THEN 1 ELSE 0 END)", c)
	}
	return b.String()
}()

func (s *Store) summaryProfiles(ctx context.Context, where string, args []any, sum *InventorySummary) error {
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT f.profile, COUNT(*) FROM inventory_volumes f WHERE `+where+` GROUP BY f.profile`), args...)
	if err != nil {
		return fmt.Errorf("summary: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var p string
		var n int64
		if err := rows.Scan(&p, &n); err != nil {
			return fmt.Errorf("summary: %w", err)
		}
		sum.ByProfile[p] = n
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("summary: %w", err)
	}
	return nil
}

func (s *Store) summaryRules(ctx context.Context, where string, args []any, sum *InventorySummary) error {
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT x.rule, x.severity, COUNT(DISTINCT x.volume_id)
FROM inventory_findings x JOIN inventory_volumes f ON f.volume_id = x.volume_id
WHERE `+where+` GROUP BY x.rule, x.severity ORDER BY x.rule, x.severity`), args...)
	if err != nil {
		return fmt.Errorf("summary: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var rc RuleCount
		if err := rows.Scan(&rc.Rule, &rc.Severity, &rc.Volumes); err != nil {
			return fmt.Errorf("summary: %w", err)
		}
		sum.ByRule = append(sum.ByRule, rc)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("summary: %w", err)
	}
	return nil
}

// summaryOffenders lists the top offenders, in the order of the
// inventory_volumes_offenders index.
func (s *Store) summaryOffenders(ctx context.Context, where string, args []any, top int, sum *InventorySummary) error {
	return eachRow(ctx, s, "summary: top offenders", `SELECT `+inventoryColumns+`
FROM inventory_volumes f`+inventoryJoins+`
WHERE `+where+` AND f.`+splitColumns[0]+` > 0
ORDER BY `+offendersOrder+`
LIMIT `+fmt.Sprint(top), args, scanSummaryVolume, func(v *InventoryVolume) error {
		sum.TopOffenders = append(sum.TopOffenders, v)
		return nil
	})
}

// offendersOrder is the order of the top offenders (and of the
// inventory_volumes_offenders index): each I/O size's split fraction,
// smallest size first, descending; then severity; then the volume id.
var offendersOrder = func() string {
	var b strings.Builder
	for _, c := range splitColumns {
		b.WriteString("f." + c + " DESC, ")
	}
	return b.String() + "f.severity_rank DESC, f.volume_id"
}()

// nullInt scans a nullable integer (SUM over no rows) as 0.
type nullInt struct{ p *int64 }

func (n nullInt) Scan(src any) error {
	var v sql.NullInt64
	if err := v.Scan(src); err != nil {
		return err
	}
	*n.p = v.Int64
	return nil
}
