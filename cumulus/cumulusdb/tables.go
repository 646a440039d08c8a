// Package cumulusdb is what Cumulus v21's database holds the granule
// writer to: its tables (CreateTables, for databases Cumulus did not
// make), and the API granule schema a record must meet before it is
// written (Validate).
package cumulusdb

import (
	"context"
	_ "embed"

	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed tables.sql
var tablesSQL string

// CreateTables creates, where they are missing, the tables of Cumulus v21
// that the writer uses (collections, providers, async_operations,
// executions, pdrs, granules, files, granules_executions), as Cumulus's
// migrations define them, in the connection's current schema.
func CreateTables(ctx context.Context, pool *pgxpool.Pool) error {
	_, err := pool.Exec(ctx, tablesSQL)
	return err
}

// Tables are the tables the writer writes to or reads.
var Tables = []string{"collections", "providers", "async_operations", "executions", "pdrs", "granules", "files", "granules_executions"}

// MissingTables returns the Tables the connection's schema lacks: a
// database without them is a setup to finish (granule-schema, or the
// database Cumulus made), not messages that fail one by one.
func MissingTables(ctx context.Context, pool *pgxpool.Pool) ([]string, error) {
	var missing []string
	for _, t := range Tables {
		var ok bool
		if err := pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, t).Scan(&ok); err != nil {
			return nil, err
		}
		if !ok {
			missing = append(missing, t)
		}
	}
	return missing, nil
}
