package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/plumbline/plumbline/internal/vocab"
)

// VolumeQuery is a filter, an order and a page.
type VolumeQuery struct {
	VolumeFilter
	// Sort is one of VolumeSortFields (default "host"); Desc reverses the
	// whole order, the volume id tiebreak included.
	Sort string
	Desc bool
	// After is the keyset of the last row of the previous page
	// (VolumeKeyset); rows strictly after it come next.
	After []any
	// Limit bounds the rows (0: all).
	Limit int
	// WithGeometry also reads the stored plumbline.v1.Volume.
	WithGeometry bool
	// WithDoc also reads the volume's stored JSON document (Doc).
	WithDoc bool
}

// sortKey is one sort field: the columns that order it (volume_id is
// always the last tiebreak) and how to read them from a row.
type sortKey struct {
	cols []string
	vals func(v *InventoryVolume) []any
}

// namedSort is a sort field and its key.
type namedSort struct {
	name string
	sortKey
}

// volumeSortOrder and volumeSorts are the sort fields, in the API's
// documented order and by name (computed once, never written). Each I/O
// size's split fraction is one: split_fraction for the smallest size,
// split_fraction_<key> (split_fraction_64k) for each other.
var volumeSortOrder, volumeSorts = buildVolumeSorts()

func buildVolumeSorts() ([]string, map[string]sortKey) {
	fields := []namedSort{
		{"host", sortKey{[]string{"hostname", "mount_point"}, func(v *InventoryVolume) []any { return []any{v.Hostname, v.MountPoint} }}},
		{"mount_point", sortKey{[]string{"mount_point"}, func(v *InventoryVolume) []any { return []any{v.MountPoint} }}},
		{"verdict", sortKey{[]string{"verdict", "hostname", "mount_point"}, func(v *InventoryVolume) []any { return []any{v.Verdict, v.Hostname, v.MountPoint} }}},
		{"fs", sortKey{[]string{"fs_type"}, func(v *InventoryVolume) []any { return []any{v.FSType} }}},
		{"raid_level", sortKey{[]string{"raid_level"}, func(v *InventoryVolume) []any { return []any{v.RAIDLevel} }}},
		{"media", sortKey{[]string{"media"}, func(v *InventoryVolume) []any { return []any{v.Media} }}},
		{"profile", sortKey{[]string{"profile"}, func(v *InventoryVolume) []any { return []any{v.Profile} }}},
		{"stripe_unit_bytes", sortKey{[]string{"stripe_unit_bytes"}, func(v *InventoryVolume) []any { return []any{v.StripeUnitBytes} }}},
		{"data_offset_bytes", sortKey{[]string{"data_offset_bytes"}, func(v *InventoryVolume) []any { return []any{v.DataOffsetBytes} }}},
		{"allocation_unit_bytes", sortKey{[]string{"allocation_unit_bytes"}, func(v *InventoryVolume) []any { return []any{v.AllocationUnitBytes} }}},
	}
	for i, col := range splitColumns {
		name := col
		if i == 0 {
			name = "split_fraction"
		}
		fields = append(fields, namedSort{name, sortKey{[]string{col}, func(v *InventoryVolume) []any { return []any{v.SplitFraction[i]} }}})
	}
	fields = append(fields,
		namedSort{"severity", sortKey{[]string{"severity_rank"}, func(v *InventoryVolume) []any { return []any{int64(v.SeverityRank)} }}},
		namedSort{"observed_at", sortKey{[]string{"observed_ns"}, func(v *InventoryVolume) []any { return []any{v.ObservedAt.UnixNano()} }}},
		namedSort{"id", sortKey{nil, func(v *InventoryVolume) []any { return nil }}})
	order, byName := make([]string, len(fields)), make(map[string]sortKey, len(fields))
	for i, f := range fields {
		order[i], byName[f.name] = f.name, f.sortKey
	}
	return order, byName
}

// VolumeSortFields lists the sort fields of VolumeQuery.Sort, sorted.
func VolumeSortFields() []string { return slices.Sorted(maps.Keys(volumeSorts)) }

// VolumeSortOrder lists the sort fields of VolumeQuery.Sort in the order
// the API documents them (api/openapi.yaml's sort enum, which
// api/enumgen writes from it).
func VolumeSortOrder() []string { return slices.Clone(volumeSortOrder) }

// VolumeKeyset returns the keyset of v under a sort field, for
// VolumeQuery.After: the sort columns' values, then the volume id. The
// values are strings, int64s and float64s; KeysetKinds says which.
func VolumeKeyset(v *InventoryVolume, sort string) []any {
	k, ok := volumeSorts[sort]
	if !ok {
		return nil
	}
	return append(k.vals(v), v.ID)
}

