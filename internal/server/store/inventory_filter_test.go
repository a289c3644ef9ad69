package store

import (
	"testing"

	"github.com/plumbline/plumbline/internal/vocab"
)

// Every I/O size the vocabulary names has a column that keeps its split
// fraction, so that min_split_fraction with io_size_bytes filters on it.
func TestSplitFractionColumns(t *testing.T) {
	t.Parallel()
	for _, size := range vocab.IOSizes() {
		col, ok := SplitFractionColumn(size)
		if !ok {
			t.Errorf("I/O size %d: no split fraction column (add a migration and an entry in splitFractionColumns)", size)
			continue
		}
		if filterColumns[col] != Real {
			t.Errorf("I/O size %d: column %q is not a filterable REAL column", size, col)
		}
	}
}
