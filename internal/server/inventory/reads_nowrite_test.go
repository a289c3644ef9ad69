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

	"github.com/plumbline/plumbline/internal/lab/pgtest"
	"github.com/plumbline/plumbline/internal/server/projection"
	"github.com/plumbline/plumbline/internal/server/store"
)

// TestReadsDoNotWrite: on PostgreSQL, an API whose store — and whose
// projection's store — connects as a role that may only SELECT answers
// every kind of read, with a geometry report stored (by another
// connection; ingest writes its judged record with it) and a host renamed
// since the last sync: no read opens a write transaction (a write as that
// role fails the request), none syncs (the rows keep the old hostname
// afterwards), none builds an index (the API's loop, run read-only as
// well, builds it).
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

	// A report (its judged record written with it) and a rename since: a
	// read that synced would rename the rows (and, as this role, fail).
	report(t, w, "agent-late", "late.example", 1, fleetVolume(1, "/data0"))
	if err := w.UpsertAgent(ctx, store.Agent{ID: "agent-late", Hostname: "renamed.example", OS: "linux"}); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{
		"/api/v1/volumes/" + store.VolumeID("agent-late", "/data0"), // with its history, recorded by ingest
		"/api/v1/volumes", "/api/v1/volumes?verdict=misaligned&sort=-split_fraction&limit=2", "/api/v1/volumes?format=csv",
		"/api/v1/hosts", "/api/v1/hosts?format=csv", "/api/v1/hosts/db00.example",
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
	var n int
	if err := w.QueryVolumes(ctx, store.VolumeQuery{VolumeFilter: filterOf(t, "host=late.example")}, func(*store.InventoryVolume) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("%d rows of late.example after the reads, want 1 (the report's, not renamed: no read synced)", n)
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
