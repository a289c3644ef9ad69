package config

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Label limits: a host's labels select it in central policy (Hello sends
// them; the server checks them with CheckLabels too).
const (
	MaxLabels          = 64
	MaxLabelKeyBytes   = 63
	MaxLabelValueBytes = 128
)

// CheckLabels accepts at most MaxLabels labels whose keys are 1 to 63
// characters of [a-z0-9_.-] starting with a letter and whose values are
// at most 128 bytes of printable UTF-8.
func CheckLabels(labels map[string]string) error {
	if len(labels) > MaxLabels {
		return fmt.Errorf("%d labels: want at most %d", len(labels), MaxLabels)
	}
	for k, v := range labels {
		if err := CheckLabelKey(k); err != nil {
			return err
		}
		if len(v) > MaxLabelValueBytes || !utf8.ValidString(v) || strings.ContainsFunc(v, unicode.IsControl) {
			return fmt.Errorf("label %s value %q: want at most %d bytes of printable text", k, v, MaxLabelValueBytes)
		}
	}
	return nil
}

// CheckLabelKey accepts 1 to 63 characters of [a-z0-9_.-] starting with a
// letter.
func CheckLabelKey(k string) error {
	ok := k != "" && len(k) <= MaxLabelKeyBytes && k[0] >= 'a' && k[0] <= 'z'
	for _, r := range k {
		ok = ok && (r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '.' || r == '-')
	}
	if !ok {
		return fmt.Errorf("label key %q: want 1 to %d characters of a-z, 0-9, '_', '.', '-', starting with a letter", k, MaxLabelKeyBytes)
	}
	return nil
}
