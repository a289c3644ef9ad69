package store

import (
	"context"
	"strings"
	"testing"

	"github.com/plumbline/plumbline/internal/vocab"
)

// Every I/O size vocab lists has its columns in the migrated schema, on
// both engines: an I/O size added to vocab without the migration that
// adds its columns fails here, naming the missing column.
func TestIOSizeColumns(t *testing.T) {
	t.Parallel()
	tables := []struct {
		table    string
		prefixes []string
	}{
		{"inventory_volumes", []string{splitPrefix, granularityPrefix, penaltyPrefix}},
	}
	forEachEngine(t, func(t *testing.T, dsn string) {
		s := open(t, dsn)
		for _, tb := range tables {
			for _, prefix := range tb.prefixes {
				for i, col := range sizeColumns(prefix) {
					_, err := s.db.ExecContext(context.Background(), `SELECT `+col+` FROM `+tb.table+` WHERE 1 = 0`)
					if err != nil {
						t.Errorf("table %s has no column %s for I/O size %d (vocab.IOSizes): add a migration adding it: %v",
							tb.table, col, vocab.IOSize(i), err)
					}
				}
			}
		}
	})
}

func TestSizeColumns(t *testing.T) {
	t.Parallel()
	got := sizeColumns(splitPrefix)
	for i, size := range vocab.IOSizes() {
		if want := "split_fraction_" + vocab.IOSizeKey(size); got[i] != want {
			t.Errorf("sizeColumns(%q)[%d] = %q, want %q", splitPrefix, i, got[i], want)
		}
	}
	// The SQL texts built from them name every size's columns.
	for name, text := range map[string]string{"inventoryColumns": inventoryColumns, "volumeColumns": volumeColumns,
		"penaltySums": penaltySums, "offendersOrder": offendersOrder} {
		for _, col := range got {
			if !strings.Contains(text, col) {
				t.Errorf("%s does not name %s: %s", name, col, text)
			}
		}
	}
	for _, cols := range [][vocab.NumIOSizes]string{splitColumns, granularityColumns, penaltyColumns} {
		for _, col := range cols {
			if !strings.Contains(strings.Join(inventoryRowColumns, ","), col) {
				t.Errorf("inventoryRowColumns does not name %s", col)
			}
		}
	}
	if c, ok := SplitFractionColumn(vocab.IOSize(0)); !ok || c != got[0] {
		t.Errorf("SplitFractionColumn(%d) = %q, %v, want %q", vocab.IOSize(0), c, ok, got[0])
	}
	if c, ok := SplitFractionColumn(vocab.IOSize(0) + 1); ok {
		t.Errorf("SplitFractionColumn(%d) = %q: want none for a size vocab does not list", vocab.IOSize(0)+1, c)
	}
}
