package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/pressly/goose/v3"
)

// Migration 30 is a Go migration, the one place where the two engines need
// different SQL: records.kind's CHECK list (geometry, probe, rejected; from
// 00001) becomes CHECK (kind <> ”), so that a new kind of record
// (member-io, and after it others) is decided by ingest and the store's
// RecordKind, with no migration. PostgreSQL drops and adds the constraint;
// SQLite cannot drop a CHECK, and records is the parent of probe_results
// and volumes (a rebuild would copy every payload and every volume), so
// its stored table definition is edited in place: SQLite's documented way
// of removing a CHECK ("Making Other Kinds Of Table Schema Changes",
// https://www.sqlite.org/lang_altertable.html#otheralter), which rewrites
// no row. Down removes the records of other kinds and puts the list back.
const recordsKindVersion = 30

const (
	recordsKindOld = `CHECK (kind IN ('geometry', 'probe', 'rejected'))`
	recordsKindNew = `CHECK (kind <> '')`
)

// goMigrations are the migrations written in Go, for the engine.
func goMigrations(engine Engine) []*goose.Migration {
	up := func(ctx context.Context, tx *sql.Tx) error {
		return setRecordsKindCheck(ctx, tx, engine, recordsKindOld, recordsKindNew)
	}
	down := func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM records WHERE kind NOT IN ('geometry', 'probe', 'rejected')`); err != nil {
			return fmt.Errorf("records of other kinds: %w", err)
		}
		return setRecordsKindCheck(ctx, tx, engine, recordsKindNew, recordsKindOld)
	}
	return []*goose.Migration{goose.NewGoMigration(recordsKindVersion, &goose.GoFunc{RunTx: up}, &goose.GoFunc{RunTx: down})}
}

// setRecordsKindCheck replaces records.kind's CHECK from (the text of the
// constraint) to.
func setRecordsKindCheck(ctx context.Context, tx *sql.Tx, engine Engine, from, to string) error {
	if engine == Postgres {
		// The column constraint's name is PostgreSQL's own (records_kind_check).
		for _, q := range []string{
			`ALTER TABLE records DROP CONSTRAINT IF EXISTS records_kind_check`,
			`ALTER TABLE records ADD CONSTRAINT records_kind_check ` + to,
		} {
			if _, err := tx.ExecContext(ctx, q); err != nil {
				return fmt.Errorf("records kind check: %w", err)
			}
		}
		return nil
	}
	var def string
	if err := tx.QueryRowContext(ctx, `SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = 'records'`).Scan(&def); err != nil {
		return fmt.Errorf("records kind check: table definition: %w", err)
	}
	if strings.Count(def, from) != 1 {
		return fmt.Errorf("records kind check: the table definition does not hold %s once: %q", from, def)
	}
	var version int64
	if err := tx.QueryRowContext(ctx, `PRAGMA schema_version`).Scan(&version); err != nil {
		return fmt.Errorf("records kind check: schema version: %w", err)
	}
	for _, q := range []string{
		`PRAGMA writable_schema = ON`,
		`UPDATE sqlite_schema SET sql = '` + strings.ReplaceAll(strings.Replace(def, from, to, 1), `'`, `''`) + `' WHERE type = 'table' AND name = 'records'`,
		fmt.Sprintf(`PRAGMA schema_version = %d`, version+1),
		`PRAGMA writable_schema = OFF`,
	} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("records kind check: %w", err)
		}
	}
	var ok string
	if err := tx.QueryRowContext(ctx, `PRAGMA quick_check`).Scan(&ok); err != nil || ok != "ok" {
		return fmt.Errorf("records kind check: quick_check after the change: %q, %v", ok, err)
	}
	return nil
}
