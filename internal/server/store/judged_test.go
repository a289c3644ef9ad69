package store

import (
	"context"
	"encoding/json"
	"testing"
	"time"
)

// A snapshot stores its volumes' judged records with it (a volume without
// one is listed for the judge); the judge's pages list the records of
// other rules; PutJudged rewrites a record of the same snapshot only;
// the document carries where the volume lives, and a rename reaches it.
func TestJudgedRecords(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := open(t, dsn)
		register(t, s, "a1")
		data := vol("/data", "unknown")
		data.Judged.Doc = []byte(`{"mount_point":"/data"}`)
		raw := vol("/raw", "aligned")
		raw.Judged = InventoryVolume{}
		if _, err := s.AppendBatch(ctx, "a1", []Record{geometryRecord(1, data, raw)}); err != nil {
			t.Fatal(err)
		}
		iv, err := s.InventoryVolumeByID(ctx, VolumeID("a1", "/data"))
		if err != nil || iv.Verdict != "unknown" || iv.Hostname != "a1.example" || iv.Sequence != 1 {
			t.Fatalf("judged record of /data = %+v, %v", iv, err)
		}
		if n := count(t, s, "inventory_volumes"); n != 1 {
			t.Errorf("%d inventory rows, want 1 (/raw has no judged record)", n)
		}
		page := func(version, agent, mount string, limit int) []string {
			t.Helper()
			gs, err := s.GeometriesToJudge(ctx, version, agent, mount, limit)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, g := range gs {
				out = append(out, g.MountPoint)
			}
			return out
		}
		if got := page("test", "", "", 10); len(got) != 1 || got[0] != "/raw" {
			t.Errorf("to judge under the stored rules: %v, want [/raw]", got)
		}
		if got := page("new", "", "", 1); len(got) != 1 || got[0] != "/data" {
			t.Errorf("first page under new rules: %v, want [/data]", got)
		}
		if got := page("new", "a1", "/data", 10); len(got) != 1 || got[0] != "/raw" {
			t.Errorf("next page under new rules: %v, want [/raw]", got)
		}

		rejudged := vol("/data", "misaligned")
		rejudged.AgentID, rejudged.Sequence, rejudged.Judged.RulesVersion = "a1", 1, "new"
		rejudged.Judged.Doc = data.Judged.Doc
		stale := rejudged
		stale.Sequence = 0
		if n, err := s.PutJudged(ctx, []Volume{rejudged, stale}); err != nil || n != 1 {
			t.Fatalf("PutJudged = %d, %v; want 1 (the stale one left alone)", n, err)
		}
		if got := page("new", "", "", 10); len(got) != 1 || got[0] != "/raw" {
			t.Errorf("to judge after PutJudged: %v, want [/raw]", got)
		}
		// A newer server's judgement (a higher rules epoch) is not
		// rewritten by an older one's.
		newer := rejudged
		newer.Judged.RulesEpoch, newer.Judged.RulesVersion = 2, "newer"
		if n, err := s.PutJudged(ctx, []Volume{newer}); err != nil || n != 1 {
			t.Fatalf("PutJudged(epoch 2) = %d, %v; want 1", n, err)
		}
		older := vol("/data", "aligned")
		older.AgentID, older.Sequence, older.Judged.RulesEpoch = "a1", 1, 1
		if n, err := s.PutJudged(ctx, []Volume{older}); err != nil || n != 0 {
			t.Errorf("PutJudged(epoch 1) over epoch 2 = %d, %v; want 0", n, err)
		}
		vols, err := s.ListVolumes(ctx)
		if err != nil || len(vols) != 2 || vols[0].Verdict != "misaligned" || vols[1].Verdict != "unknown" {
			t.Errorf("ListVolumes after PutJudged = %+v, %v; want /data misaligned, /raw unknown (not judged)", vols, err)
		}

		// The document, and a rename.
		if err := s.UpsertAgent(ctx, Agent{ID: "a1", Hostname: "db-renamed", OS: "linux"}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.SyncInventory(ctx, time.Time{}); err != nil {
			t.Fatal(err)
		}
		var doc map[string]any
		if err := s.db.QueryRowContext(ctx, `SELECT doc FROM inventory_docs`).Scan(jsonDest{&doc}); err != nil {
			t.Fatal(err)
		}
		want := map[string]any{"mount_point": "/data", "agent_id": "a1", "id": VolumeID("a1", "/data"), "host": "db-renamed",
			"sequence": float64(1), "observed_at": "2023-11-14T22:13:21Z"}
		for k, v := range want {
			if doc[k] != v {
				t.Errorf("document %s = %v, want %v (%v)", k, doc[k], v, doc)
			}
		}
		if iv, err := s.InventoryVolumeByID(ctx, VolumeID("a1", "/data")); err != nil || iv.Hostname != "db-renamed" {
			t.Errorf("row after the rename: %+v, %v", iv, err)
		}

		// A snapshot without /data removes its judged record with it.
		if _, err := s.AppendBatch(ctx, "a1", []Record{geometryRecord(2, vol("/logs", "aligned"))}); err != nil {
			t.Fatal(err)
		}
		for table, want := range map[string]int{"inventory_volumes": 1, "inventory_docs": 1} {
			if n := count(t, s, table); n != want {
				t.Errorf("%s after /data went = %d, want %d", table, n, want)
			}
		}
	})
}

// jsonDest scans a JSON column into v.
type jsonDest struct{ v any }

func (d jsonDest) Scan(src any) error {
	switch b := src.(type) {
	case []byte:
		return json.Unmarshal(b, d.v)
	case string:
		return json.Unmarshal([]byte(b), d.v)
	}
	return nil
}
