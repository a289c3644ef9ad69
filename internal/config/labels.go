package config

import "github.com/plumbline/plumbline/internal/labels"

// MaxLabels bounds a host's labels: they select it in central policy
// (Hello sends them; the server checks them in the same grammar).
const MaxLabels = labels.MaxLabels

// CheckLabels checks the labels key in the one label grammar
// (internal/labels): Kubernetes-style keys, case-insensitive, and values
// of printable text.
func CheckLabels(l map[string]string) error { return labels.Check(l) }
