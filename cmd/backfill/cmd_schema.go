package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/backfill-dev/backfill/internal/cli"
	"github.com/backfill-dev/backfill/pipeline/sink/pgcopy"
)

const schemaHelp = `Usage: backfill schema [--dsn URL] [--pg-schema NAME]

Create the PostgreSQL schema of ` + "`backfill run --sink postgres`" + ` where it is
missing: its tables (measurements, reports, dead_letters, ledger), indexes,
constraints and the view measurement_ids. It is idempotent, and it completes
a bulk load (run --bulk) that stopped before building its indexes.

The connection comes from --dsn (a postgres:// URL or key=value string) and
the standard PG* environment variables (PGHOST, PGPORT, PGUSER, PGPASSWORD,
PGDATABASE, ...) for what it leaves out. The password never appears in
messages. A schema made by an older version is upgraded: missing columns
are added, and the GiST index and exclusion constraint it kept on reports
are replaced by a btree on ts.

Flags:

	--dsn URL          connection string (default: the PG* variables)
	--pg-schema NAME   schema of the tables (default backfill); any name is
	                   quoted as an identifier

EXIT STATUS

	0    the schema is ready
	1    failure (connection, permissions)
	2    usage error
`

// pgFlags are the connection flags of run and schema.
type pgFlags struct {
	dsn, schema string
	retries     int
	retryWait   time.Duration
	timeout     time.Duration
	connections int
}

func (p *pgFlags) register(fs *flag.FlagSet, retries bool) {
	fs.StringVar(&p.dsn, "dsn", "", "")
	fs.StringVar(&p.schema, "pg-schema", pgcopy.DefaultSchema, "")
	if retries {
		fs.IntVar(&p.retries, "retries", pgcopy.DefaultRetries, "")
		fs.DurationVar(&p.retryWait, "retry-wait", pgcopy.DefaultRetryWait, "")
		fs.DurationVar(&p.timeout, "pg-timeout", pgcopy.DefaultTimeout, "")
		fs.IntVar(&p.connections, "connections", pgcopy.DefaultConnections, "")
	}
}

func (p *pgFlags) options(std cli.Stdio) pgcopy.Options {
	return pgcopy.Options{DSN: p.dsn, Schema: p.schema, Retries: p.retries, RetryWait: p.retryWait, Timeout: p.timeout, Connections: p.connections,
		Log: func(format string, args ...any) { fmt.Fprintf(std.Err, "backfill: "+format+"\n", args...) }}
}

func runSchema(ctx context.Context, args []string, std cli.Stdio) (err error) {
	fs := cli.NewFlagSet("schema", schemaHelp, std)
	var pf pgFlags
	pf.register(fs, false)
	rest, err := cli.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return cli.Usagef("schema: unexpected argument %q", rest[0])
	}
	if pf.schema == "" {
		return cli.Usagef("schema: --pg-schema must not be empty")
	}
	opt := pf.options(std)
	opt.CreateSchema = true
	s, err := pgcopy.Open(ctx, opt)
	if err != nil {
		return err
	}
	defer cli.CloseAlso(&err, s)
	fmt.Fprintf(std.Out, "schema %s ready (%s)\n", pgx.Identifier{pf.schema}.Sanitize(), s)
	return nil
}
