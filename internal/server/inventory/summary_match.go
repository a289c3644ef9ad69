package inventory

import (
	"slices"

	"github.com/plumbline/plumbline/internal/server/store"
	"github.com/plumbline/plumbline/internal/vocab"
)

// The summary index's predicate of a store.VolumeFilter: each condition
// on a column (store.FilterColumns) reads the index row's copy of that
// column (ixText, ixInt, ixReal) and tests it as the store's SQL does
// (volumeWhere); TestSummaryIndexMatchesSQL holds the two to the same
// answers.

// ixText, ixInt and ixReal read a filter column of an index row (a text
// column as its interned index).
var (
	ixText = map[string]func(*ixVolume) int32{
		"verdict":            func(v *ixVolume) int32 { return v.verdict },
		"agent_id":           func(v *ixVolume) int32 { return v.agent },
		"hostname":           func(v *ixVolume) int32 { return v.host },
		"mount_point":        func(v *ixVolume) int32 { return v.mount },
		"fs_type":            func(v *ixVolume) int32 { return v.fs },
		"raid_level":         func(v *ixVolume) int32 { return v.raid },
		"media":              func(v *ixVolume) int32 { return v.media },
		"profile":            func(v *ixVolume) int32 { return v.profile },
		"stripe_unit_source": func(v *ixVolume) int32 { return v.source },
	}
	ixInt = map[string]func(*ixVolume) int64{
		"stripe_unit_bytes": func(v *ixVolume) int64 { return v.stripe },
		"data_offset_bytes": func(v *ixVolume) int64 { return v.offset },
	}
	// ixReal: each I/O size's split fraction, under its filter column
	// (store.SplitFractionColumn).
	ixReal = func() map[string]func(*ixVolume) float64 {
		out := map[string]func(*ixVolume) float64{}
		for i, size := range vocab.IOSizes() {
			col, _ := store.SplitFractionColumn(size)
			out[col] = func(v *ixVolume) float64 { return v.split[i] }
		}
		return out
	}()
)

// ixMatcher is a filter compiled against an index.
type ixMatcher struct {
	preds []func(*ixVolume) bool
	// pairOK says which (rule, severity) pairs satisfy the finding
	// conditions (nil: there are none).
	pairOK []bool
	// none: the filter matches nothing (an exact value no volume has).
	none bool
}

// answers says whether the index can compute the summary of f: every
// condition is on a column it keeps, with a value of the column's type.
func (ix *summaryIndex) answers(f store.VolumeFilter) bool {
	_, ok := ix.matcher(f)
	return ok
}

// matcher compiles f; false when a condition is not one the index can
// test.
func (ix *summaryIndex) matcher(f store.VolumeFilter) (*ixMatcher, bool) {
	m := &ixMatcher{}
	var finding []store.Cond
	for _, c := range f {
		var p func(*ixVolume) bool
		switch c.Op {
		case store.OpFinding:
			finding = append(finding, c)
			continue
		case store.OpDegraded:
			want, ok := c.Value.(bool)
			if !ok {
				return nil, false
			}
			p = func(v *ixVolume) bool { return (v.baseline && v.degraded) == want }
		default:
			if p = ix.columnPred(c, m); p == nil {
				return nil, false
			}
		}
		m.preds = append(m.preds, p)
	}
	if len(finding) > 0 && !ix.findingPairs(finding, m) {
		return nil, false
	}
	return m, true
}

// columnPred is the predicate of an OpEq, OpMatch or OpAtLeast
// condition; nil when the index cannot test it.
func (ix *summaryIndex) columnPred(c store.Cond, m *ixMatcher) func(*ixVolume) bool {
	switch x := c.Value.(type) {
	case string:
		get := ixText[c.Col]
		if get == nil {
			return nil
		}
		switch c.Op {
		case store.OpEq:
			i, ok := ix.dict[x]
			m.none = m.none || !ok
			return func(v *ixVolume) bool { return get(v) == i }
		case store.OpMatch:
			sm := ix.strMatch(x)
			m.none = m.none || sm.eq == -2
			return func(v *ixVolume) bool { return sm.match(get(v)) }
		}
	case int64:
		if get := ixInt[c.Col]; get != nil {
			return numPred(c.Op, get, x)
		}
	case float64:
		if get := ixReal[c.Col]; get != nil {
			return numPred(c.Op, get, x)
		}
	}
	return nil
}

// numPred compares a numeric column as SQL does (= or >=).
func numPred[T int64 | float64](op store.Op, get func(*ixVolume) T, x T) func(*ixVolume) bool {
	switch op {
	case store.OpEq:
		return func(v *ixVolume) bool { return get(v) == x }
	case store.OpAtLeast:
		return func(v *ixVolume) bool { return get(v) >= x }
	}
	return nil
}

// findingPairs marks the (rule, severity) pairs for which every finding
// condition holds; false for a column a pair does not have.
func (ix *summaryIndex) findingPairs(conds []store.Cond, m *ixMatcher) bool {
	m.pairOK = make([]bool, len(ix.pairs))
	for i, p := range ix.pairs {
		ok := true
		for _, c := range conds {
			var have int32
			switch c.Col {
			case "rule":
				have = p.rule
			case "severity":
				have = p.severity
			default:
				return false
			}
			ok = ok && ix.strs[have] == c.Value
		}
		m.pairOK[i] = ok
	}
	return true
}

// match says whether a volume passes the filter.
func (m *ixMatcher) match(v *ixVolume) bool {
	for _, p := range m.preds {
		if !p(v) {
			return false
		}
	}
	return m.pairOK == nil || slices.ContainsFunc(v.pairs, func(p int32) bool { return m.pairOK[p] })
}

// globMatch says whether s matches glob as the store's filter does (a
// LIKE pattern with * any run and ? one character, ASCII
// case-insensitive; every other character literal).
func globMatch(glob, s string) bool {
	p, t := []rune(glob), []rune(s)
	pi, ti := 0, 0
	star, mark := -1, 0
	for ti < len(t) {
		switch {
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, ti
			pi++
		case pi < len(p) && (p[pi] == '?' || foldASCII(p[pi]) == foldASCII(t[ti])):
			pi++
			ti++
		case star >= 0:
			pi = star + 1
			mark++
			ti = mark
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

func foldASCII(r rune) rune {
	if 'A' <= r && r <= 'Z' {
		return r + 'a' - 'A'
	}
	return r
}

// strMatch is a filter on an interned string column: an exact value
// (one index, or none when no volume has it) or a glob (each distinct
// string tested once).
type strMatch struct {
	ix   *summaryIndex
	glob string
	eq   int32 // -1: any; -2: nothing; else the value's index
	memo []int8
}

func (ix *summaryIndex) strMatch(pattern string) *strMatch {
	m := &strMatch{ix: ix, eq: -1}
	switch {
	case pattern == "":
	case store.IsGlob(pattern):
		m.glob, m.memo = pattern, make([]int8, len(ix.strs))
	default:
		m.eq = -2
		if i, ok := ix.dict[pattern]; ok {
			m.eq = i
		}
	}
	return m
}

func (m *strMatch) match(i int32) bool {
	if m.memo == nil {
		return m.eq == -1 || m.eq == i
	}
	if m.memo[i] == 0 {
		m.memo[i] = 2
		if globMatch(m.glob, m.ix.strs[i]) {
			m.memo[i] = 1
		}
	}
	return m.memo[i] == 1
}
