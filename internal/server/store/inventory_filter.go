package store

import (
	"fmt"
	"maps"
	"strings"

	"github.com/plumbline/plumbline/internal/vocab"
)

// VolumeFilter selects inventory volumes: every condition must hold. The
// API builds it from its one table of filters (internal/server/inventory
// filters.go); the store turns it into SQL (volumeWhere), the API's
// summary index into a predicate over its in-memory rows.
type VolumeFilter []Cond

// Cond is one condition of a VolumeFilter.
type Cond struct {
	// Col is the column tested: one of FilterColumns for OpEq, OpMatch
	// and OpAtLeast; one of FindingColumns for OpFinding; none for
	// OpDegraded.
	Col string
	Op  Op
	// Value is a string, int64, float64 or bool, as the column's type
	// (bool for OpDegraded).
	Value any
}

// Op is how a condition tests its column.
type Op int

// The ops of a Cond.
const (
	// OpEq: the column equals the value.
	OpEq Op = iota + 1
	// OpMatch: a text column matches the value, exact or a glob (* any
	// run, ? one character; ASCII case-insensitive; IsGlob).
	OpMatch
	// OpAtLeast: a numeric column is at least the value.
	OpAtLeast
	// OpFinding: the volume has a finding whose column (rule, severity)
	// equals the value; all OpFinding conditions of a filter hold for one
	// finding.
	OpFinding
	// OpDegraded: the evaluator judged the volume degraded (true), or not
	// (false: not degraded, or no baseline state).
	OpDegraded
)

// ColumnType is the type of a filter column's values.
type ColumnType int

// Column types.
const (
	Text ColumnType = iota + 1
	Integer
	Real
)

// filterColumns are the inventory_volumes columns a condition may test
// (computed once, never written): each I/O size's split fraction among
// them.
var filterColumns = func() map[string]ColumnType {
	out := map[string]ColumnType{
		"verdict": Text, "agent_id": Text, "hostname": Text, "mount_point": Text, "fs_type": Text,
		"raid_level": Text, "media": Text, "profile": Text, "stripe_unit_source": Text,
		"stripe_unit_bytes": Integer, "data_offset_bytes": Integer,
	}
	for _, c := range splitColumns {
		out[c] = Real
	}
	return out
}()

// SplitFractionColumn is the column that keeps the split fraction of I/Os
// of size bytes, for filtering and sorting; false when size is not one of
// vocab.IOSizes.
func SplitFractionColumn(size uint32) (string, bool) {
	i, ok := vocab.IOSizeIndex(size)
	if !ok {
		return "", false
	}
	return splitColumns[i], true
}

// findingColumns are the inventory_findings columns OpFinding tests.
var findingColumns = map[string]ColumnType{"rule": Text, "severity": Text}

// FilterColumns are the columns of inventory_volumes a Cond may test, and
// their types.
func FilterColumns() map[string]ColumnType { return maps.Clone(filterColumns) }

// FindingColumns are the columns of a finding an OpFinding Cond may test.
func FindingColumns() map[string]ColumnType { return maps.Clone(findingColumns) }

// check says what is wrong with a condition (nil: nothing).
func (c Cond) check() error {
	cols := filterColumns
	switch c.Op {
	case OpDegraded:
		if _, ok := c.Value.(bool); !ok {
			return fmt.Errorf("%w: degraded condition on %T", ErrInvalid, c.Value)
		}
		return nil
	case OpFinding:
		cols = findingColumns
	case OpEq, OpMatch, OpAtLeast:
	default:
		return fmt.Errorf("%w: condition op %d", ErrInvalid, c.Op)
	}
	typ, ok := cols[c.Col]
	if !ok {
		return fmt.Errorf("%w: no filter column %q", ErrInvalid, c.Col)
	}
	var good bool
	switch c.Value.(type) {
	case string:
		good = typ == Text && c.Op != OpAtLeast
	case int64:
		good = typ == Integer && c.Op != OpMatch
	case float64:
		good = typ == Real && c.Op != OpMatch
	}
	if !good {
		return fmt.Errorf("%w: column %s: condition %d on %T", ErrInvalid, c.Col, c.Op, c.Value)
	}
	return nil
}

// volumeWhere is the WHERE clause (without the keyword; "TRUE" when empty)
// of a filter over inventory_volumes f.
func (s *Store) volumeWhere(f VolumeFilter, args *[]any) (string, error) {
	var c, finding []string
	var findingArgs []any
	for _, k := range f {
		if err := k.check(); err != nil {
			return "", err
		}
		col := "f." + k.Col
		switch k.Op {
		case OpEq:
			c = append(c, col+" = ?")
			*args = append(*args, k.Value)
		case OpMatch:
			c = append(c, s.match(col, k.Value.(string), args))
		case OpAtLeast:
			c = append(c, col+" >= ?")
			*args = append(*args, k.Value)
		case OpFinding:
			finding = append(finding, " AND x."+k.Col+" = ?")
			findingArgs = append(findingArgs, k.Value)
		case OpDegraded:
			sub := `EXISTS (SELECT 1 FROM inventory_baseline b2 WHERE b2.agent_id = f.agent_id AND b2.mount_point = f.mount_point AND b2.degraded)`
			if !k.Value.(bool) {
				sub = "NOT " + sub
			}
			c = append(c, sub)
		}
	}
	if len(finding) > 0 {
		c = append(c, `EXISTS (SELECT 1 FROM inventory_findings x WHERE x.volume_id = f.volume_id`+strings.Join(finding, "")+`)`)
		*args = append(*args, findingArgs...)
	}
	if len(c) == 0 {
		return "TRUE", nil
	}
	return strings.Join(c, " AND "), nil
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
