// Package cumulustest makes databases for the tests of the Cumulus
// writer: with the schema of Cumulus v21's own migrations (run by Node from
// reference/cumulus-v21, which make test installs), and the collections and
// providers the tests' messages name.
package cumulustest

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
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

// MigratedDB is a new database made by Cumulus's 28 migrations, seeded:
// a copy of a template database that the migrations made once for the
// test process (DropTemplate drops it).
func MigratedDB(t testing.TB, collections ...string) string {
	t.Helper()
	NeedReference(t)
	admin := pgtest.AdminURL(t)
	dsn := pgtest.CreateDatabaseFrom(t, admin, template(t, admin))
	Seed(t, dsn, collections...)
	return dsn
}

// migrated is the template database of MigratedDB, made on first use.
var migrated struct {
	sync.Mutex
	name, admin string
}

func template(t testing.TB, admin string) string {
	t.Helper()
	migrated.Lock()
	defer migrated.Unlock()
	if migrated.name != "" {
		return migrated.name
	}
	name := fmt.Sprintf("backfill_cumulus_template_%d_%d", os.Getpid(), time.Now().UnixNano()%1e9)
	pgtest.Exec(t, admin, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	cmd := exec.Command("node", "migrate.js", u.String())
	cmd.Dir = RefDir()
	if out, err := cmd.CombinedOutput(); err != nil {
		pgtest.Exec(t, admin, "DROP DATABASE "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
		t.Fatalf("migrations: %v\n%s", err, out)
	}
	migrated.name, migrated.admin = name, admin
	return name
}

// Main is the TestMain of a package whose tests use MigratedDB: it runs
// the tests, then each of after (a helper process to stop), then drops the
// template database, and exits.
func Main(m *testing.M, after ...func()) {
	code := m.Run()
	for _, f := range after {
		f()
	}
	if err := DropTemplate(); err != nil {
		fmt.Fprintln(os.Stderr, "dropping the migrated template:", err)
		code = 1
	}
	os.Exit(code)
}

// DropTemplate drops the template database of MigratedDB, if one was
// made.
func DropTemplate() error {
	migrated.Lock()
	defer migrated.Unlock()
	if migrated.name == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := pgx.Connect(ctx, migrated.admin)
	if err != nil {
		return err
	}
	defer func() { _ = c.Close(ctx) }() // the statement's error is the one that counts
	_, err = c.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{migrated.name}.Sanitize()+" WITH (FORCE)")
	migrated.name = ""
	return err
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

// Differences lists every line where the dumps differ.
func Differences(who, a, b string) []string {
	if a == b {
		return nil
	}
	var out []string
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(al) || i < len(bl); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			out = append(out, fmt.Sprintf("tables differ at line %d:\n%s: %s\nCumulus:  %s", i, who, x, y))
		}
	}
	return out
}
