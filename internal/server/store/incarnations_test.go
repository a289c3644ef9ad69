package store

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func incarnations(t *testing.T, s *Store, agentID string) []string {
	t.Helper()
	rows, err := s.db.QueryContext(context.Background(), s.q(`SELECT incarnation FROM agent_incarnations WHERE agent_id = ? ORDER BY incarnation`), agentID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var i string
		if err := rows.Scan(&i); err != nil {
			t.Fatal(err)
		}
		out = append(out, i)
	}
	return out
}

// TestPruneIncarnations: one row per agent start accumulates; retention
// removes the rows of past incarnations whose records are all pruned (or
// that had none) and that were last seen before the cutoff, and keeps the
// current one, any with records still stored (judged or not, a gap to
// fill), any seen lately, and every row of an agent that never said Hello
// with an incarnation.
func TestPruneIncarnations(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := open(t, dsn)
		register(t, s, "a1")
		register(t, s, "a2")
		old := time.Now().Add(-48 * time.Hour).UTC()
		s.now = func() time.Time { return old }
		hello := func(agent, inc string) {
			t.Helper()
			if _, err := s.Hello(ctx, agent, inc); err != nil {
				t.Fatal(err)
			}
		}
		appendRecs := func(agent, inc string, recs []Record) {
			t.Helper()
			if _, err := s.AppendBatchFrom(ctx, agent, inc, 0, recs); err != nil {
				t.Fatal(err)
			}
		}
		hello("a1", "i1")
		appendRecs("a1", "i1", probeRecords(1, 3)) // server sequences 1..3: judged, pruned
		hello("a1", "i2")                          // a start that sent nothing
		hello("a1", "i3")
		appendRecs("a1", "i3", probeRecords(1, 2)) // 4..5: not judged, kept
		hello("a1", "i4")
		appendRecs("a1", "i4", probeRecords(2, 2)) // 6: above its high water (1 missing), kept
		appendRecs("a2", "x", nil)                 // a2 never said Hello with an incarnation
		s.now = time.Now
		hello("a1", "i5") // seen within retention
		hello("a1", "cur")
		setWatermark(t, s, "a1", 3)
		cutoff := time.Now().Add(-24 * time.Hour)
		if st := pruneAll(t, ctx, s, cutoff, 100); st.Records != 3 {
			t.Fatalf("pruned %d records, want 3", st.Records)
		}

		total := 0
		for i := 0; ; i++ {
			n, done, err := s.PruneIncarnations(ctx, cutoff, 1)
			if err != nil {
				t.Fatal(err)
			}
			total += n
			if done {
				break
			}
			if i > 10 {
				t.Fatal("PruneIncarnations never done")
			}
		}
		if total != 2 {
			t.Errorf("pruned %d incarnations, want 2 (i1, i2)", total)
		}
		if d := cmp.Diff([]string{"cur", "i3", "i4", "i5"}, incarnations(t, s, "a1")); d != "" {
			t.Errorf("a1's incarnations (-want +got):\n%s", d)
		}
		if d := cmp.Diff([]string{"x"}, incarnations(t, s, "a2")); d != "" {
			t.Errorf("a2's incarnations (-want +got):\n%s", d)
		}
		// What is kept still dedups: i3's replay is a duplicate.
		if res, err := s.AppendBatchFrom(ctx, "a1", "i3", 0, probeRecords(1, 2)); err != nil || len(res.Duplicates) != 2 || len(res.Stored) != 0 {
			t.Errorf("i3 replay = %+v, %v; want 2 duplicates", res, err)
		}
	})
}
