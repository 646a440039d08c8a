// Package cumulustest makes databases for the tests of the Cumulus
// writer: with the schema of Cumulus v21's own migrations (run by Node from
// reference/cumulus-v21, which make test installs), and the collections and
// providers the tests' messages name.
package cumulustest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/backfill-dev/backfill/internal/pgtest"
)

// RefDir is the folder of Cumulus v21's own code.
func RefDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "reference", "cumulus-v21")
}

// NeedReference fails the test when Node or the reference is missing.
func NeedReference(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("node is needed for the Cumulus reference: %v", err)
	}
	if _, err := os.Stat(filepath.Join(RefDir(), "api", "lib", "writeRecords", "write-granules.js")); err != nil {
		t.Fatalf("the Cumulus v21 reference is not installed: run %s/setup (make test does): %v", RefDir(), err)
	}
}

// MigratedDB is a new database made by Cumulus's 28 migrations, seeded.
func MigratedDB(t testing.TB, collections ...string) string {
	t.Helper()
	NeedReference(t)
	url := pgtest.NewDatabase(t)
	cmd := exec.Command("node", "migrate.js", url)
	cmd.Dir = RefDir()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("migrations: %v\n%s", err, out)
	}
	Seed(t, url, collections...)
	return url
}

// Seed inserts the collections MOD09GQ___006 and OTHER___1 and any others
// given as name___version, and the providers s3_provider and
// http_provider.
func Seed(t testing.TB, url string, collections ...string) {
	t.Helper()
	pool := Pool(t, url)
	_, err := pool.Exec(context.Background(), `INSERT INTO providers (name, protocol, host) VALUES ('s3_provider', 's3', 'cumulus-test-data'), ('http_provider', 'http', 'example.com')`)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range append([]string{"MOD09GQ___006", "OTHER___1"}, collections...) {
		AddCollection(t, pool, c)
	}
}

// AddCollection inserts the collection name___version.
func AddCollection(t testing.TB, pool *pgxpool.Pool, id string) {
	t.Helper()
	name, version := id, ""
	for i := len(id) - 3; i >= 0; i-- {
		if id[i:i+3] == "___" {
			name, version = id[:i], id[i+3:]
			break
		}
	}
	_, err := pool.Exec(context.Background(), `INSERT INTO collections (name, version, sample_file_name, granule_id_validation_regex, granule_id_extraction_regex, files)
		VALUES ($1, $2, 'x', '.*', '.*', '[]')`, name, version)
	if err != nil {
		t.Fatal(err)
	}
}

// Pool connects to url for the rest of the test.
func Pool(t testing.TB, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// Lines runs a query of one text column and returns its rows.
func Lines(t testing.TB, pool *pgxpool.Pool, sql string, args ...any) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), sql, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