// KeysetKinds says the type of each keyset value of a sort field: 's'
// string, 'i' int64, 'f' float64. The id is the last 's'.
func KeysetKinds(sort string) string {
	k, ok := volumeSorts[sort]
	if !ok {
		return ""
	}
	var b strings.Builder
	for _, v := range k.vals(&InventoryVolume{}) {
		switch v.(type) {
		case string:
			b.WriteByte('s')
		case int64:
			b.WriteByte('i')
		case float64:
			b.WriteByte('f')
		}
	}
	b.WriteByte('s')
	return b.String()
}

// inventoryColumns are the columns scanInventory reads.
var inventoryColumns = `f.volume_id, f.agent_id, f.mount_point, f.hostname, f.sequence, f.observed_ns, f.device, f.fs_type,
    f.verdict, f.data_offset_bytes, f.stripe_unit_bytes, f.allocation_unit_bytes, f.raid_level, f.media, f.profile,
    ` + columnList("f", splitColumns[:]...) + `, ` + columnList("f", granularityColumns[:]...) + `,
    f.stripe_unit_source, f.stripe_unit_confidence, f.measured_split_cost_seconds, f.measured_split_cost_low_seconds,
    f.measured_split_cost_high_seconds, ` + columnList("f", penaltyColumns[:]...) + `,
    f.severity, f.severity_rank, f.rules, f.rules_version, f.judged_ns,
    t.rule, t.severity, t.message, t.remediation, b.state, b.degraded, b.reason, b.updated_ns, sm.slow_members,
    dbv.state, dbv.attribution, dbv.reason, dbv.updated_ns`

const inventoryJoins = `
LEFT JOIN inventory_findings t ON t.volume_id = f.volume_id AND t.ordinal = 0
LEFT JOIN inventory_baseline b ON b.agent_id = f.agent_id AND b.mount_point = f.mount_point
LEFT JOIN inventory_members sm ON sm.agent_id = f.agent_id AND sm.mount_point = f.mount_point
LEFT JOIN inventory_database dbv ON dbv.agent_id = f.agent_id AND dbv.mount_point = f.mount_point`

// scanInventory reads one row of inventoryColumns (and the geometry when
// withGeometry, then the document when withDoc).
func scanInventory(rows *sql.Rows, withGeometry, withDoc bool) (*InventoryVolume, error) {
	var v InventoryVolume
	var seq, observed, judged int64
	var rules string
	var tRule, tSev, tMsg, tFix, bState, bReason sql.NullString
	var bDegraded sql.NullBool
	var bUpdated sql.NullInt64
	var slow sql.NullString
	var dbState, dbAttr, dbReason sql.NullString
	var dbUpdated sql.NullInt64
	dest := make([]any, 0, 40+3*vocab.NumIOSizes) // every column, geometry and doc
	dest = append(dest, &v.ID, &v.AgentID, &v.MountPoint, &v.Hostname, &seq, &observed, &v.Device, &v.FSType,
		&v.Verdict, &v.DataOffsetBytes, &v.StripeUnitBytes, &v.AllocationUnitBytes, &v.RAIDLevel, &v.Media, &v.Profile)
	dest = appendSizeDests(dest, &v.SplitFraction)
	dest = appendSizeDests(dest, &v.GranularitySplit)
	dest = append(dest, &v.StripeUnitSource, &v.StripeUnitConfidence, &v.MeasuredSplitCost, &v.MeasuredSplitCostLow, &v.MeasuredSplitCostHigh)
	dest = appendSizeDests(dest, &v.MeasuredPenalty)
	dest = append(dest, &v.Severity, &v.SeverityRank, &rules, &v.RulesVersion, &judged,
		&tRule, &tSev, &tMsg, &tFix, &bState, &bDegraded, &bReason, &bUpdated, &slow, &dbState, &dbAttr, &dbReason, &dbUpdated)
	if withGeometry {
		dest = append(dest, &v.Geometry)
	}
	if withDoc {
		dest = append(dest, &v.Doc)
	}
	if err := rows.Scan(dest...); err != nil {
		return nil, err
	}
	v.Sequence, v.ObservedAt, v.JudgedAt = uint64(seq), fromUnixNano(observed), fromUnixNano(judged)
	if rules != "" {
		v.Rules = strings.Split(rules, ",")
	}
	if tRule.Valid {
		v.TopFinding = &Finding{Rule: tRule.String, Severity: tSev.String, Message: tMsg.String, Remediation: tFix.String}
	}
	var err error
	if v.SlowMembers, err = parseSlowMembers(slow); err != nil {
		return nil, err
	}
	if bState.Valid {
		v.Baseline = &BaselineState{AgentID: v.AgentID, MountPoint: v.MountPoint, State: bState.String,
			Degraded: bDegraded.Bool, Reason: bReason.String, UpdatedAt: fromUnixNano(bUpdated.Int64)}
	}
	if dbState.Valid {
		v.Database = &DatabaseVolume{AgentID: v.AgentID, MountPoint: v.MountPoint, State: dbState.String,
			Attribution: dbAttr.String, Reason: dbReason.String, UpdatedAt: fromUnixNano(dbUpdated.Int64)}
	}
	return &v, nil
}

