package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestDashboardsCurrent: the committed dashboards/*.json are what the
// generator writes (make dashboards regenerates them), and no other
// dashboard file sits beside them unmanaged.
func TestDashboardsCurrent(t *testing.T) {
	t.Parallel()
	for name, build := range dashboards {
		want, err := render(build())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, err := os.ReadFile(filepath.Join("..", name))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(string(want), string(got)); diff != "" {
			t.Errorf("dashboards/%s is stale: run make dashboards (-generated +committed):\n%s", name, diff)
		}
	}
	files, err := filepath.Glob(filepath.Join("..", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if dashboards[filepath.Base(f)] == nil {
			t.Errorf("%s is not generated: add it to dashboards/gen", f)
		}
	}
}
