// Command enumgen writes the enumerations of api/openapi.yaml from the
// words' homes: internal/vocab (verdicts, severities, probe kinds, stop
// reasons, I/O sizes), internal/align (where stripe-scan runs place their
// reads), the inventory's filter table (every enumerated query parameter)
// and the store's sort fields (GET /api/v1/volumes' sort) — and the
// per-I/O-size members of the summary's top offenders
// (split_fraction_<key>). The rest of the document is written by hand;
// enumgen replaces only the flow lists of the enums it owns, and the
// member lines it owns, in place, so a new probe kind, RAID level, rule
// or I/O size reaches the API contract without an edit of the document. `make openapi` runs it;
// TestDocumentIsCurrent fails while the committed document is stale.
package main

import (
	"bytes"
	"cmp"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/plumbline/plumbline/internal/align"
	"github.com/plumbline/plumbline/internal/server/inventory"
	"github.com/plumbline/plumbline/internal/server/store"
	"github.com/plumbline/plumbline/internal/vocab"
)

func main() {
	path := flag.String("file", "api/openapi.yaml", "the OpenAPI document to rewrite in place")
	check := flag.Bool("check", false, "only report whether the document is current (exit 1 when not)")
	flag.Parse()
	if err := run(*path, *check); err != nil {
		fmt.Fprintln(os.Stderr, "enumgen:", err)
		os.Exit(1)
	}
}

func run(path string, check bool) error {
	doc, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	out, err := rewrite(doc, enums())
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	switch {
	case bytes.Equal(out, doc):
		return nil
	case check:
		return fmt.Errorf("%s: enumerations are stale; run make openapi", path)
	}
	return os.WriteFile(path, out, 0o644)
}

// enum is one enumeration the generator owns: where it is in the
// document (a path of mapping keys; "name=x" picks the item of a list
// whose name is x) and its values. A path whose last key ends in *
// ("split_fraction_*") names instead a run of members of the mapping the
// rest of the path leads to: those whose keys start with what precedes
// the * (on consecutive lines, one member each, a flow value); its values
// are the lines that replace them ("split_fraction_8k: {type: number}").
type enum struct {
	path   []string
	values []string
}

// enums are every enumeration enumgen owns.
func enums() []enum {
	out := []enum{
		{[]string{"components", "schemas", "Volume", "properties", "severity"}, append(vocab.Severities(), "none")},
		{[]string{"components", "schemas", "Finding", "properties", "severity"}, vocab.Severities()},
		{[]string{"components", "schemas", "Alignment", "properties", "verdict"}, vocab.Verdicts()},
		{[]string{"components", "schemas", "ProbeSummary", "properties", "kind"}, vocab.ProbeKindNames()},
		{[]string{"components", "schemas", "SlowMember", "properties", "kind"}, vocab.MemberGroupKindNames()},
		{[]string{"components", "schemas", "StripeMeasurement", "properties", "basis"}, []string{align.BasisStripedDevice, align.BasisDisk}},
	}
	for _, p := range inventory.Filters() {
		if vals := inventory.FilterValues(p.Param); vals != nil {
			out = append(out, enum{[]string{"components", "parameters", p.Param, "schema"}, vals})
		}
	}
	var sorts []string
	for _, f := range store.VolumeSortOrder() {
		sorts = append(sorts, f, "-"+f)
	}
	out = append(out, enum{[]string{"paths", "/api/v1/volumes", "get", "parameters", "name=sort", "schema"}, sorts})
	// A top offender's split fraction per I/O size: the smallest size's
	// is known (the offenders are the volumes where it is above 0).
	var split []string
	for i, size := range vocab.IOSizes() {
		m := "split_fraction_" + vocab.IOSizeKey(size) + ": {type: number, nullable: true}"
		if i == 0 {
			m = "split_fraction_" + vocab.IOSizeKey(size) + ": {type: number}"
		}
		split = append(split, m)
	}
	out = append(out, enum{[]string{"components", "schemas", "Summary", "properties", "top_offenders", "items", "properties", "split_fraction_*"}, split})
	return out
}

