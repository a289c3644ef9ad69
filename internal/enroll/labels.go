package enroll

import (
	"github.com/plumbline/plumbline/internal/labels"
)

// MaxLabels is the most labels a token gives its agents (the one label
// grammar's bound, internal/labels).
const MaxLabels = labels.MaxLabels

// ParseLabels parses --labels: k=v pairs separated by commas ("" is none),
// in the one label grammar (internal/labels); keys come back in lower
// case.
func ParseLabels(s string) (map[string]string, error) { return labels.Parse(s) }

// CheckLabels checks a label set in the one label grammar.
func CheckLabels(l map[string]string) error { return labels.Check(l) }

// FormatLabels is labels as ParseLabels reads them, keys sorted.
func FormatLabels(l map[string]string) string { return labels.Format(l) }
