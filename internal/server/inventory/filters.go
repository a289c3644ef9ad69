package inventory

import (
	"math"
	"strconv"
	"strings"

	"github.com/plumbline/plumbline/internal/align"
	"github.com/plumbline/plumbline/internal/server/baseline"
	"github.com/plumbline/plumbline/internal/server/store"
	"github.com/plumbline/plumbline/internal/vocab"
)

// filter is one filter parameter of /api/v1/volumes and /api/v1/summary.
// volumeFilters is the one description of every filter: the endpoints'
// parameter lists, the validation (params.volumeFilter), FilterValues and
// the CLI's flags (Filters) come from it, and so does the store.Cond it
// makes, which the store turns into SQL (volumeWhere) and the summary
// index into its in-memory predicate. TestOpenAPIFilters holds
// api/openapi.yaml to it.
//
// Adding a filter on a column the store already lists
// (store.FilterColumns): an entry here and its parameter in
// api/openapi.yaml.
type filter struct {
	param string
	// help is the one-line description (the CLI's flag usage; an
	// enumeration's values are appended).
	help string
	kind paramKind
	// values are an enumeration's allowed values.
	values func() []string
	// col and op make the condition {col, op, value}, unless cond is set.
	col string
	op  store.Op
	// cond makes the condition from the parsed value (nil, nil: none).
	cond func(p *params, v any) (*store.Cond, error)
	// size: the CLI takes a size (64KiB, 64k) and passes bytes.
	size bool
}

// paramKind is how a filter's value is written and checked.
type paramKind int

const (
	textParam     paramKind = iota // any non-empty text
	enumParam                      // one of values()
	bytesParam                     // an integer from 0
	fractionParam                  // a number from 0 to 1
	boolParam                      // true or false
)

var volumeFilters = [...]filter{
	{param: "verdict", help: "alignment verdict", kind: enumParam, values: vocab.Verdicts, col: "verdict", op: store.OpEq},
	{param: "host", help: "hostname, exact or a glob (* ?)", col: "hostname", op: store.OpMatch},
	{param: "agent_id", help: "agent id, exact (several agents may report one host name)", col: "agent_id", op: store.OpEq},
	{param: "mount_point", help: "mount point, exact or a glob", col: "mount_point", op: store.OpMatch},
	{param: "fs", help: "file-system type (xfs, ext4, ntfs, ...)", col: "fs_type", op: store.OpEq},
	{param: "raid_level", help: "RAID level", kind: enumParam, values: vocab.RAIDLevels, col: "raid_level", op: store.OpEq},
	{param: "stripe_unit_source", help: "where the stripe unit came from (declared, sysfs, lvm-metadata, kernel-hint, superblock, measured, ...)", col: "stripe_unit_source", op: store.OpEq},
	{param: "stripe_unit_bytes", help: "stripe unit, bytes or a size (64KiB)", kind: bytesParam, col: "stripe_unit_bytes", op: store.OpEq, size: true},
	{param: "data_offset_bytes", help: "data offset, bytes or a size (32256, 1MiB)", kind: bytesParam, col: "data_offset_bytes", op: store.OpEq, size: true},
	{param: "media", help: "media class", kind: enumParam, values: mediaClasses, col: "media", op: store.OpEq},
	{param: "profile", help: "storage profile key", col: "profile", op: store.OpEq},
	{param: "min_split_fraction", help: "predicted split fraction at least this (0-1)", kind: fractionParam, cond: minSplitCond},
	{param: "io_size_bytes", help: "the I/O size of --min-split-fraction", kind: enumParam, values: vocab.IOSizeNames, cond: ioSizeCond, size: true},
	{param: "degraded", help: "the evaluator judges the volume degraded", kind: boolParam, op: store.OpDegraded},
	{param: "rule", help: "a finding's alignment rule id", kind: enumParam, values: align.Rules, col: "rule", op: store.OpFinding},
	{param: "severity", help: "a finding's severity", kind: enumParam, values: vocab.Severities, col: "severity", op: store.OpFinding},
}

func mediaClasses() []string {
	var out []string
	for _, m := range baseline.MediaClasses() {
		out = append(out, string(m))
	}
	return out
}

