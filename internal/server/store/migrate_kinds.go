package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/pressly/goose/v3"
)

// Migration 35 (a Go migration: the change is engine-specific) makes
// records.kind no longer a CHECK list, as 00018 did for probe_results.kind:
// ingest validates the kind (store.RecordKind), so a new record kind — a
// database interval, a member I/O interval — needs no migration.
//
// PostgreSQL drops the column's named constraint and adds the new one.
// SQLite cannot drop a CHECK, and rebuilding records would mean
// rebuilding every table that refers to it; removing a CHECK changes
// nothing on disk, so the table's text in sqlite_schema is rewritten the
// way SQLite's documentation gives for exactly this change (ALTER TABLE,
// "Making Other Kinds Of Table Schema Changes"), in the migration's
// transaction.
const kindsVersion = 35

const (
	kindCheckOld = `CHECK (kind IN ('geometry', 'probe', 'rejected'))`
	kindCheckNew = `CHECK (kind <> '')`
)

// kindsMigration is migration 35 for the store's engine.
func (s *Store) kindsMigration() *goose.Migration {
	up := func(ctx context.Context, tx *sql.Tx) error {
		return s.swapKindCheck(ctx, tx, kindCheckOld, kindCheckNew)
	}
	down := func(ctx context.Context, tx *sql.Tx) error {
		return s.swapKindCheck(ctx, tx, kindCheckNew, kindCheckOld)
	}
	return goose.NewGoMigration(kindsVersion, &goose.GoFunc{RunTx: up}, &goose.GoFunc{RunTx: down})
}

func (s *Store) swapKindCheck(ctx context.Context, tx *sql.Tx, from, to string) error {
	if s.engine == Postgres {
		if to == kindCheckOld {
			// Rows of newer kinds stay; the old list is not enforced on them.
			to += " NOT VALID"
		}
		_, err := tx.ExecContext(ctx, `ALTER TABLE records DROP CONSTRAINT IF EXISTS records_kind_check;
ALTER TABLE records ADD CONSTRAINT records_kind_check `+to)
		if err != nil {
			return fmt.Errorf("records.kind check: %w", err)
		}
		return nil
	}
	var text string
	if err := tx.QueryRowContext(ctx, `SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = 'records'`).Scan(&text); err != nil {
		return fmt.Errorf("records.kind check: %w", err)
	}
	if strings.Count(text, from) != 1 {
		return fmt.Errorf("records.kind check: the table's text does not hold %q once", from)
	}
	var version int64
	if err := tx.QueryRowContext(ctx, `PRAGMA schema_version`).Scan(&version); err != nil {
		return fmt.Errorf("records.kind check: %w", err)
	}
	for _, q := range []string{
		`PRAGMA writable_schema = ON`,
		`UPDATE sqlite_schema SET sql = '` + strings.ReplaceAll(strings.Replace(text, from, to, 1), `'`, `''`) + `' WHERE type = 'table' AND name = 'records'`,
		fmt.Sprintf(`PRAGMA schema_version = %d`, version+1),
		`PRAGMA writable_schema = OFF`,
	} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("records.kind check: %w", err)
		}
	}
	return nil
}
