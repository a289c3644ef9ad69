package client_test

import (
	"bytes"
	"context"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plumbline/plumbline/internal/server/inventory"
	"github.com/plumbline/plumbline/internal/server/inventory/client"
	"github.com/plumbline/plumbline/internal/server/store"
)

// TestClient calls a real inventory API over a real SQLite store: the
// token is sent, answers decode or stream, and a bad parameter's error
// carries the values the API allows.
func TestClient(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := store.Open(ctx, "sqlite://"+filepath.Join(t.TempDir(), "p.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	api := inventory.New(st, inventory.Options{Tokens: []inventory.Token{{Name: "t", Secret: "s3cret"}}})
	// The API's own loop builds its summary index, as the server runs it;
	// reads wait for the first one.
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); api.Run(runCtx) }()
	defer func() { stop(); <-done }()
	srv := httptest.NewServer(api)
	defer srv.Close()

	c, err := client.New(srv.URL+"/", client.Options{Token: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	var page struct {
		Volumes []any `json:"volumes"`
	}
	if err := c.Get(ctx, "/api/v1/volumes", url.Values{}, &page); err != nil {
		t.Fatalf("Get volumes: %v", err)
	}
	var csv bytes.Buffer
	if err := c.Stream(ctx, "/api/v1/volumes", url.Values{"format": {"csv"}}, &csv); err != nil || csv.Len() == 0 {
		t.Errorf("Stream CSV = %v, %d bytes; want the header at least", err, csv.Len())
	}
	err = c.Get(ctx, "/api/v1/volumes", url.Values{"verdict": {"wobbly"}}, &page)
	if err == nil || !strings.Contains(err.Error(), "400") || !strings.Contains(err.Error(), "allowed: ") || !strings.Contains(err.Error(), "misaligned") {
		t.Errorf("bad verdict: %v, want a 400 naming the allowed values", err)
	}

	anon, _ := client.New(srv.URL, client.Options{})
	if err := anon.Get(ctx, "/api/v1/volumes", url.Values{}, &page); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("without the token: %v, want 401", err)
	}
	if _, err := client.New(srv.URL, client.Options{CAFile: filepath.Join(t.TempDir(), "none.pem")}); err == nil {
		t.Error("New with a missing CA file: no error")
	}
}