// minSplitCond: the predicted split fraction of io_size_bytes (the
// smallest I/O size, 8 KiB, when not given) at least the value.
func minSplitCond(p *params, v any) (*store.Cond, error) {
	names := vocab.IOSizeNames()
	size, err := p.enum("io_size_bytes", names)
	if err != nil {
		return nil, err
	}
	if size == "" {
		size = names[0]
	}
	n, _ := strconv.ParseUint(size, 10, 32)
	col, ok := store.SplitFractionColumn(uint32(n))
	if !ok {
		return nil, badParam("io_size_bytes", nil, "%s: no stored split fraction for this I/O size", size)
	}
	return &store.Cond{Col: col, Op: store.OpAtLeast, Value: v}, nil
}

// ioSizeCond: io_size_bytes qualifies min_split_fraction alone.
func ioSizeCond(p *params, _ any) (*store.Cond, error) {
	if !p.has("min_split_fraction") {
		return nil, badParam("io_size_bytes", nil, "io_size_bytes goes with min_split_fraction")
	}
	return nil, nil
}

// filterParams are the names of the filter parameters, in order.
func filterParams() []string { return paramsOf(volumeFilters[:]) }

// paramsOf are the names of the parameters of table.
func paramsOf(table []filter) []string {
	out := make([]string, len(table))
	for i, f := range table {
		out[i] = f.param
	}
	return out
}

// FilterValues lists the values the enumerated filter param (verdict,
// raid_level, media, rule, severity, io_size_bytes) accepts, for a client's
// flag help; nil for a filter that takes free text or numbers.
func FilterValues(param string) []string { return filterEnums()[param] }

// filterEnums are the values each enumerated filter accepts, from the
// words' homes: vocab (verdicts, RAID levels, severities, I/O sizes),
// align (rule ids) and baseline (media classes). api/openapi.yaml lists
// the same (TestOpenAPIEnums).
func filterEnums() map[string][]string {
	out := map[string][]string{}
	for _, f := range volumeFilters {
		if f.kind == enumParam {
			out[f.param] = f.values()
		}
	}
	return out
}

// FilterHelp describes a filter for a client's flags.
type FilterHelp struct {
	Param, Usage string
	// Size: the value is a size in bytes (a client may accept 64KiB).
	Size bool
}

// Filters describes the filters of /volumes and /summary, in order.
func Filters() []FilterHelp {
	out := make([]FilterHelp, len(volumeFilters))
	for i, f := range volumeFilters {
		usage := f.help
		switch f.kind {
		case enumParam:
			usage += ": " + strings.Join(f.values(), ", ")
		case boolParam:
			usage += ": true or false"
		}
		out[i] = FilterHelp{Param: f.param, Usage: usage, Size: f.size}
	}
	return out
}

// volumeFilter reads the filter parameters shared by /volumes and
// /summary (volumeFilters).
func (p *params) volumeFilter() (store.VolumeFilter, error) { return p.filterOf(volumeFilters[:]) }

// filterOf reads the parameters of the filters of table.
func (p *params) filterOf(table []filter) (store.VolumeFilter, error) {
	var out store.VolumeFilter
	for _, f := range table {
		v, err := p.filterValue(f)
		if err != nil {
			return nil, err
		}
		if v == nil {
			continue
		}
		c := &store.Cond{Col: f.col, Op: f.op, Value: v}
		if f.cond != nil {
			if c, err = f.cond(p, v); err != nil {
				return nil, err
			}
		}
		if c != nil {
			out = append(out, *c)
		}
	}
	return out, nil
}

// filterValue is a filter's parsed value (nil when not given): a string,
// int64, float64 or bool by its kind.
func (p *params) filterValue(f filter) (any, error) {
	switch f.kind {
	case enumParam, textParam:
		var s string
		var err error
		if f.kind == enumParam {
			s, err = p.enum(f.param, f.values())
		} else {
			s, err = p.str(f.param)
		}
		if err != nil || s == "" {
			return nil, err
		}
		return s, nil
	case bytesParam:
		return some(p.int64(f.param, 0, math.MaxInt64))
	case fractionParam:
		return some(p.float(f.param, 0, 1))
	default:
		return some(p.bool(f.param))
	}
}

// some is *v as an any, nil for a nil pointer.
func some[T any](v *T, err error) (any, error) {
	if err != nil || v == nil {
		return nil, err
	}
	return *v, nil
}

// Parameters each list endpoint accepts.
var (
	volumeListParams = append(filterParams(), "sort", "limit", "next_page_token", "format")
	summaryParams    = append(filterParams(), "top")
	hostListParams   = []string{"host", "sort", "limit", "next_page_token", "format"}
)
