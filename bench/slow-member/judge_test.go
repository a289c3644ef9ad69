//go:build linux

package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

type fixedNamer map[string]string

func (f fixedNamer) named(context.Context) (map[string]string, error) { return f, nil }

// TestAPINamer: the bench reads the members named from the volume rows'
// slow_members, and falls back to the store only when the rows have no
// such field (a server without the judge's API), not when it is empty.
func TestAPINamer(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, body string
		want       []string
	}{
		{"named", `{"volumes":[{"mount_point":"/a","slow_members":[{"array":"loop9","member":"loop7","ratio":3.1,"serial":"S"}]},{"mount_point":"/b","slow_members":[]}]}`, []string{"loop7"}},
		{"none named", `{"volumes":[{"mount_point":"/a","slow_members":[]}]}`, nil},
		{"no field", `{"volumes":[{"mount_point":"/a"}]}`, []string{"from-store"}},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/api/v1/volumes" {
				http.NotFound(w, r)
				return
			}
			io.WriteString(w, c.body)
		}))
		f := &fallbackNamer{api: newAPINamer(strings.TrimPrefix(srv.URL, "http://")), log: io.Discard}
		got, err := namedVia(f, fixedNamer{"from-store": "x"})
		srv.Close()
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if len(got) != len(c.want) {
			t.Errorf("%s: named %v, want %v", c.name, got, c.want)
		}
		for _, d := range c.want {
			if _, ok := got[d]; !ok {
				t.Errorf("%s: named %v, want %s among them", c.name, got, d)
			}
		}
	}
}

// namedVia asks f with store standing in for the server's store.
func namedVia(f *fallbackNamer, store namer) (map[string]string, error) {
	f.fallback = store
	return f.named(context.Background())
}
