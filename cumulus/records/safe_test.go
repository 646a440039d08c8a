package records

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/backfill-dev/backfill/internal/cumulustest"
)

// safeIn never calls a row safe that the server refuses: rows of drawn
// values (nulls, NUL bytes, values outside a check, numbers out of range,
// arrays and objects into jsonb, dates outside PostgreSQL's range) are
// written under a savepoint into the tables of CreateTables, and each
// that fails must have been called unsafe.
func TestSafeIn_NeverWrong(t *testing.T) {
	t.Parallel()
	needReference(t)
	ctx := context.Background()
	pool := cumulustest.Pool(t, ownDB(t))
	var coll, granule int64
	if err := pool.QueryRow(ctx, "SELECT cumulus_id FROM collections LIMIT 1").Scan(&coll); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, "INSERT INTO granules (granule_id, producer_granule_id, status, collection_cumulus_id) VALUES ('g', 'g', 'completed', $1) RETURNING cumulus_id", coll).Scan(&granule); err != nil {
		t.Fatal(err)
	}
	values := []any{nil, "", "x", "a\x00b", "running", "completed", "failed", "queued", "unknown", "true",
		1.0, -3.0, 1.5, 1e21, 3.5e38, 2147483648.0, 9.3e18, "12", "1e3", " 7", true, false,
		[]any{}, []any{"a"}, map[string]any{}, map[string]any{"a": "b\x00"}, map[string]any{"b": []any{1.0}}}
	dates := []any{nil, "2020-01-01T00:00:00.000Z", "-000001-01-01T00:00:00.000Z", "+275760-09-13T00:00:00.000Z"}
	tables := map[string][][2]string{
		"executions": {{"arn", "text"}, {"url", "text"}, {"status", "text"}, {"cumulus_version", "text"}, {"tasks", "jsonb"},
			{"workflow_name", "text"}, {"created_at", "timestamptz"}, {"updated_at", "timestamptz"}, {"error", "jsonb"},
			{"final_payload", "jsonb"}, {"duration", "real"}},
		"granules": {{"granule_id", "text"}, {"status", "text"}, {"producer_granule_id", "text"}, {"published", "boolean"},
			{"duration", "real"}, {"product_volume", "bigint"}, {"error", "jsonb"}, {"cmr_link", "text"},
			{"query_fields", "jsonb"}, {"beginning_date_time", "timestamptz"}, {"created_at", "timestamptz"}},
		"files": {{"bucket", "text"}, {"key", "text"}, {"checksum_value", "text"}, {"file_name", "text"},
			{"file_size", "bigint"}, {"source", "text"}},
	}
	conflict := map[string]string{"executions": "(arn)", "granules": "(granule_id, collection_cumulus_id)", "files": "(bucket, key)"}
	r := rand.New(rand.NewPCG(7, 7))
	var safe, refused int
	for table, cols := range tables {
		for range 1500 {
			var rw row
			for _, c := range cols {
				if r.IntN(4) == 0 {
					continue // absent
				}
				v := values[r.IntN(len(values))]
				switch c[1] {
				case "timestamptz":
					v = dates[r.IntN(len(dates))]
				case "jsonb":
					v = asDriverSends(v)
				}
				rw.add(c[0], c[1], v)
			}
			switch table {
			case "granules":
				rw.add("collection_cumulus_id", "integer", coll)
			case "files":
				rw.add("granule_cumulus_id", "bigint", granule)
			}
			sql, args := rw.insertSQL(table)
			tx, err := pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			_, err = tx.Exec(ctx, sql+" ON CONFLICT "+conflict[table]+" DO NOTHING", args...)
			tx.Rollback(ctx)
			if rw.safeIn(table) {
				safe++
				if err != nil {
					t.Errorf("%s: called safe, refused: %v\n%s %v", table, err, sql, values)
				}
			} else if err != nil {
				refused++
			}
		}
	}
	t.Logf("%d rows called safe and written, %d refused", safe, refused)
	if safe < 100 || refused < 1000 {
		t.Errorf("the drawn rows do not test both sides: %d safe, %d refused", safe, refused)
	}
}
