package inventory

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/plumbline/plumbline/internal/server/store"
)

// /api/v1/hosts shows the validity of the client certificate each agent
// presented at its last Hello (null without one), and its CSV the expiry,
// so a script can list the certificates expiring soon.
func TestHostsCertificateValidity(t *testing.T) {
	t.Parallel()
	st, err := store.Open(context.Background(), "sqlite://"+t.TempDir()+"/p.db")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	seed(t, st, "db1", volume("/data"))
	seed(t, st, "db2", volume("/data"))
	notBefore := time.Date(2026, 11, 1, 8, 0, 0, 0, time.UTC)
	notAfter := notBefore.Add(30 * 24 * time.Hour)
	if err := st.UpsertAgent(t.Context(), store.Agent{ID: "db1", Hostname: "db1.example", OS: "linux", CertNotBefore: notBefore, CertNotAfter: notAfter}); err != nil {
		t.Fatal(err)
	}
	srv := serveSyncing(t, st, Options{})
	defer srv.Close()

	code, body := get(t, srv.URL+"/api/v1/hosts")
	hosts, _ := body["hosts"].([]any)
	if code != http.StatusOK || len(hosts) != 2 {
		t.Fatalf("GET /api/v1/hosts: %d %v", code, body)
	}
	db1, db2 := hosts[0].(map[string]any), hosts[1].(map[string]any)
	if db1["client_certificate_not_before"] != "2026-11-01T08:00:00Z" || db1["client_certificate_not_after"] != "2026-12-01T08:00:00Z" {
		t.Errorf("db1 certificate validity = %v – %v, want 2026-11-01T08:00:00Z – 2026-12-01T08:00:00Z",
			db1["client_certificate_not_before"], db1["client_certificate_not_after"])
	}
	for _, k := range []string{"client_certificate_not_before", "client_certificate_not_after"} {
		if v, ok := db2[k]; !ok || v != nil {
			t.Errorf("db2 (no certificate) %s = %v (present %v), want null", k, v, ok)
		}
	}

	resp, err := http.Get(srv.URL + "/api/v1/hosts?format=csv")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	csv, _ := io.ReadAll(resp.Body)
	lines := strings.Split(strings.TrimSpace(string(csv)), "\n")
	col := slices.Index(strings.Split(lines[0], ","), "client_certificate_not_after")
	cell := func(line int) string {
		if f := strings.Split(lines[line], ","); col >= 0 && col < len(f) {
			return f[col]
		}
		return "?"
	}
	if len(lines) != 3 || col < 0 || cell(1) != "2026-12-01T08:00:00Z" || cell(2) != "" {
		t.Errorf("hosts CSV: want a client_certificate_not_after column (db1's expiry, db2 empty):\n%s", csv)
	}
}
