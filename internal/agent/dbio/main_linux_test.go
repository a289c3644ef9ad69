//go:build linux

package dbio

import (
	"os"
	"testing"

	"github.com/plumbline/plumbline/internal/lab/mariadbtest"
	"github.com/plumbline/plumbline/internal/lab/pgtest"
)

// TestMain stops the PostgreSQL and MariaDB servers the tests started.
func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Stop()
	mariadbtest.Stop()
	os.Exit(code)
}
