package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// VolumeFilter selects inventory volumes; every set field must match.
type VolumeFilter struct {
	Verdict string
	// Host is a hostname, exact or a glob (* any run, ? one character;
	// ASCII case-insensitive). MountPoint is a glob the same way.
	Host       string
	MountPoint string
	AgentID    string
	FSType     string
	RAIDLevel  string
	Media      string
	Profile    string
	// StripeUnitBytes and DataOffsetBytes match exactly (-1: unknown).
	StripeUnitBytes *int64
	DataOffsetBytes *int64
	// MinSplitFraction keeps volumes whose predicted split fraction for
	// SplitIOSize (8192 or 65536 bytes; 8192 when 0) is at least this.
	MinSplitFraction *float64
	SplitIOSize      int
	// Degraded keeps volumes the evaluator judged degraded (true) or not
	// (false: not degraded, or no baseline state).
	Degraded *bool
	// Rule and Severity keep volumes with a finding of that rule id and/or
	// severity (both: one finding with both).
	Rule     string
	Severity string
}

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

var volumeSorts = map[string]sortKey{
	"host":                  {[]string{"hostname", "mount_point"}, func(v *InventoryVolume) []any { return []any{v.Hostname, v.MountPoint} }},
	"mount_point":           {[]string{"mount_point"}, func(v *InventoryVolume) []any { return []any{v.MountPoint} }},
	"verdict":               {[]string{"verdict", "hostname", "mount_point"}, func(v *InventoryVolume) []any { return []any{v.Verdict, v.Hostname, v.MountPoint} }},
	"fs":                    {[]string{"fs_type"}, func(v *InventoryVolume) []any { return []any{v.FSType} }},
	"raid_level":            {[]string{"raid_level"}, func(v *InventoryVolume) []any { return []any{v.RAIDLevel} }},
	"media":                 {[]string{"media"}, func(v *InventoryVolume) []any { return []any{v.Media} }},
	"profile":               {[]string{"profile"}, func(v *InventoryVolume) []any { return []any{v.Profile} }},
	"stripe_unit_bytes":     {[]string{"stripe_unit_bytes"}, func(v *InventoryVolume) []any { return []any{v.StripeUnitBytes} }},
	"data_offset_bytes":     {[]string{"data_offset_bytes"}, func(v *InventoryVolume) []any { return []any{v.DataOffsetBytes} }},
	"allocation_unit_bytes": {[]string{"allocation_unit_bytes"}, func(v *InventoryVolume) []any { return []any{v.AllocationUnitBytes} }},
	"split_fraction":        {[]string{"split_fraction_8k"}, func(v *InventoryVolume) []any { return []any{v.SplitFraction8K} }},
	"split_fraction_64k":    {[]string{"split_fraction_64k"}, func(v *InventoryVolume) []any { return []any{v.SplitFraction64K} }},
	"severity":              {[]string{"severity_rank"}, func(v *InventoryVolume) []any { return []any{int64(v.SeverityRank)} }},
	"observed_at":           {[]string{"observed_ns"}, func(v *InventoryVolume) []any { return []any{v.ObservedAt.UnixNano()} }},
	"id":                    {nil, func(v *InventoryVolume) []any { return nil }},
}

// VolumeSortFields lists the sort fields of VolumeQuery.Sort.
func VolumeSortFields() []string { return slices.Sorted(maps.Keys(volumeSorts)) }

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

