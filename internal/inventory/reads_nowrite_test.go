package inventory

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/plumbline/plumbline/internal/pgtest"
	"github.com/plumbline/plumbline/internal/projection"
)

// TestReadsDoNotWrite: on PostgreSQL, an API whose store — and whose
// projection's store — connects as a role that may only SELECT answers
// every kind of read, before and after a geometry report stored by
// another connection: no read opens a write transaction (a write as that
// role fails the request), none syncs the projection (it has never
// synced: a sync as that role fails), none builds an index (the API's
// loop, run read-only as well, builds it).
func TestReadsDoNotWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	w := openStore(t, dsn) // the writer: migrations, ingest, the projection's syncs
	seedFleet(t, w, 3, 2)
	if err := projection.New(w, projection.Options{}).Sync(ctx, true); err != nil {
		t.Fatal(err)
	}
	r := openStore(t, selectOnlyRole(t, dsn))
	srv, api := serveRunning(t, r, Options{Projection: projection.New(r, projection.Options{}), SyncPeriod: 5 * time.Millisecond})
	waitFor(t, "the first summary index", func() bool { return api.sumIdx.Load() != nil })

	report(t, w, "agent-late", "late.example", 1, fleetVolume(1, "/data0"))
	vols := list(t, srv.URL, "", 100)
	id, _ := vols[0]["id"].(string)
	for _, path := range []string{
		"/api/v1/volumes", "/api/v1/volumes?verdict=misaligned&sort=-split_fraction&limit=2", "/api/v1/volumes?format=csv",
		"/api/v1/volumes/" + url.PathEscape(id), "/api/v1/hosts", "/api/v1/hosts?format=csv", "/api/v1/hosts/db00.example",
		"/api/v1/summary", "/api/v1/summary?raid_level=raid10&top=3", "/api/v1/summary?host=late*", "/readyz",
	} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s as a SELECT-only role = %d %.300s", path, resp.StatusCode, body)
		}
	}
}

// selectOnlyRole creates a role that may log in and SELECT from every
// table of dsn's database, and nothing else, and returns dsn as that role.
func selectOnlyRole(t *testing.T, dsn string) string {
	t.Helper()
	ctx := context.Background()
	admin, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 4)
	rand.Read(b)
	role := "plumbline_reader_" + hex.EncodeToString(b)
	for _, q := range []string{"CREATE ROLE " + role + " LOGIN", "GRANT USAGE ON SCHEMA public TO " + role,
		"GRANT SELECT ON ALL TABLES IN SCHEMA public TO " + role} {
		if _, err := admin.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() {
		defer admin.Close()
		for _, q := range []string{"DROP OWNED BY " + role, "DROP ROLE " + role} {
			if _, err := admin.ExecContext(context.Background(), q); err != nil {
				t.Logf("%s: %v", q, err)
			}
		}
	})
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(role)
	return u.String()
}