// QueryVolumes calls fn with each inventory volume the query selects, in
// order, streaming: rows are read one at a time. An error from fn stops
// the query and is returned.
func (s *Store) QueryVolumes(ctx context.Context, q VolumeQuery, fn func(*InventoryVolume) error) error {
	query, args, err := s.volumeQuerySQL(q)
	if err != nil {
		return fmt.Errorf("query volumes: %w", err)
	}
	return eachRow(ctx, s, "query volumes", query, args,
		func(rows *sql.Rows) (*InventoryVolume, error) { return scanInventory(rows, q.WithGeometry, q.WithDoc) }, fn)
}

// volumeQuerySQL is the SELECT of a VolumeQuery and its arguments.
func (s *Store) volumeQuerySQL(q VolumeQuery) (string, []any, error) {
	if q.Sort == "" {
		q.Sort = "host"
	}
	key, ok := volumeSorts[q.Sort]
	if !ok {
		return "", nil, fmt.Errorf("%w: sort field %q", ErrInvalid, q.Sort)
	}
	cols := make([]string, 0, len(key.cols)+1)
	for _, c := range key.cols {
		cols = append(cols, "f."+c)
	}
	cols = append(cols, "f.volume_id")
	var args []any
	where, err := s.volumeWhere(q.VolumeFilter, &args)
	if err != nil {
		return "", nil, err
	}
	if q.After != nil {
		if len(q.After) != len(cols) {
			return "", nil, fmt.Errorf("%w: keyset of %d values for sort %q: want %d", ErrInvalid, len(q.After), q.Sort, len(cols))
		}
		op := ">"
		if q.Desc {
			op = "<"
		}
		where += " AND (" + strings.Join(cols, ", ") + ") " + op + " (" + placeholders(len(cols)) + ")"
		args = append(args, q.After...)
	}
	if q.After == nil && q.Limit > 0 && s.engine != Postgres {
		where += " AND " + firstPageRange(cols[0], KeysetKinds(q.Sort)[0], q.Desc)
	}
	dir := ""
	if q.Desc {
		dir = " DESC"
	}
	var b strings.Builder
	order := "\nORDER BY " + strings.Join(cols, dir+", ") + dir
	b.WriteString("SELECT " + inventoryColumns)
	if q.WithGeometry {
		b.WriteString(", COALESCE(v.geometry, " + s.emptyBlob() + ")")
	}
	if q.WithDoc {
		b.WriteString(", COALESCE(d.doc, " + s.emptyBlob() + ")")
	}
	if q.Limit > 0 {
		// A page: the keys of its rows first, then the joins for those
		// rows alone. When the planner filters on an index and sorts what
		// matches, it sorts narrow rows (the sort columns and the id), not
		// every matching row with its finding, baseline and document.
		b.WriteString("\nFROM (SELECT f.volume_id FROM inventory_volumes f WHERE " + where + order)
		fmt.Fprintf(&b, "\nLIMIT %d) p JOIN inventory_volumes f ON f.volume_id = p.volume_id", q.Limit)
	} else {
		b.WriteString("\nFROM inventory_volumes f")
	}
	b.WriteString(inventoryJoins)
	if q.WithGeometry {
		b.WriteString("\nLEFT JOIN volumes v ON v.agent_id = f.agent_id AND v.mount_point = f.mount_point")
	}
	if q.WithDoc {
		b.WriteString("\nLEFT JOIN inventory_docs d ON d.volume_id = f.volume_id")
	}
	if q.Limit == 0 {
		b.WriteString("\nWHERE " + where)
	}
	b.WriteString(order)
	return b.String(), args, nil
}