// globLike turns a glob (* and ?) into a LIKE pattern with \ as escape.
func globLike(glob string) string {
	var b strings.Builder
	for _, r := range glob {
		switch r {
		case '*':
			b.WriteByte('%')
		case '?':
			b.WriteByte('_')
		case '%', '_', '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// IsGlob says whether s has glob characters.
func IsGlob(s string) bool { return strings.ContainsAny(s, "*?") }

// match is the condition for a column against an exact value or a glob.
func (s *Store) match(col, pattern string, args *[]any) string {
	if !IsGlob(pattern) {
		*args = append(*args, pattern)
		return col + " = ?"
	}
	*args = append(*args, globLike(pattern))
	if s.engine == Postgres {
		return col + ` ILIKE ? ESCAPE '\'`
	}
	return col + ` LIKE ? ESCAPE '\'`
}

// volumeWhere is the WHERE clause (without the keyword; "TRUE" when empty)
// of a filter over inventory_volumes f.
func (s *Store) volumeWhere(f VolumeFilter, args *[]any) string {
	var c []string
	eq := func(col, v string) {
		if v != "" {
			c = append(c, col+" = ?")
			*args = append(*args, v)
		}
	}
	eq("f.verdict", f.Verdict)
	eq("f.agent_id", f.AgentID)
	eq("f.fs_type", f.FSType)
	eq("f.raid_level", f.RAIDLevel)
	eq("f.media", f.Media)
	eq("f.profile", f.Profile)
	if f.Host != "" {
		c = append(c, s.match("f.hostname", f.Host, args))
	}
	if f.MountPoint != "" {
		c = append(c, s.match("f.mount_point", f.MountPoint, args))
	}
	if f.StripeUnitBytes != nil {
		c = append(c, "f.stripe_unit_bytes = ?")
		*args = append(*args, *f.StripeUnitBytes)
	}
	if f.DataOffsetBytes != nil {
		c = append(c, "f.data_offset_bytes = ?")
		*args = append(*args, *f.DataOffsetBytes)
	}
	if f.MinSplitFraction != nil {
		col := "f.split_fraction_8k"
		if f.SplitIOSize == 64<<10 {
			col = "f.split_fraction_64k"
		}
		c = append(c, col+" >= ?")
		*args = append(*args, *f.MinSplitFraction)
	}
	if f.Degraded != nil {
		sub := `EXISTS (SELECT 1 FROM inventory_baseline b2 WHERE b2.agent_id = f.agent_id AND b2.mount_point = f.mount_point AND b2.degraded)`
		if !*f.Degraded {
			sub = "NOT " + sub
		}
		c = append(c, sub)
	}
	if f.Rule != "" || f.Severity != "" {
		sub := `EXISTS (SELECT 1 FROM inventory_findings x WHERE x.volume_id = f.volume_id`
		if f.Rule != "" {
			sub += " AND x.rule = ?"
			*args = append(*args, f.Rule)
		}
		if f.Severity != "" {
			sub += " AND x.severity = ?"
			*args = append(*args, f.Severity)
		}
		c = append(c, sub+")")
	}
	if len(c) == 0 {
		return "TRUE"
	}
	return strings.Join(c, " AND ")
}

const inventoryColumns = `f.volume_id, f.agent_id, f.mount_point, f.hostname, f.sequence, f.observed_ns, f.device, f.fs_type,
    f.verdict, f.data_offset_bytes, f.stripe_unit_bytes, f.allocation_unit_bytes, f.raid_level, f.media, f.profile,
    f.split_fraction_8k, f.split_fraction_64k, f.granularity_split_fraction_8k, f.granularity_split_fraction_64k,
    f.severity, f.severity_rank, f.rules,
    t.rule, t.severity, t.message, t.remediation, b.state, b.degraded, b.reason, b.updated_ns`

const inventoryJoins = `
LEFT JOIN inventory_findings t ON t.volume_id = f.volume_id AND t.ordinal = 0
LEFT JOIN inventory_baseline b ON b.agent_id = f.agent_id AND b.mount_point = f.mount_point`

// scanInventory reads one row of inventoryColumns (and the geometry when
// withGeometry, then the document when withDoc).
func scanInventory(rows *sql.Rows, withGeometry, withDoc bool) (*InventoryVolume, error) {
	var v InventoryVolume
	var seq, observed int64
	var rules string
	var tRule, tSev, tMsg, tFix, bState, bReason sql.NullString
	var bDegraded sql.NullBool
	var bUpdated sql.NullInt64
	dest := []any{&v.ID, &v.AgentID, &v.MountPoint, &v.Hostname, &seq, &observed, &v.Device, &v.FSType,
		&v.Verdict, &v.DataOffsetBytes, &v.StripeUnitBytes, &v.AllocationUnitBytes, &v.RAIDLevel, &v.Media, &v.Profile,
		&v.SplitFraction8K, &v.SplitFraction64K, &v.GranularitySplit8K, &v.GranularitySplit64K, &v.Severity, &v.SeverityRank, &rules,
		&tRule, &tSev, &tMsg, &tFix, &bState, &bDegraded, &bReason, &bUpdated}
	if withGeometry {
		dest = append(dest, &v.Geometry)
	}
	if withDoc {
		dest = append(dest, &v.Doc)
	}
	if err := rows.Scan(dest...); err != nil {
		return nil, err
	}
	v.Sequence, v.ObservedAt = uint64(seq), fromUnixNano(observed)
	if rules != "" {
		v.Rules = strings.Split(rules, ",")
	}
	if tRule.Valid {
		v.TopFinding = &Finding{Rule: tRule.String, Severity: tSev.String, Message: tMsg.String, Remediation: tFix.String}
	}
	if bState.Valid {
		v.Baseline = &BaselineState{AgentID: v.AgentID, MountPoint: v.MountPoint, State: bState.String,
			Degraded: bDegraded.Bool, Reason: bReason.String, UpdatedAt: fromUnixNano(bUpdated.Int64)}
	}
	return &v, nil
}

// QueryVolumes calls fn with each inventory volume the query selects, in
// order, streaming: rows are read one at a time. An error from fn stops
// the query and is returned.
func (s *Store) QueryVolumes(ctx context.Context, q VolumeQuery, fn func(*InventoryVolume) error) error {
	if q.Sort == "" {
		q.Sort = "host"
	}
	key, ok := volumeSorts[q.Sort]
	if !ok {
		return fmt.Errorf("query volumes: %w: sort field %q", ErrInvalid, q.Sort)
	}
	cols := make([]string, 0, len(key.cols)+1)
	for _, c := range key.cols {
		cols = append(cols, "f."+c)
	}
	cols = append(cols, "f.volume_id")
	var args []any
	where := s.volumeWhere(q.VolumeFilter, &args)
	if q.After != nil {
		if len(q.After) != len(cols) {
			return fmt.Errorf("query volumes: %w: keyset of %d values for sort %q: want %d", ErrInvalid, len(q.After), q.Sort, len(cols))
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
	rows, err := s.db.QueryContext(ctx, s.q(b.String()), args...)
	if err != nil {
		return fmt.Errorf("query volumes: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		v, err := scanInventory(rows, q.WithGeometry, q.WithDoc)
		if err != nil {
			return fmt.Errorf("query volumes: %w", err)
		}
		if err := fn(v); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("query volumes: %w", err)
	}
	return nil
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

// InventoryVolumeByID returns one inventory volume with its geometry and
// all its findings; ErrNotFound when there is no present volume with that id.
func (s *Store) InventoryVolumeByID(ctx context.Context, id string) (*InventoryVolume, error) {
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT `+inventoryColumns+`, COALESCE(v.geometry, `+s.emptyBlob()+`)
FROM inventory_volumes f`+inventoryJoins+`
LEFT JOIN volumes v ON v.agent_id = f.agent_id AND v.mount_point = f.mount_point
WHERE f.volume_id = ?`), id)
	if err != nil {
		return nil, fmt.Errorf("volume %s: %w", id, err)
	}
	var v *InventoryVolume
	for rows.Next() {
		if v, err = scanInventory(rows, true, false); err != nil {
			rows.Close()
			return nil, fmt.Errorf("volume %s: %w", id, err)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("volume %s: %w", id, err)
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
	// TopOffenders are the volumes with the highest predicted 8 KiB split
	// fraction (then 64 KiB, then severity), split fraction above 0 only.
	TopOffenders []*InventoryVolume
}

// SummarizeVolumes aggregates the volumes f selects; top bounds the
// offenders listed. Its five queries (verdict × severity with the penalty
// sums, profiles, rules, hosts and baselines, top offenders) run at once
// on separate connections of the pool.
func (s *Store) SummarizeVolumes(ctx context.Context, f VolumeFilter, top int) (*InventorySummary, error) {
	sum := &InventorySummary{ByVerdict: map[string]int64{}, ByProfile: map[string]int64{}, BySeverity: map[string]int64{}}
	var args []any
	where := s.volumeWhere(f, &args)
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
	p8 := Penalty{IOSizeBytes: 8 << 10}
	p64 := Penalty{IOSizeBytes: 64 << 10}
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT f.verdict, f.severity, COUNT(*),
    SUM(CASE WHEN f.split_fraction_8k > 0 THEN 1 ELSE 0 END), SUM(CASE WHEN f.split_fraction_8k > 0 THEN f.split_fraction_8k ELSE 0 END),
    SUM(CASE WHEN f.split_fraction_8k >= 0 THEN 1 ELSE 0 END),
    SUM(CASE WHEN f.split_fraction_64k > 0 THEN 1 ELSE 0 END), SUM(CASE WHEN f.split_fraction_64k > 0 THEN f.split_fraction_64k ELSE 0 END),
    SUM(CASE WHEN f.split_fraction_64k >= 0 THEN 1 ELSE 0 END)
FROM inventory_volumes f WHERE `+where+` GROUP BY f.verdict, f.severity`), args...)
	if err != nil {
		return fmt.Errorf("summary: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var verdict, sev string
		var n, a8, k8, a64, k64 int64
		var s8, s64 float64
		if err := rows.Scan(&verdict, &sev, &n, &a8, &s8, &k8, &a64, &s64, &k64); err != nil {
			return fmt.Errorf("summary: %w", err)
		}
		sum.Volumes += n
		sum.ByVerdict[verdict] += n
		sum.BySeverity[sev] += n
		p8.Affected, p8.VolumeEquivalents, p8.Known = p8.Affected+a8, p8.VolumeEquivalents+s8, p8.Known+k8
		p64.Affected, p64.VolumeEquivalents, p64.Known = p64.Affected+a64, p64.VolumeEquivalents+s64, p64.Known+k64
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("summary: %w", err)
	}
	sum.Penalties = []Penalty{p8, p64}
	return nil
}

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
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT `+inventoryColumns+`
FROM inventory_volumes f`+inventoryJoins+`
WHERE `+where+` AND f.split_fraction_8k > 0
ORDER BY f.split_fraction_8k DESC, f.split_fraction_64k DESC, f.severity_rank DESC, f.volume_id
LIMIT `+fmt.Sprint(top)), args...)
	if err != nil {
		return fmt.Errorf("summary: top offenders: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		v, err := scanInventory(rows, false, false)
		if err != nil {
			return fmt.Errorf("summary: top offenders: %w", err)
		}
		sum.TopOffenders = append(sum.TopOffenders, v)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("summary: top offenders: %w", err)
	}
	return nil
}

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

// InventoryHost is an agent with its volume counts.
type InventoryHost struct {
	Agent
	Volumes    int64
	Misaligned int64
}

// HostQuery selects and pages hosts, ordered by hostname and agent id.
type HostQuery struct {
	// Host is a hostname, exact or a glob (as VolumeFilter.Host).
	Host  string
	Desc  bool
	After []any // hostname, agent_id of the previous page's last host
	Limit int
}

const hostColumns = agentColumns + `,
    (SELECT COUNT(*) FROM inventory_volumes f WHERE f.agent_id = a.agent_id),
    (SELECT COUNT(*) FROM inventory_volumes f WHERE f.agent_id = a.agent_id AND f.verdict = 'misaligned')`

func scanHost(rows *sql.Rows) (*InventoryHost, error) {
	var h InventoryHost
	a, err := scanAgent(rows, &h.Volumes, &h.Misaligned)
	if err != nil {
		return nil, err
	}
	h.Agent = a
	return &h, nil
}

// QueryHosts calls fn with each host the query selects, in order, streaming.
func (s *Store) QueryHosts(ctx context.Context, q HostQuery, fn func(*InventoryHost) error) error {
	var args []any
	var c []string
	if q.Host != "" {
		c = append(c, s.match("a.hostname", q.Host, &args))
	}
	op, dir := ">", ""
	if q.Desc {
		op, dir = "<", " DESC"
	}
	if q.After != nil {
		if len(q.After) != 2 {
			return fmt.Errorf("query hosts: %w: keyset of %d values: want 2", ErrInvalid, len(q.After))
		}
		c = append(c, "(a.hostname, a.agent_id) "+op+" (?, ?)")
		args = append(args, q.After...)
	}
	where := "TRUE"
	if len(c) > 0 {
		where = strings.Join(c, " AND ")
	}
	query := `SELECT ` + hostColumns + ` FROM agents a WHERE ` + where + ` ORDER BY a.hostname` + dir + `, a.agent_id` + dir
	if q.Limit > 0 {
		query += fmt.Sprintf(" LIMIT %d", q.Limit)
	}
	rows, err := s.db.QueryContext(ctx, s.q(query), args...)
	if err != nil {
		return fmt.Errorf("query hosts: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		h, err := scanHost(rows)
		if err != nil {
			return fmt.Errorf("query hosts: %w", err)
		}
		if err := fn(h); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("query hosts: %w", err)
	}
	return nil
}

// FindHost returns the agent whose id is key or, failing that, whose
// hostname is key (the most recently seen one when several share it);
// ErrNotFound when none is.
func (s *Store) FindHost(ctx context.Context, key string) (*InventoryHost, error) {
	for _, cond := range []string{"a.agent_id = ?", "a.hostname = ?"} {
		rows, err := s.db.QueryContext(ctx, s.q(`SELECT `+hostColumns+` FROM agents a WHERE `+cond+`
ORDER BY a.last_seen_ns DESC, a.agent_id LIMIT 1`), key)
		if err != nil {
			return nil, fmt.Errorf("host %q: %w", key, err)
		}
		var h *InventoryHost
		for rows.Next() {
			if h, err = scanHost(rows); err != nil {
				rows.Close()
				return nil, fmt.Errorf("host %q: %w", key, err)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("host %q: %w", key, err)
		}
		if h != nil {
			return h, nil
		}
	}
	return nil, fmt.Errorf("host %q: %w", key, ErrNotFound)
}

// LatestProbes returns the latest probe result of each kind for a volume,
// by kind.
func (s *Store) LatestProbes(ctx context.Context, agentID, mountPoint string) ([]ProbeResult, error) {
	var out []ProbeResult
	for _, kind := range []string{"log-write", "random-read", "random-write"} {
		var p ProbeResult
		var bs, qd, started, dur, ops, errs, bytes int64
		err := s.db.QueryRowContext(ctx, s.q(`SELECT device, block_size_bytes, queue_depth, started_ns, duration_ns, ops, errors, bytes,
    skipped, stopped_reason, failure, latency_histogram
FROM probe_results WHERE agent_id = ? AND mount_point = ? AND kind = ? ORDER BY started_ns DESC LIMIT 1`),
			agentID, mountPoint, kind).Scan(&p.Device, &bs, &qd, &started, &dur, &ops, &errs, &bytes, &p.Skipped, &p.StoppedReason, &p.Failure, &p.Histogram)
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
		out = append(out, p)
	}
	return out, nil
}
