// Package strictyaml decodes a YAML configuration file into a Go struct
// with errors an operator can act on: each names the YAML key path
// (probes[0].file_size) and the line, an unknown key comes with the keys
// valid there and the nearest one ("did you mean declared_devices?"), and
// no message shows a Go type name. Unknown keys are errors.
//
// The struct's yaml tags are the vocabulary: a field tagged "-" is not a
// key. Values decode as go.yaml.in/yaml/v3 decodes them (so a type's
// UnmarshalText, such as bytesize.Size's, is honoured).
package strictyaml

import (
	"bytes"
	"encoding"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Decode decodes one YAML document in b over out (a pointer to a struct
// holding the defaults): keys absent from b keep out's values. An empty
// document leaves out as it is. All the errors found are returned joined,
// one per key, in the order of the file.
func Decode(b []byte, out any) error {
	rv := reflect.ValueOf(out)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("strictyaml: Decode needs a non-nil pointer, got %T", out)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil
		}
		return syntaxError(err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		line := extra.Line
		if err != nil {
			return syntaxError(err)
		}
		return fmt.Errorf("line %d: a second YAML document (---); the file holds one", line)
	}
	root := &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			return nil
		}
		root = root.Content[0]
	}
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return nil // a file of comments only
	}
	c := checker{}
	c.check(root, rv.Elem().Type(), "")
	if len(c.errs) > 0 {
		return errors.Join(c.errs...)
	}
	if err := root.Decode(out); err != nil {
		// The walk above checked every key and value; this is a safety net.
		return fmt.Errorf("line %d: %s", root.Line, cleanYAMLError(err))
	}
	return nil
}

// syntaxError words a YAML parse error ("yaml: line 3: mapping values are
// not allowed in this context") without the library's prefix.
func syntaxError(err error) error {
	return fmt.Errorf("not valid YAML: %s", strings.TrimPrefix(err.Error(), "yaml: "))
}

type checker struct{ errs []error }

func (c *checker) fail(n *yaml.Node, path, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if path != "" {
		msg = path + ": " + msg
	}
	c.errs = append(c.errs, fmt.Errorf("line %d: %s", n.Line, msg))
}

var (
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
	yamlUnmarshaler = reflect.TypeFor[yaml.Unmarshaler]()
	durationType    = reflect.TypeFor[time.Duration]()
)

// check walks node against type t; path is the key path so far.
func (c *checker) check(n *yaml.Node, t reflect.Type, path string) {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return // key: (nothing) keeps the default, as yaml.v3 does
	}
	pt := reflect.PointerTo(t)
	if pt.Implements(yamlUnmarshaler) || pt.Implements(textUnmarshaler) || t == durationType {
		c.leaf(n, t, path)
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			c.fail(n, path, "want a mapping of keys (%s), got %s", strings.Join(keysOf(t), ", "), describe(n))
			return
		}
		fields := fieldsOf(t)
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			name := k.Value
			kp := join(path, name)
			if seen[name] {
				c.fail(k, kp, "key given twice")
				continue
			}
			seen[name] = true
			f, ok := fields[name]
			if !ok {
				c.fail(k, path, "unknown key %q%s; valid keys %s: %s", name, suggest(name, keysOf(t)), where(path), strings.Join(keysOf(t), ", "))
				continue
			}
			c.check(v, f.Type, kp)
		}
	case reflect.Slice, reflect.Array:
		if n.Kind != yaml.SequenceNode {
			c.fail(n, path, "want a list, got %s", describe(n))
			return
		}
		for i, e := range n.Content {
			c.check(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i))
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			c.fail(n, path, "want a mapping, got %s", describe(n))
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			c.leaf(n.Content[i], t.Key(), path)
			c.check(n.Content[i+1], t.Elem(), join(path, n.Content[i].Value))
		}
	default:
		c.leaf(n, t, path)
	}
}

// leaf decodes a value of type t on its own, to word its error.
func (c *checker) leaf(n *yaml.Node, t reflect.Type, path string) {
	if n.Kind != yaml.ScalarNode && (t.Kind() != reflect.Interface) {
		pt := reflect.PointerTo(t)
		if !pt.Implements(yamlUnmarshaler) {
			c.fail(n, path, "want %s, got %s", kindName(t), describe(n))
			return
		}
	}
	err := n.Decode(reflect.New(t).Interface())
	if err == nil {
		return
	}
	var te *yaml.TypeError
	if errors.As(err, &te) {
		c.fail(n, path, "%q is not %s", n.Value, kindName(t))
		return
	}
	c.fail(n, path, "%s", cleanYAMLError(err))
}

// cleanYAMLError drops the library's prefixes.
func cleanYAMLError(err error) string {
	s := strings.TrimPrefix(err.Error(), "yaml: ")
	s = strings.TrimPrefix(s, "unmarshal errors:\n  ")
	return s
}

// kindName names what a value of t is, in an operator's words.
func kindName(t reflect.Type) string {
	if t == durationType {
		return "a duration (e.g. 500ms, 30s, 15m, 1h)"
	}
	if reflect.PointerTo(t).Implements(textUnmarshaler) {
		return "a valid value"
	}
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "a whole number"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number, 0 or more"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "a mapping"
	}
	return "a value"
}

