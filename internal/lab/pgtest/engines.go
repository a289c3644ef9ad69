package pgtest

import (
	"os"
	"path/filepath"
	"testing"
)

// Engine is one store engine that store-backed tests run against.
type Engine struct {
	Name string
	// DSN returns a fresh, empty database for the test.
	DSN func(testing.TB) string
}

// Engines is the table every store-backed test runs over: the same suite
// against a real SQLite file in the test's temp dir and a real PostgreSQL.
func Engines() []Engine {
	return []Engine{
		{"sqlite", func(tb testing.TB) string { return "sqlite://" + filepath.Join(tb.TempDir(), "plumbline.db") }},
		{"postgres", DSN},
	}
}

// ForEachEngine runs fn as a subtest per engine, with that engine's DSN.
func ForEachEngine(t *testing.T, fn func(t *testing.T, dsn string)) {
	for _, e := range Engines() {
		t.Run(e.Name, func(t *testing.T) { fn(t, e.DSN(t)) })
	}
}

// Main runs a package's tests, then stops the PostgreSQL cluster they
// started, if any: func TestMain(m *testing.M) { pgtest.Main(m) }.
func Main(m *testing.M) {
	code := m.Run()
	Stop()
	os.Exit(code)
}
