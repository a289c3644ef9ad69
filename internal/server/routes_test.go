package server

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/plumbline/plumbline/api"
	"github.com/plumbline/plumbline/internal/server/inventory"
)

// TestOpenAPICoversRoutes: api/openapi.yaml describes every route the web
// listener serves, with its methods, and no route it does not serve (the
// policy endpoints were served and undocumented).
func TestOpenAPICoversRoutes(t *testing.T) {
	t.Parallel()
	var doc struct {
		Paths map[string]map[string]any `yaml:"paths"`
	}
	if err := yaml.Unmarshal(api.OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	noop := http.NotFoundHandler()
	web := webRoutes(nil, inventory.New(nil, inventory.Options{}), noop, noop)
	served := map[string]bool{}
	for _, r := range web.Routes() {
		path := strings.TrimSuffix(r.Pattern, "{$}")
		served[path] = true
		ops, ok := doc.Paths[path]
		if !ok {
			t.Errorf("route %s is not in api/openapi.yaml", r.Pattern)
			continue
		}
		var documented []string
		for m := range ops {
			if m != "parameters" {
				documented = append(documented, strings.ToUpper(m))
			}
		}
		slices.Sort(documented)
		want := slices.Sorted(slices.Values(r.Methods))
		if !slices.Equal(documented, want) {
			t.Errorf("route %s answers %v; api/openapi.yaml documents %v", r.Pattern, want, documented)
		}
	}
	for p := range doc.Paths {
		if !served[p] {
			t.Errorf("api/openapi.yaml documents %s, which the server does not serve", p)
		}
	}
	if len(served) < 10 {
		t.Errorf("%d routes: the route list is incomplete", len(served))
	}
}
