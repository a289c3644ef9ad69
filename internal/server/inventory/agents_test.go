package inventory

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/plumbline/plumbline/internal/server/ingest"
	"github.com/plumbline/plumbline/internal/server/store"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// seedAs registers agent id on host name hostname with vols.
func seedAs(t *testing.T, st *store.Store, id, hostname string, vols ...*plumblinev1.Volume) {
	t.Helper()
	ctx := context.Background()
	if err := st.UpsertAgent(ctx, store.Agent{ID: id, Hostname: hostname, OS: "linux", Kernel: "6.1", AgentVersion: "0.1.0"}); err != nil {
		t.Fatal(err)
	}
	req := &plumblinev1.ReportRequest{AgentId: id, Records: []*plumblinev1.Record{{
		Sequence: 1, ProducedAt: timestamppb.Now(),
		Payload: &plumblinev1.Record_Geometry{Geometry: &plumblinev1.GeometrySnapshot{Trigger: "start",
			Inventory: &plumblinev1.Inventory{Host: &plumblinev1.Host{Hostname: hostname, Os: "linux"}, Volumes: vols}}},
	}}}
	b, err := ingest.ValidateReport(req, ingest.Limits{}, time.Now())
	if err != nil || len(b.Rejections) > 0 {
		t.Fatalf("ValidateReport: %v %v", err, b.Rejections)
	}
	if _, err := st.AppendBatch(ctx, id, b.Records); err != nil {
		t.Fatal(err)
	}
}

// TestAgentsOfOneHostname: three agents report host name vm, each with
// /: three volume rows, one per agent, in JSON and CSV; agent_id filters
// the volumes and the summary to one agent's.
func TestAgentsOfOneHostname(t *testing.T) {
	t.Parallel()
	for _, e := range engines {
		t.Run(e.Name, func(t *testing.T) {
			t.Parallel()
			st, err := store.Open(context.Background(), e.DSN(t))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			ids := []string{"vmA", "vmB", "vmC"}
			for _, id := range ids {
				seedAs(t, st, id, "vm", volume("/"))
			}
			srv := serveSyncing(t, st, Options{})
			defer srv.Close()

			code, body := get(t, srv.URL+"/api/v1/volumes")
			if code != http.StatusOK {
				t.Fatalf("GET /api/v1/volumes: %d %v", code, body)
			}
			if got := agentsOf(body); !slices.Equal(got, ids) {
				t.Errorf("/api/v1/volumes: agents %v, want %v (one row per agent)", got, ids)
			}
			code, body = get(t, srv.URL+"/api/v1/volumes?agent_id=vmB")
			if got := agentsOf(body); code != http.StatusOK || !slices.Equal(got, []string{"vmB"}) {
				t.Errorf("/api/v1/volumes?agent_id=vmB: %d, agents %v; want 200, [vmB]", code, got)
			}
			code, body = get(t, srv.URL+"/api/v1/summary?agent_id=vmC")
			num, _ := body["volumes"].(json.Number)
			if n, _ := num.Int64(); code != http.StatusOK || n != 1 {
				t.Errorf("/api/v1/summary?agent_id=vmC: %d, %v; want 200 and 1 volume", code, body["volumes"])
			}

			resp, err := http.Get(srv.URL + "/api/v1/volumes?format=csv")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			rows, err := csv.NewReader(resp.Body).ReadAll()
			if err != nil {
				t.Fatal(err)
			}
			col := slices.Index(rows[0], "agent_id")
			var got []string
			for _, r := range rows[1:] {
				got = append(got, r[col])
			}
			slices.Sort(got)
			if !slices.Equal(got, ids) {
				t.Errorf("CSV agent_id column %v, want %v", got, ids)
			}
		})
	}
}

// agentsOf are the agent ids of a volume list's rows, sorted.
func agentsOf(body map[string]any) []string {
	var out []string
	vols, _ := body["volumes"].([]any)
	for _, v := range vols {
		if m, ok := v.(map[string]any); ok && m["host"] == "vm" && m["mount_point"] == "/" {
			id, _ := m["agent_id"].(string)
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}