// rewrite replaces, in doc, the flow list of each enum's `enum:` key (or
// its run of members, for a path ending in prefix*).
func rewrite(doc []byte, enums []enum) ([]byte, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(doc, &root); err != nil {
		return nil, err
	}
	lines := strings.SplitAfter(string(doc), "\n")
	// Rewrite from the bottom up, so that earlier line numbers hold.
	type edit struct {
		line  int
		apply func([]string) ([]string, error)
	}
	var edits []edit
	for _, e := range enums {
		if prefix, ok := strings.CutSuffix(e.path[len(e.path)-1], "*"); ok {
			n := lookup(root.Content[0], e.path[:len(e.path)-1])
			if n == nil {
				return nil, fmt.Errorf("no %s", strings.Join(e.path[:len(e.path)-1], "."))
			}
			first, last, col, err := memberRun(n, prefix)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", strings.Join(e.path, "."), err)
			}
			edits = append(edits, edit{first, func(l []string) ([]string, error) { return replaceMembers(l, first, last, col, e.values), nil }})
			continue
		}
		n := lookup(root.Content[0], e.path)
		if n == nil {
			return nil, fmt.Errorf("no %s", strings.Join(e.path, "."))
		}
		list := lookup(n, []string{"enum"})
		if list == nil || list.Kind != yaml.SequenceNode || list.Style&yaml.FlowStyle == 0 {
			return nil, fmt.Errorf("%s: want a flow list under enum:", strings.Join(e.path, "."))
		}
		line, col := list.Line-1, list.Column-1
		edits = append(edits, edit{line, func(l []string) ([]string, error) { return replaceList(l, line, col, e.values) }})
	}
	slices.SortFunc(edits, func(a, b edit) int { return cmp.Compare(a.line, b.line) })
	for i := len(edits) - 1; i >= 0; i-- {
		var err error
		if lines, err = edits[i].apply(lines); err != nil {
			return nil, err
		}
	}
	return []byte(strings.Join(lines, "")), nil
}

// memberRun finds the members of mapping n whose keys start with prefix:
// the lines (0-based) of the first and last, and the keys' column. They
// must be consecutive lines, each one member with a flow value.
func memberRun(n *yaml.Node, prefix string) (first, last, col int, err error) {
	if n.Kind != yaml.MappingNode {
		return 0, 0, 0, fmt.Errorf("want a mapping")
	}
	first = -1
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if !strings.HasPrefix(k.Value, prefix) {
			continue
		}
		if v.Line != k.Line || (v.Kind != yaml.ScalarNode && v.Style&yaml.FlowStyle == 0) {
			return 0, 0, 0, fmt.Errorf("%s: want a flow value on the key's line", k.Value)
		}
		switch {
		case first < 0:
			first, col = k.Line-1, k.Column-1
		case k.Line-1 != last+1:
			return 0, 0, 0, fmt.Errorf("%s: want the %s* members on consecutive lines", k.Value, prefix)
		}
		last = k.Line - 1
	}
	if first < 0 {
		return 0, 0, 0, fmt.Errorf("no %s* member", prefix)
	}
	return first, last, col, nil
}

// replaceMembers replaces lines first..last with members, one a line,
// indented to col.
func replaceMembers(lines []string, first, last, col int, members []string) []string {
	out := append([]string(nil), lines[:first]...)
	for _, m := range members {
		out = append(out, strings.Repeat(" ", col)+m+"\n")
	}
	return append(out, lines[last+1:]...)
}

// lookup follows mapping keys from n; a key "name=x" picks the item of
// a list whose name is x.
func lookup(n *yaml.Node, path []string) *yaml.Node {
	for _, key := range path {
		if name, ok := strings.CutPrefix(key, "name="); ok && n.Kind == yaml.SequenceNode {
			var next *yaml.Node
			for _, item := range n.Content {
				if v := lookup(item, []string{"name"}); v != nil && v.Value == name {
					next = item
				}
			}
			if next == nil {
				return nil
			}
			n = next
			continue
		}
		if n.Kind != yaml.MappingNode {
			return nil
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == key {
				next = n.Content[i+1]
			}
		}
		if next == nil {
			return nil
		}
		n = next
	}
	return n
}

// maxWidth is where a long list wraps.
const maxWidth = 100

// replaceList replaces the flow list that opens at lines[line][col] (up
// to its closing bracket, possibly lines further down) with values,
// wrapped at maxWidth with continuation lines indented two past the
// list's line.
func replaceList(lines []string, line, col int, values []string) ([]string, error) {
	end, endCol := line, -1
	for end < len(lines) {
		from := 0
		if end == line {
			from = col
		}
		if i := strings.IndexByte(lines[end][from:], ']'); i >= 0 {
			endCol = from + i
			break
		}
		end++
	}
	if endCol < 0 {
		return nil, fmt.Errorf("line %d: unclosed flow list", line+1)
	}
	head, tail := lines[line][:col], lines[end][endCol+1:]
	indent := strings.Repeat(" ", len(head)-len(strings.TrimLeft(head, " "))+2)
	var out []string
	cur := head + "["
	for i, v := range values {
		item := v
		if i < len(values)-1 {
			item += ","
		}
		if i > 0 && len(cur)+1+len(item) > maxWidth {
			out = append(out, cur+"\n")
			cur = indent + item
			continue
		}
		if i > 0 {
			cur += " "
		}
		cur += item
	}
	out = append(out, cur+"]"+tail)
	return append(append(append([]string(nil), lines[:line]...), out...), lines[end+1:]...), nil
}
