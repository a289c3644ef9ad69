package enroll

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Label bounds: a token gives its agents at most MaxLabels labels; a key is
// 1 to 63 characters of [A-Za-z0-9._/-] starting with a letter or digit,
// a value 0 to 63 characters of [A-Za-z0-9._:/@-].
const (
	MaxLabels        = 32
	maxLabelKeyLen   = 63
	maxLabelValueLen = 63
)

// ParseLabels parses --labels: k=v pairs separated by commas ("" is none).
func ParseLabels(s string) (map[string]string, error) {
	out := map[string]string{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			return nil, fmt.Errorf("label %q: want key=value", truncate(kv, 80))
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("label %q given twice", k)
		}
		out[k] = v
	}
	return out, CheckLabels(out)
}

// CheckLabels checks a label set against the bounds above.
func CheckLabels(labels map[string]string) error {
	if len(labels) > MaxLabels {
		return fmt.Errorf("%d labels: want at most %d", len(labels), MaxLabels)
	}
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		if err := checkLabelKey(k); err != nil {
			return err
		}
		v := labels[k]
		if len(v) > maxLabelValueLen {
			return fmt.Errorf("label %s: value of %d characters, want at most %d", k, len(v), maxLabelValueLen)
		}
		if i := strings.IndexFunc(v, func(r rune) bool { return !labelChar(r) && !strings.ContainsRune(":@", r) }); i >= 0 {
			return fmt.Errorf("label %s: value %q: character %d is not one of A-Z a-z 0-9 . _ : / @ -", k, truncate(v, 80), i)
		}
	}
	return nil
}

func checkLabelKey(k string) error {
	switch {
	case k == "":
		return fmt.Errorf("label with an empty key")
	case len(k) > maxLabelKeyLen:
		return fmt.Errorf("label key %q: %d characters, want at most %d", truncate(k, 80), len(k), maxLabelKeyLen)
	case !alnum(rune(k[0])):
		return fmt.Errorf("label key %q: want a letter or digit first", truncate(k, 80))
	}
	if i := strings.IndexFunc(k, func(r rune) bool { return !labelChar(r) }); i >= 0 {
		return fmt.Errorf("label key %q: character %d is not one of A-Z a-z 0-9 . _ / -", truncate(k, 80), i)
	}
	return nil
}

func alnum(r rune) bool { return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' }

func labelChar(r rune) bool { return alnum(r) || strings.ContainsRune("._/-", r) }

// FormatLabels is labels as ParseLabels reads them, keys sorted.
func FormatLabels(labels map[string]string) string {
	var b strings.Builder
	for i, k := range slices.Sorted(maps.Keys(labels)) {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k + "=" + labels[k])
	}
	return b.String()
}
