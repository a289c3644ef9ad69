package inventory

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/plumbline/plumbline/internal/server/evaluator"
	"github.com/plumbline/plumbline/internal/server/store"
)

// A volume holding a database's files carries the database's state and
// the attribution of its regression in its row (JSON and CSV), and its
// detail lists each operation; an operation the database does not time
// has no latency (null) and says why, never 0. A volume without a
// database has a null database and empty cells.
func TestDatabaseInInventory(t *testing.T) {
	t.Parallel()
	for _, e := range engines {
		t.Run(e.Name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			st, err := store.Open(ctx, e.DSN(t))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			seed(t, st, "db1", volume("/data"), volume("/log"))
			t0 := time.Now().Add(-time.Hour).Truncate(time.Minute)
			var recs []store.Record
			for i := range 20 {
				lat := 400 * time.Microsecond
				if i >= 15 {
					lat *= 4
				}
				start := t0.Add(time.Duration(i) * time.Minute)
				recs = append(recs, store.Record{Sequence: uint64(2 + i), Kind: store.KindDatabase, ProducedAt: start, Database: &store.DatabaseIO{
					Source: "main", Engine: "postgresql", StartedAt: start, Interval: time.Minute, Ops: []store.DatabaseOp{
						{Location: "data", Path: "/data/pg", MountPoint: "/data", Device: "sdb1", Op: "read", Count: 300, Measured: true, Time: 300 * lat},
						{Location: "wal", Path: "/data/pg/pg_wal", MountPoint: "/data", Device: "sdb1", Op: "wal-sync", Count: 60, NotMeasured: "track_wal_io_timing is off"},
					}}})
			}
			if _, err := st.AppendBatch(ctx, "db1", recs); err != nil {
				t.Fatal(err)
			}
			ev, err := evaluator.New(st, evaluator.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ev.Pass(ctx); err != nil {
				t.Fatal(err)
			}
			srv := serveSyncing(t, st, Options{})
			defer srv.Close()

			_, body := get(t, srv.URL+"/api/v1/volumes")
			vols, _ := body["volumes"].([]any)
			if len(vols) != 2 {
				t.Fatalf("%d volumes, want 2: %v", len(vols), body)
			}
			data, log := vols[0].(map[string]any), vols[1].(map[string]any)
			db, _ := data["database"].(map[string]any)
			if db["state"] != "degraded" || db["attribution"] != "undetermined" || !strings.Contains(db["reason"].(string), "main read 1.6 ms vs 0.4 ms (×4)") ||
				!strings.Contains(db["reason"].(string), "not measured: main wal-sync: track_wal_io_timing is off") {
				t.Errorf("/data database = %v; want degraded, undetermined (no probe runs), the read's numbers, wal-sync not measured", db)
			}
			if d, ok := log["database"]; !ok || d != nil {
				t.Errorf("/log database = %v (present %v); want null", d, ok)
			}

			resp, err := http.Get(srv.URL + "/api/v1/volumes?format=csv")
			if err != nil {
				t.Fatal(err)
			}
			rows, err := csv.NewReader(resp.Body).ReadAll()
			resp.Body.Close()
			if err != nil || len(rows) != 3 {
				t.Fatalf("CSV: %d rows, %v", len(rows), err)
			}
			n := len(rows[0])
			if got := strings.Join(rows[0][n-3:], ","); got != "database_state,database_attribution,database_reason" {
				t.Errorf("CSV's last columns = %s", got)
			}
			if rows[1][n-3] != "degraded" || rows[1][n-2] != "undetermined" || rows[2][n-3] != "" {
				t.Errorf("CSV database cells = %v / %v", rows[1][n-3:], rows[2][n-3:])
			}

			resp, err = http.Get(srv.URL + "/api/v1/volumes/" + store.VolumeID("db1", "/data"))
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var detail struct {
				DatabaseIO      []map[string]any `json:"database_io"`
				DatabaseHistory []map[string]any `json:"database_history"`
			}
			if err := json.Unmarshal(raw, &detail); err != nil || len(detail.DatabaseIO) != 2 {
				t.Fatalf("detail database_io = %s, %v; want 2 operations", raw, err)
			}
			if h := detail.DatabaseHistory; len(h) != 40 || h[0]["op"] != "read" || math.Abs(h[0]["latency_seconds"].(float64)-0.0004) > 1e-9 || h[1]["op"] != "wal-sync" || h[1]["latency_seconds"] != nil {
				t.Errorf("database_history = %d intervals, first %v; want 40 (20 × read, wal-sync), read 0.4 ms, wal-sync latency null", len(h), h[:min(2, len(h))])
			}
			for _, o := range detail.DatabaseIO {
				switch o["op"] {
				case "read":
					if l, _ := o["latency_seconds"].(float64); o["status"] != "degraded" || l < 0.00159 || l > 0.00161 || o["operations_per_second"] != 5.0 {
						t.Errorf("read = %v", o)
					}
				case "wal-sync":
					if l, ok := o["latency_seconds"]; o["status"] != "not-measured" || !ok || l != nil || o["not_measured"] != "track_wal_io_timing is off" {
						t.Errorf("wal-sync = %v; want not measured, latency null, the reason", o)
					}
				}
			}
		})
	}
}