// eachRow runs a query and calls fn with each row scan reads, streaming.
// An error from fn stops the query and is returned as it is; others are
// wrapped in what.
func eachRow[T any](ctx context.Context, s *Store, what, query string, args []any, scan func(*sql.Rows) (T, error), fn func(T) error) error {
	rows, err := s.db.QueryContext(ctx, s.q(query), args...)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer rows.Close()
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if err := fn(v); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// firstRow is the first row of a query (nil when there is none).
func firstRow[T any](ctx context.Context, s *Store, what, query string, args []any, scan func(*sql.Rows) (*T, error)) (*T, error) {
	var first *T
	err := eachRow(ctx, s, what, query, args, scan, func(v *T) error {
		if first == nil {
			first = v
		}
		return nil
	})
	return first, err
}

// firstPageRange is an always-true range on the leading sort column, for
// the first page on SQLite. Later pages carry the keyset's range, and
// SQLite plans them on the sort field's index (a walk of the first rows
// that match); without a range it estimates a filter index plus a sort of
// every match as cheaper, and a first page of a broad filter sorted 33,000
// rows (70-250 ms against 4 ms for the next page). With it, every page of
// a walk is planned the same way. Selective filters (an agent, a host)
// still win on their own index. PostgreSQL weighs the LIMIT itself.
func firstPageRange(col string, kind byte, desc bool) string {
	switch {
	case kind == 's' && !desc:
		return col + " >= ''"
	case kind == 's':
		return col + " < X'FF'" // every TEXT sorts before every BLOB
	case !desc:
		return col + " >= -9223372036854775807"
	default:
		return col + " <= 9223372036854775807"
	}
}

func (s *Store) emptyBlob() string {
	if s.engine == Postgres {
		return `'\x'::bytea`
	}
	return "X''"
}

// InventoryVolumeByID returns one inventory volume with its geometry, its
// document and all its findings; ErrNotFound when there is no present
// volume with that id.
func (s *Store) InventoryVolumeByID(ctx context.Context, id string) (*InventoryVolume, error) {
	what := fmt.Sprintf("volume %s", id)
	v, err := firstRow(ctx, s, what, `SELECT `+inventoryColumns+`, COALESCE(v.geometry, `+s.emptyBlob()+`), COALESCE(d.doc, `+s.emptyBlob()+`)
FROM inventory_volumes f`+inventoryJoins+`
LEFT JOIN volumes v ON v.agent_id = f.agent_id AND v.mount_point = f.mount_point
LEFT JOIN inventory_docs d ON d.volume_id = f.volume_id
WHERE f.volume_id = ?`, []any{id}, func(rows *sql.Rows) (*InventoryVolume, error) { return scanInventory(rows, true, true) })
	if err != nil {
		return nil, err
	}
	if v == nil {
		return nil, fmt.Errorf("volume %s: %w", id, ErrNotFound)
	}
	frows, err := s.db.QueryContext(ctx, s.q(`SELECT rule, severity, message, remediation FROM inventory_findings
WHERE volume_id = ? ORDER BY ordinal`), id)
	if err != nil {
		return nil, fmt.Errorf("volume %s: findings: %w", id, err)
	}
	defer frows.Close()
	for frows.Next() {
		var f Finding
		if err := frows.Scan(&f.Rule, &f.Severity, &f.Message, &f.Remediation); err != nil {
			return nil, fmt.Errorf("volume %s: findings: %w", id, err)
		}
		v.Findings = append(v.Findings, f)
	}
	return v, frows.Err()
}

// LatestProbes returns the latest probe result of each kind for a volume,
// by kind.
func (s *Store) LatestProbes(ctx context.Context, agentID, mountPoint string) ([]ProbeResult, error) {
	var out []ProbeResult
	for _, kind := range slices.Sorted(slices.Values(vocab.ProbeKindNames())) {
		var p ProbeResult
		var bs, qd, started, dur, ops, errs, bytes int64
		var arrays []byte
		err := s.db.QueryRowContext(ctx, s.q(`SELECT device, block_size_bytes, queue_depth, started_ns, duration_ns, ops, errors, bytes,
    skipped, stopped_reason, failure, latency_histogram, array_activity
FROM probe_results WHERE agent_id = ? AND mount_point = ? AND kind = ? ORDER BY started_ns DESC LIMIT 1`),
			agentID, mountPoint, kind).Scan(&p.Device, &bs, &qd, &started, &dur, &ops, &errs, &bytes, &p.Skipped, &p.StoppedReason, &p.Failure, &p.Histogram, &arrays)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("latest probes of %s:%s: %w", agentID, mountPoint, err)
		}
		p.MountPoint, p.Kind = mountPoint, kind
		p.BlockSizeBytes, p.QueueDepth = uint32(bs), uint32(qd)
		p.StartedAt, p.Duration = fromUnixNano(started), time.Duration(dur)
		p.Ops, p.Errors, p.Bytes = uint64(ops), uint64(errs), uint64(bytes)
		if p.ArrayActivity, err = decodeArrayActivity(arrays); err != nil {
			return nil, fmt.Errorf("latest probes of %s:%s: %w", agentID, mountPoint, err)
		}
		out = append(out, p)
	}
	return out, nil
}
