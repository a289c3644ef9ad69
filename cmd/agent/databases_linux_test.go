//go:build linux

package main

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plumbline/plumbline/internal/lab/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestDatabasesCommand reads a real PostgreSQL twice and prints each
// location's volume and each operation; a source that cannot be reached
// makes it exit 1 and say why, the others still printed.
func TestDatabasesCommand(t *testing.T) {
	dsn := pgtest.DSN(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "agent.yaml")
	yaml := fmt.Sprintf("databases:\n  - {name: main, engine: postgresql, address: %q, database: %s, user: %s}\n  - {name: gone, engine: mariadb, address: \"127.0.0.1:1\", user: x}\n",
		u.Host, strings.TrimPrefix(u.Path, "/"), u.User.Username())
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errs bytes.Buffer
	code := run(context.Background(), []string{"databases", "--config", cfg, "--wait", "200ms"}, &out, &errs)
	if code != exitError || !strings.Contains(errs.String(), "database gone: connect") {
		t.Errorf("exit %d, stderr %q; want 1 and the unreachable source named", code, errs.String())
	}
	for _, want := range []string{"main: postgresql", "  data ", "  wal ", "    read ", "    wal-sync "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if code := run(context.Background(), []string{"databases", "--config", cfg, "--format", "yaml"}, &out, &errs); code != exitUsage {
		t.Errorf("--format yaml: exit %d, want %d", code, exitUsage)
	}
}
