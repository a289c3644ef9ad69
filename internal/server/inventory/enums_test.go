package inventory

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/plumbline/plumbline/api"
	"github.com/plumbline/plumbline/internal/vocab"
)

// api/openapi.yaml lists, for every enumerated filter, exactly the values
// the server accepts (filterEnums, derived from vocab, align and baseline),
// and the response schemas the verdicts and severities vocab defines.
func TestOpenAPIEnums(t *testing.T) {
	t.Parallel()
	doc, err := openapi3.NewLoader().LoadFromData(api.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	strs := func(enum []any) []string {
		out := make([]string, len(enum))
		for i, v := range enum {
			out[i] = fmt.Sprint(v)
		}
		return out
	}
	enums := filterEnums()
	if len(enums) == 0 {
		t.Fatal("no enumerated filters")
	}
	for name, want := range enums {
		p := doc.Components.Parameters[name]
		if p == nil || p.Value == nil || p.Value.Schema == nil || p.Value.Schema.Value == nil {
			t.Errorf("openapi.yaml: no parameter %s", name)
			continue
		}
		if got := strs(p.Value.Schema.Value.Enum); !slices.Equal(got, want) {
			t.Errorf("openapi.yaml parameter %s: enum %v, the server accepts %v", name, got, want)
		}
	}
	if got := FilterValues("raid_level"); !slices.Equal(got, vocab.RAIDLevels()) {
		t.Errorf("FilterValues(raid_level) = %v, want %v", got, vocab.RAIDLevels())
	}
	if got := FilterValues("host"); got != nil {
		t.Errorf("FilterValues(host) = %v: want nil for a free-text filter", got)
	}
	schemaEnum := func(schema, prop string) []string {
		s := doc.Components.Schemas[schema]
		if s == nil || s.Value == nil || s.Value.Properties[prop] == nil {
			t.Fatalf("openapi.yaml: no %s.%s", schema, prop)
		}
		return strs(s.Value.Properties[prop].Value.Enum)
	}
	if got, want := schemaEnum("Volume", "severity"), append(vocab.Severities(), "none"); !slices.Equal(got, want) {
		t.Errorf("openapi.yaml Volume.severity: enum %v, want %v", got, want)
	}
	if got, want := schemaEnum("Alignment", "verdict"), vocab.Verdicts(); !slices.Equal(got, want) {
		t.Errorf("openapi.yaml Alignment.verdict: enum %v, want %v", got, want)
	}
	if got, want := schemaEnum("ProbeSummary", "kind"), vocab.ProbeKindNames(); !slices.Equal(got, want) {
		t.Errorf("openapi.yaml ProbeSummary.kind: enum %v, want %v", got, want)
	}
	desc := doc.Components.Schemas["ProbeSummary"].Value.Properties["stopped_reason"].Value.Description
	for _, r := range vocab.StopReasons() {
		if !strings.Contains(desc, r) {
			t.Errorf("openapi.yaml ProbeSummary.stopped_reason does not name stop reason %q: %s", r, desc)
		}
	}
}
