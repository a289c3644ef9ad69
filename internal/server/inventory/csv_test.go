package inventory

import (
	"bytes"
	"encoding/csv"
	"net/http/httptest"
	"testing"
)

// TestCSVWriterMatchesEncodingCSV: the buffered writer quotes every text
// cell as encoding/csv does (after the formula defusing of cell).
func TestCSVWriterMatchesEncodingCSV(t *testing.T) {
	t.Parallel()
	cells := []string{"", "plain", "a,b", `say "hi"`, "line\nbreak", "cr\rx", " leading", "\tlead", "=SUM(A1)",
		`=HYPERLINK("x"),db`, "+1", "-1.5", "-x", "@cmd", `\.`, "\u00a0nbsp", "ünï", "trailing ", "\r\n"}
	rec := httptest.NewRecorder()
	c := newCSV(rec, "x.csv", "", []string{"h"})
	want := &bytes.Buffer{}
	ref := csv.NewWriter(want)
	ref.Write([]string{"h"})
	for _, s := range cells {
		c.row([]string{s, "x"})
		ref.Write([]string{cell(s), "x"})
	}
	c.flush()
	ref.Flush()
	if got := rec.Body.String(); got != want.String() {
		t.Errorf("csvWriter wrote\n%q\nwant (encoding/csv)\n%q", got, want.String())
	}
}
