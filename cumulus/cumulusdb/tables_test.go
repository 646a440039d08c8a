package cumulusdb

import (
	"context"
	"strings"
	"testing"

	"github.com/backfill-dev/backfill/internal/cumulustest"
	"github.com/backfill-dev/backfill/internal/pgtest"
)

// catalog describes the writer's tables as the database sees them:
// columns in order with types, nullability and defaults, constraints and
// indexes with their definitions.
func catalog(t *testing.T, url string) string {
	t.Helper()
	pool := cumulustest.Pool(t, url)
	tables := []string{"async_operations", "collections", "providers", "executions", "pdrs", "granules", "files", "granules_executions"}
	var out strings.Builder
	for _, q := range []string{
		`SELECT concat_ws(' | ', table_name, ordinal_position, column_name, data_type, is_nullable, column_default)
			FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = ANY($1) ORDER BY table_name, ordinal_position`,
		`SELECT concat_ws(' | ', conrelid::regclass::text, conname, pg_get_constraintdef(oid))
			FROM pg_constraint WHERE connamespace = current_schema()::regnamespace AND conrelid::regclass::text = ANY($1) ORDER BY 1`,
		`SELECT concat_ws(' | ', tablename, indexname, indexdef) FROM pg_indexes
			WHERE schemaname = current_schema() AND tablename = ANY($1) ORDER BY 1`,
	} {
		for _, s := range cumulustest.Lines(t, pool, q, tables) {
			out.WriteString(s + "\n")
		}
	}
	return out.String()
}

// CreateTables makes the tables Cumulus's own migrations make: the same
// columns, types, defaults, checks, keys and indexes.
func TestCreateTables_SameAsCumulusMigrations(t *testing.T) {
	t.Parallel()
	cumulustest.NeedReference(t)
	theirs, ours := catalog(t, cumulustest.MigratedDB(t)), catalog(t, ownDB(t))
	if strings.Count(theirs, "\n") < 150 {
		t.Fatalf("the migrated catalog has only %d lines:\n%s", strings.Count(theirs, "\n"), theirs)
	}
	for _, d := range cumulustest.Differences("CreateTables", ours, theirs) {
		t.Error(d)
	}
	// Idempotent: a second run changes nothing.
	url := ownDB(t)
	if err := CreateTables(context.Background(), cumulustest.Pool(t, url)); err != nil {
		t.Fatalf("second CreateTables: %v", err)
	}
	if again := catalog(t, url); again != ours {
		t.Errorf("a second CreateTables changed the catalog")
	}
}

// ownDB is a new database with the tables of CreateTables and the rows
// Cumulus's tests seed.
func ownDB(t *testing.T) string {
	t.Helper()
	url := pgtest.NewDatabase(t)
	if err := CreateTables(context.Background(), cumulustest.Pool(t, url)); err != nil {
		t.Fatal(err)
	}
	cumulustest.Seed(t, url)
	return url
}
