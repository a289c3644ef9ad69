package main

import (
	"os"
	"strings"
	"testing"
)

// The committed document carries every enumeration as the words' homes
// list it today: run `make openapi` after adding a probe kind, verdict,
// rule, RAID level, media class or I/O size.
func TestDocumentIsCurrent(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	out, err := rewrite(doc, enums())
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != string(doc) {
		t.Fatal("api/openapi.yaml: enumerations are stale; run make openapi")
	}
}

const sample = `components:
  parameters:
    verdict:
      name: verdict
      schema: {type: string, enum: [aligned, misaligned]}   # kept comment
    rule:
      schema:
        type: string
        enum: [a, b,
          c]
        description: after
  schemas:
    Block:
      properties:
        kind:
          enum:
            - x
`

func TestRewrite(t *testing.T) {
	t.Parallel()
	got, err := rewrite([]byte(sample), []enum{
		{[]string{"components", "parameters", "verdict", "schema"}, []string{"aligned", "misaligned", "unknown"}},
		{[]string{"components", "parameters", "rule", "schema"}, []string{strings.Repeat("r", 60), strings.Repeat("s", 60), "t"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `components:
  parameters:
    verdict:
      name: verdict
      schema: {type: string, enum: [aligned, misaligned, unknown]}   # kept comment
    rule:
      schema:
        type: string
        enum: [` + strings.Repeat("r", 60) + `,
          ` + strings.Repeat("s", 60) + `, t]
        description: after
  schemas:
    Block:
      properties:
        kind:
          enum:
            - x
`
	if string(got) != want {
		t.Fatalf("rewrite:\n%s\nwant:\n%s", got, want)
	}
}

func TestRewriteErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		path []string
		want string
	}{
		{[]string{"components", "parameters", "nosuch"}, "no components.parameters.nosuch"},
		{[]string{"components", "schemas", "Block", "properties", "kind"}, "want a flow list"},
		{[]string{"components", "parameters", "verdict", "name"}, "want a flow list"},
	} {
		_, err := rewrite([]byte(sample), []enum{{tc.path, []string{"v"}}})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err %v, want %q", tc.path, err, tc.want)
		}
	}
}

const membersSample = `paths:
  /things:
    get:
      parameters:
        - $ref: "#/x"
        - name: sort
          schema: {type: string, enum: [a, -a]}
components:
  schemas:
    Thing:
      properties:
        id: {type: string}
        size_8k: {type: number}
        size_64k: {type: number, nullable: true}
        rule: {type: string}
`

// A path ending in prefix* owns the run of members with that prefix;
// "name=x" picks a list item by its name.
func TestRewriteMembers(t *testing.T) {
	t.Parallel()
	got, err := rewrite([]byte(membersSample), []enum{
		{[]string{"components", "schemas", "Thing", "properties", "size_*"},
			[]string{"size_8k: {type: number}", "size_16k: {type: number, nullable: true}", "size_64k: {type: number, nullable: true}"}},
		{[]string{"paths", "/things", "get", "parameters", "name=sort", "schema"}, []string{"a", "-a", "b", "-b"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(strings.Replace(membersSample, "[a, -a]", "[a, -a, b, -b]", 1),
		"        size_64k:", "        size_16k: {type: number, nullable: true}\n        size_64k:", 1)
	if string(got) != want {
		t.Fatalf("rewrite:\n%s\nwant:\n%s", got, want)
	}
	for _, tc := range []struct {
		path []string
		want string
	}{
		{[]string{"components", "schemas", "Thing", "properties", "nosuch_*"}, "no nosuch_* member"},
		{[]string{"components", "schemas", "Nosuch", "properties", "size_*"}, "no components.schemas.Nosuch.properties"},
		{[]string{"paths", "/things", "get", "parameters", "name=limit", "schema"}, "no paths./things.get.parameters.name=limit.schema"},
	} {
		_, err := rewrite([]byte(membersSample), []enum{{tc.path, []string{"v"}}})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err %v, want %q", tc.path, err, tc.want)
		}
	}
	// The run must be consecutive: another member between two of it.
	split := strings.Replace(membersSample, "        size_64k:", "        other: {type: string}\n        size_64k:", 1)
	if _, err := rewrite([]byte(split), []enum{{[]string{"components", "schemas", "Thing", "properties", "size_*"}, nil}}); err == nil ||
		!strings.Contains(err.Error(), "consecutive") {
		t.Errorf("members not on consecutive lines: err %v, want one saying so", err)
	}
}
