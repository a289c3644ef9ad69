package store

import (
	"strings"

	"github.com/plumbline/plumbline/internal/vocab"
)

// The figures a verdict carries per I/O size (vocab.IOSizes) are one
// column per size and figure, named prefix + vocab.IOSizeKey
// (split_fraction_8k, split_fraction_64k, ...), and one array per figure
// in Go ([vocab.NumIOSizes]float64, in IOSizes order). Every SQL text that
// names them is built from sizeColumns: an I/O size added to vocab needs
// only the migration that adds its columns (TestIOSizeColumns fails
// without it).

// The per-size column prefixes.
const (
	splitPrefix       = "split_fraction_"             // inventory_volumes
	granularityPrefix = "granularity_split_fraction_" // inventory_volumes
	penaltyPrefix     = "measured_penalty_"           // inventory_volumes
)

// sizeColumns are the columns prefix + key of every I/O size, in
// vocab.IOSizes order.
func sizeColumns(prefix string) [vocab.NumIOSizes]string {
	var out [vocab.NumIOSizes]string
	for i := range out {
		out[i] = prefix + vocab.IOSizeKey(vocab.IOSize(i))
	}
	return out
}

// Computed once from vocab, never written: the per-size columns.
var (
	splitColumns       = sizeColumns(splitPrefix)
	granularityColumns = sizeColumns(granularityPrefix)
	penaltyColumns     = sizeColumns(penaltyPrefix)
)

// columnList is cols, each qualified with alias ("f." when alias is "f";
// unqualified when alias is ""), comma-separated.
func columnList(alias string, cols ...string) string {
	if alias != "" {
		alias += "."
	}
	var b strings.Builder
	for i, c := range cols {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(alias)
		b.WriteString(c)
	}
	return b.String()
}

// appendSizes appends the per-size values fs to query arguments.
func appendSizes(args []any, fs [vocab.NumIOSizes]float64) []any {
	for _, f := range fs {
		args = append(args, f)
	}
	return args
}

// appendSizeDests appends a scan destination for each per-size value of fs.
func appendSizeDests(dest []any, fs *[vocab.NumIOSizes]float64) []any {
	for i := range fs {
		dest = append(dest, &fs[i])
	}
	return dest
}
