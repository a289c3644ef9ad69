package inventory

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/plumbline/plumbline/api"
	"github.com/plumbline/plumbline/internal/server/store"
)

// TestOpenAPIFilters: /volumes and /summary list exactly the filters of
// volumeFilters, in its order, each with the schema type of its kind.
func TestOpenAPIFilters(t *testing.T) {
	t.Parallel()
	doc, err := openapi3.NewLoader().LoadFromData(api.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	types := map[paramKind]string{textParam: "string", enumParam: "", bytesParam: "integer", fractionParam: "number", boolParam: "boolean"}
	for _, path := range []string{"/api/v1/volumes", "/api/v1/summary"} {
		var got []string
		for _, ref := range doc.Paths.Find(path).Get.Parameters {
			name := ref.Value.Name
			if slices.Contains([]string{"sort", "limit", "next_page_token", "format", "top"}, name) {
				continue
			}
			got = append(got, name)
		}
		if want := filterParams(); !slices.Equal(got, want) {
			t.Errorf("openapi.yaml %s: filter parameters %v, the server's %v", path, got, want)
		}
	}
	for _, f := range volumeFilters {
		p := doc.Components.Parameters[f.param]
		if p == nil {
			t.Errorf("openapi.yaml: no parameter %s", f.param)
			continue
		}
		typ := p.Value.Schema.Value.Type.Slice()
		if want := types[f.kind]; want != "" && !slices.Equal(typ, []string{want}) {
			t.Errorf("openapi.yaml parameter %s: type %v, want %s", f.param, typ, want)
		}
	}
	for _, h := range Filters() {
		if h.Usage == "" {
			t.Errorf("filter %s: no help", h.Param)
		}
	}
}

// TestNewFilterIsOneEntry: a filter on a column the store keeps is one
// entry of the table. Here an agent_id filter, added to a copy of
// volumeFilters alone: the parameter is accepted and validated, and the
// store's SQL and the summary index select the same volumes with it.
func TestNewFilterIsOneEntry(t *testing.T) {
	t.Parallel()
	table := append(volumeFilters[:], filter{param: "agent_id", help: "agent id", col: "agent_id", op: store.OpEq})
	parse := func(query string) (store.VolumeFilter, error) {
		p, err := newParams(httptest.NewRequest(http.MethodGet, "/api/v1/volumes?"+query, nil), paramsOf(table))
		if err != nil {
			return nil, err
		}
		return p.filterOf(table)
	}
	if _, err := parse("agent_id="); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("agent_id= accepted: %v", err)
	}
	for _, e := range engines {
		t.Run(e.Name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			st := openStore(t, e.DSN(t))
			seedFleet(t, st, 6, 3)
			api := New(st, Options{})
			if err := api.Sync(ctx, true); err != nil {
				t.Fatal(err)
			}
			f, err := parse("agent_id=agent03&verdict=misaligned")
			if err != nil {
				t.Fatal(err)
			}
			// What it must select: agent03's misaligned volumes.
			var want []string
			if err := st.QueryVolumes(ctx, store.VolumeQuery{}, func(v *store.InventoryVolume) error {
				if v.AgentID == "agent03" && v.Verdict == "misaligned" {
					want = append(want, v.ID)
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if len(want) == 0 {
				t.Fatal("the fleet has no misaligned volume of agent03")
			}
			var got []string
			if err := st.QueryVolumes(ctx, store.VolumeQuery{VolumeFilter: f, Sort: "id"}, func(v *store.InventoryVolume) error {
				got = append(got, v.ID)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("SQL with agent_id: %v, want %v", got, want)
			}
			ix := api.sumIdx.Load()
			if !ix.answers(f) {
				t.Fatal("the summary index does not answer the new filter")
			}
			if sum, _ := ix.summarize(f, 0); sum.Volumes != int64(len(want)) || sum.Hosts != 1 {
				t.Errorf("index summary with agent_id: %d volumes on %d hosts, want %d on 1", sum.Volumes, sum.Hosts, len(want))
			}
		})
	}
}

// TestFilterColumnsInIndex: every column the store lets a filter test is
// one the summary index keeps, with the same type.
func TestFilterColumnsInIndex(t *testing.T) {
	t.Parallel()
	for col, typ := range store.FilterColumns() {
		var ok bool
		switch typ {
		case store.Text:
			ok = ixText[col] != nil
		case store.Integer:
			ok = ixInt[col] != nil
		case store.Real:
			ok = ixReal[col] != nil
		}
		if !ok {
			t.Errorf("store filter column %s (type %d): not in the summary index", col, typ)
		}
	}
	for _, f := range volumeFilters {
		if f.cond != nil || f.op == store.OpDegraded {
			continue
		}
		cols := store.FilterColumns()
		if f.op == store.OpFinding {
			cols = store.FindingColumns()
		}
		if _, ok := cols[f.col]; !ok {
			t.Errorf("filter %s: column %q is not one the store filters on", f.param, f.col)
		}
	}
}
