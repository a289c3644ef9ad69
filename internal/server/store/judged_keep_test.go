package store

import (
	"context"
	"encoding/json"
	"testing"
)

// A snapshot that repeats the one before keeps the volume's judged
// record (judged time, findings) and moves its sequence, observed time
// and the document's where on; a rename reaches the document's host; a
// snapshot that judges differently rewrites the record.
func TestRepeatedSnapshotKeepsJudged(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := open(t, dsn)
		register(t, s, "a1")
		data := func(verdict string) Volume {
			v := vol("/data", verdict)
			v.Judged.Doc = []byte(`{"mount_point":"/data","verdict":"` + verdict + `"}`)
			v.Judged.Findings = []Finding{{Rule: "partition-offset", Severity: "warning", Message: "off by 512"}}
			return v
		}
		type judged struct {
			seq, judgedNS, findings int64
			verdict                 string
			doc                     map[string]any
		}
		read := func() judged {
			t.Helper()
			var j judged
			var doc []byte
			if err := s.db.QueryRowContext(ctx, `SELECT f.sequence, f.judged_ns, f.verdict, d.doc,
(SELECT COUNT(*) FROM inventory_findings n WHERE n.volume_id = f.volume_id)
FROM inventory_volumes f JOIN inventory_docs d ON d.volume_id = f.volume_id`).Scan(&j.seq, &j.judgedNS, &j.verdict, &doc, &j.findings); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(doc, &j.doc); err != nil {
				t.Fatalf("document %q: %v", doc, err)
			}
			return j
		}
		put := func(seq uint64, v Volume) {
			t.Helper()
			if _, err := s.AppendBatch(ctx, "a1", []Record{geometryRecord(seq, v)}); err != nil {
				t.Fatal(err)
			}
		}
		put(1, data("misaligned"))
		first := read()
		put(2, data("misaligned"))
		if err := s.UpsertAgent(ctx, Agent{ID: "a1", Hostname: "db-renamed", OS: "linux"}); err != nil {
			t.Fatal(err)
		}
		put(3, data("misaligned"))
		kept := read()
		if kept.judgedNS != first.judgedNS || kept.findings != 1 || kept.verdict != "misaligned" {
			t.Errorf("repeated snapshots rewrote the judged record: %+v, then %+v", first, kept)
		}
		if kept.seq != 3 || kept.doc["sequence"] != float64(3) || kept.doc["observed_at"] != "2023-11-14T22:13:23Z" || kept.doc["host"] != "db-renamed" {
			t.Errorf("repeated snapshot: sequence %d, document %v; want sequence 3, observed at snapshot 3, host db-renamed", kept.seq, kept.doc)
		}
		put(4, data("aligned"))
		changed := read()
		if changed.judgedNS == first.judgedNS || changed.verdict != "aligned" || changed.seq != 4 || changed.doc["verdict"] != "aligned" {
			t.Errorf("a changed snapshot kept the judged record: %+v", changed)
		}

		// Several volumes kept at once (one statement for all).
		for seq := uint64(5); seq <= 6; seq++ {
			if _, err := s.AppendBatch(ctx, "a1", []Record{geometryRecord(seq, data("aligned"), vol("/logs", "aligned"))}); err != nil {
				t.Fatal(err)
			}
		}
		var moved int
		if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM inventory_volumes f JOIN inventory_docs d ON d.volume_id = f.volume_id
WHERE f.sequence = 6 AND d.sequence = 6`).Scan(&moved); err != nil || moved != 2 {
			t.Errorf("records at sequence 6 after two repeated snapshots of two volumes: %d, %v; want 2", moved, err)
		}
	})
}