// describe says what a node is: "a list", "a mapping", "the text \"x\"".
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	case yaml.ScalarNode:
		return fmt.Sprintf("%q", n.Value)
	}
	return "something else"
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func where(path string) string {
	if path == "" {
		return "at the top level"
	}
	return "in " + path
}

// fieldsOf maps a struct's YAML keys to its fields.
func fieldsOf(t reflect.Type) map[string]reflect.StructField {
	m := map[string]reflect.StructField{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name) // yaml.v3's default
		}
		m[name] = f
	}
	return m
}

// keysOf lists a struct's YAML keys in field order.
func keysOf(t reflect.Type) []string {
	fields := fieldsOf(t)
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return fields[a].Index[0] - fields[b].Index[0] })
	return keys
}

// suggest is ` (did you mean "X"?)` for the valid key an operator most
// likely meant: the same key in other case or separators, else the
// nearest within an edit distance of a third of its length (at least 1,
// or 2 for a key of 5 letters or more; a swap of two letters counts 1),
// else the only key containing name.
func suggest(name string, valid []string) string {
	norm := func(s string) string {
		return strings.ToLower(strings.NewReplacer("_", "", "-", "", " ", "").Replace(s))
	}
	n := norm(name)
	best, bestD := "", 1<<30
	var containing []string
	for _, v := range valid {
		if norm(v) == n {
			return fmt.Sprintf(" (did you mean %q?)", v)
		}
		if d := distance(strings.ToLower(name), v); d < bestD {
			best, bestD = v, d
		}
		if len(n) >= 4 && (strings.Contains(norm(v), n) || strings.Contains(n, norm(v))) {
			containing = append(containing, v)
		}
	}
	limit := max(1, len(best)/3)
	if len(best) >= 5 {
		limit = max(limit, 2)
	}
	if best != "" && bestD <= limit {
		return fmt.Sprintf(" (did you mean %q?)", best)
	}
	if len(containing) == 1 {
		return fmt.Sprintf(" (did you mean %q?)", containing[0])
	}
	return ""
}

// distance is the optimal-string-alignment edit distance between a and b:
// insertions, deletions, substitutions and swaps of adjacent bytes.
func distance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

// Lines maps each key path of the YAML document in b (as Decode's errors
// write them: probes[0].file_size) to its line. A document that does not
// parse gives an empty map.
func Lines(b []byte) map[string]int {
	m := map[string]int{}
	var doc yaml.Node
	if yaml.Unmarshal(b, &doc) != nil || len(doc.Content) == 0 {
		return m
	}
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		if n.Kind == yaml.AliasNode && n.Alias != nil {
			n = n.Alias
		}
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				kp := join(path, n.Content[i].Value)
				m[kp] = n.Content[i].Line
				walk(n.Content[i+1], kp)
			}
		case yaml.SequenceNode:
			for i, e := range n.Content {
				ep := fmt.Sprintf("%s[%d]", path, i)
				m[ep] = e.Line
				walk(e, ep)
			}
		}
	}
	walk(doc.Content[0], "")
	return m
}

// WithLines returns err with "line N: " before each line of its message
// that starts with a key path of lines (the longest one that does, ended
// by a space, a colon or the end), as validation errors written after
// Decode do ("probes[0].ops 0: want 1 to 100000"). Lines that already
// name one, or name no key of the file, are left as they are; a path
// mapped to 0 is one whose value did not come from the file (a flag set
// it): neither it nor its parents give a line. errors.Is and errors.As
// see err.
func WithLines(err error, lines map[string]int) error {
	if err == nil || len(lines) == 0 {
		return err
	}
	msgs := strings.Split(err.Error(), "\n")
	changed := false
	for i, msg := range msgs {
		if strings.HasPrefix(msg, "line ") {
			continue
		}
		// The message may start with a wrapper's prefix ("invalid
		// configuration: "); find the key path after any of them.
		for at := 0; at <= len(msg); {
			rest := msg[at:]
			if n, ok := lineOf(rest, lines); ok {
				msgs[i] = msg[:at] + fmt.Sprintf("line %d: ", n) + rest
				changed = true
				break
			}
			next := strings.Index(rest, ": ")
			if next < 0 {
				break
			}
			at += next + 2
		}
	}
	if !changed {
		return err
	}
	return &linedError{msg: strings.Join(msgs, "\n"), err: err}
}

// lineOf is the line of the longest key path that s starts with.
func lineOf(s string, lines map[string]int) (int, bool) {
	end := strings.IndexAny(s, " :")
	if end < 0 {
		end = len(s)
	}
	for p := s[:end]; p != ""; {
		if n, ok := lines[p]; ok {
			return n, n > 0 // 0: the value is not the file's (a flag's)
		}
		// Shorter: drop the last .key or [i].
		cut := max(strings.LastIndex(p, "."), strings.LastIndex(p, "["))
		if cut <= 0 {
			break
		}
		p = p[:cut]
	}
	return 0, false
}

type linedError struct {
	msg string
	err error
}

func (e *linedError) Error() string { return e.msg }
func (e *linedError) Unwrap() error { return e.err }
