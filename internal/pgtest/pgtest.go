// Package pgtest gives tests a PostgreSQL database of their own.
//
// The server is the one BACKFILL_TEST_DATABASE names (a URL to a database
// the tests may create databases from, as a superuser), else the one on
// 127.0.0.1:5432. `make test` (scripts/with-postgres) always sets the
// variable, starting a throwaway cluster when no server answers, and sets
// BACKFILL_REQUIRE_POSTGRES=1: then a server that cannot be reached fails
// the test instead of skipping it.
package pgtest

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvDatabase names the server the tests use.
const EnvDatabase = "BACKFILL_TEST_DATABASE"

// EnvRequire makes an unreachable server a failure.
const EnvRequire = "BACKFILL_REQUIRE_POSTGRES"

const defaultAdmin = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// AdminURL returns the URL of the test server's admin database, or skips
// (fails under BACKFILL_REQUIRE_POSTGRES) when no server answers.
func AdminURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv(EnvDatabase)
	if u == "" {
		u = defaultAdmin
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, u)
	if err != nil {
		if os.Getenv(EnvRequire) != "" || os.Getenv(EnvDatabase) != "" {
			t.Fatalf("Postgres test server %s: %v", redact(u), err)
		}
		t.Skipf("skipping: no Postgres server answers (%v); set %s to run Postgres tests (make test does)", err, EnvDatabase)
	}
	_ = c.Close(ctx) // only asked whether a server answers
	return u
}

var seq atomic.Int64

// NewDatabase creates an empty database on the test server, drops it when
// the test ends, and returns its URL.
func NewDatabase(t testing.TB) string {
	t.Helper()
	return CreateDatabase(t, AdminURL(t))
}

// CreateDatabase creates an empty database on the server of admin, drops it
// when the test ends, and returns its URL.
func CreateDatabase(t testing.TB, admin string) string {
	t.Helper()
	return CreateDatabaseFrom(t, admin, "")
}

// CreateDatabaseFrom is CreateDatabase with the database a copy of
// template (no copy when template is ""), which no session may be
// connected to.
func CreateDatabaseFrom(t testing.TB, admin, template string) string {
	t.Helper()
	name := fmt.Sprintf("backfill_test_%d_%d_%d", os.Getpid(), time.Now().UnixNano()%1e6, seq.Add(1))
	create := "CREATE DATABASE " + pgx.Identifier{name}.Sanitize()
	if template != "" {
		create += " TEMPLATE " + pgx.Identifier{template}.Sanitize()
	}
	Exec(t, admin, create)
	t.Cleanup(func() {
		Exec(t, admin, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	})
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}

// Exec runs SQL statements on the database of dsn.
func Exec(t testing.TB, dsn string, sql ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect %s: %v", redact(dsn), err)
	}
	defer func() { _ = c.Close(ctx) }() // the statements were checked one by one
	for _, s := range sql {
		if _, err := c.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// Connect opens a connection the test closes at its end.
func Connect(t testing.TB, dsn string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect %s: %v", redact(dsn), err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) }) // a test connection, ended with its test
	return c
}

func redact(dsn string) string {
	if u, err := url.Parse(dsn); err == nil {
		return u.Redacted()
	}
	return "(unparsable URL)"
}
