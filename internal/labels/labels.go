// Package labels is the one grammar of host labels: the labels a join
// token gives the agents it enrolls, the labels an agent declares in its
// configuration, and the label keys central policy selects hosts by. It
// also holds the one check for printable text (CheckText) that every
// label value and every free-text field the server stores passes.
//
// Keys follow Kubernetes' label-key syntax: an optional prefix (a DNS
// subdomain, at most 253 characters) and a slash, then a name of 1 to 63
// characters of letters, digits, '-', '_' and '.', starting and ending
// with a letter or digit ("role", "team", "k8s.io/zone"). Keys are
// case-insensitive: written in any case, they are stored, compared and
// shown in lower case ("Role" and "role" are one key; a label set holding
// both is refused). Values are case-sensitive: 0 to 128 bytes of
// printable text (CheckText) without commas or leading or trailing
// spaces.
//
// Labels select hosts in policy and are shown by the inventory; they are
// not Prometheus label names.
package labels

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Bounds of a label set.
const (
	MaxLabels        = 64
	MaxNameBytes     = 63
	MaxPrefixBytes   = 253
	MaxKeyBytes      = MaxPrefixBytes + 1 + MaxNameBytes
	MaxValueBytes    = 128
	maxQuotedInError = 80
)

// CanonicalKey is k as it is stored and compared: lower case.
func CanonicalKey(k string) string { return strings.ToLower(k) }

// CheckKey checks one key's syntax (any case).
func CheckKey(k string) error {
	prefix, name, hasPrefix := strings.Cut(k, "/")
	if !hasPrefix {
		prefix, name = "", k
	}
	switch {
	case k == "":
		return fmt.Errorf("label with an empty key")
	case len(k) > MaxKeyBytes:
		return fmt.Errorf("label key %q: %d bytes, want at most %d", quote(k), len(k), MaxKeyBytes)
	case hasPrefix && !dnsSubdomain(strings.ToLower(prefix)):
		return fmt.Errorf("label key %q: prefix %q: want a DNS subdomain (k8s.io, example.com) of at most %d characters", quote(k), quote(prefix), MaxPrefixBytes)
	case !labelName(name):
		return fmt.Errorf("label key %q: name %q: want 1 to %d characters of A-Z a-z 0-9 - _ . starting and ending with a letter or digit", quote(k), quote(name), MaxNameBytes)
	}
	return nil
}

// CheckValue checks one value's syntax.
func CheckValue(v string) error {
	switch {
	case len(v) > MaxValueBytes:
		return fmt.Errorf("value of %d bytes: want at most %d", len(v), MaxValueBytes)
	case strings.ContainsRune(v, ','):
		return fmt.Errorf("value %q: want no comma", quote(v))
	case strings.TrimSpace(v) != v:
		return fmt.Errorf("value %q: want no leading or trailing space", quote(v))
	}
	return CheckText(v)
}

// Check checks a label set: at most MaxLabels labels, every key and value
// well-formed, no two keys that differ only in case.
func Check(labels map[string]string) error {
	if len(labels) > MaxLabels {
		return fmt.Errorf("%d labels: want at most %d", len(labels), MaxLabels)
	}
	seen := make(map[string]string, len(labels))
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		if err := CheckKey(k); err != nil {
			return err
		}
		if err := CheckValue(labels[k]); err != nil {
			return fmt.Errorf("label %s: %w", quote(k), err)
		}
		c := CanonicalKey(k)
		if other, dup := seen[c]; dup {
			return fmt.Errorf("labels %q and %q: keys are case-insensitive, want one of them", other, k)
		}
		seen[c] = k
	}
	return nil
}

// Canonical checks labels and returns them with canonical keys (a new
// map; never nil).
func Canonical(labels map[string]string) (map[string]string, error) {
	if err := Check(labels); err != nil {
		return nil, err
	}
	return Fold(labels), nil
}

// Fold returns labels with canonical keys (a new map; never nil), without
// checking them: for label sets checked when they were stored. Of two
// keys that differ only in case, the value of the greater key wins.
func Fold(labels map[string]string) map[string]string {
	out := make(map[string]string, len(labels))
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		out[CanonicalKey(k)] = labels[k]
	}
	return out
}

// Parse reads labels written as Format writes them: key=value pairs
// separated by commas ("" is none); keys come back canonical.
func Parse(s string) (map[string]string, error) {
	out := map[string]string{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			return nil, fmt.Errorf("label %q: want key=value", quote(kv))
		}
		if _, dup := out[CanonicalKey(k)]; dup {
			return nil, fmt.Errorf("label %q given twice (keys are case-insensitive)", quote(k))
		}
		if err := CheckKey(k); err != nil {
			return nil, err
		}
		out[CanonicalKey(k)] = v
	}
	return out, Check(out)
}

// Format writes labels as Parse reads them, keys sorted.
func Format(labels map[string]string) string {
	var b strings.Builder
	for i, k := range slices.Sorted(maps.Keys(labels)) {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k + "=" + labels[k])
	}
	return b.String()
}

// labelName: 1 to 63 of [A-Za-z0-9_.-], alphanumeric at both ends.
func labelName(s string) bool {
	if s == "" || len(s) > MaxNameBytes || !alnum(s[0]) || !alnum(s[len(s)-1]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !alnum(c) && c != '-' && c != '_' && c != '.' {
			return false
		}
	}
	return true
}

// dnsSubdomain: at most 253 characters of dot-separated DNS labels of
// [a-z0-9-], alphanumeric at both ends, each at most 63 characters.
func dnsSubdomain(s string) bool {
	if s == "" || len(s) > MaxPrefixBytes {
		return false
	}
	for _, part := range strings.Split(s, ".") {
		if part == "" || len(part) > 63 || !lowerAlnum(part[0]) || !lowerAlnum(part[len(part)-1]) {
			return false
		}
		for i := 0; i < len(part); i++ {
			if c := part[i]; !lowerAlnum(c) && c != '-' {
				return false
			}
		}
	}
	return true
}

func alnum(c byte) bool      { return lowerAlnum(c) || 'A' <= c && c <= 'Z' }
func lowerAlnum(c byte) bool { return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' }

// quote cuts s for an error message (it is quoted with %q there).
func quote(s string) string {
	if len(s) <= maxQuotedInError {
		return s
	}
	return s[:maxQuotedInError] + "…"
}
