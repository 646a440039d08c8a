package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/backfill-dev/backfill/internal/cli"
	"github.com/backfill-dev/backfill/pipeline/sink/pgcopy"
	"github.com/backfill-dev/backfill/pipeline/sink/pgcopy/pgschema"
)

// pgFlags are the connection flags of run and schema.
type pgFlags struct {
	dsn, schema string
	retries     int
	retryWait   time.Duration
	timeout     time.Duration
	connections int
}

func (p *pgFlags) register(fs *flag.FlagSet, retries bool) {
	fs.StringVar(&p.dsn, "dsn", "", "PostgreSQL connection string `URL` (or key=value string); the PG* environment variables fill in what it leaves out")
	fs.StringVar(&p.schema, "pg-schema", pgschema.Default, "schema `NAME` of the tables, quoted as an identifier")
	if retries {
		fs.IntVar(&p.retries, "retries", pgcopy.DefaultRetries, "tries again `N` times per bucket after a lost connection")
		fs.DurationVar(&p.retryWait, "retry-wait", pgcopy.DefaultRetryWait, "first wait `D` before a retry, then twice as long each time (at most 30s)")
		fs.DurationVar(&p.timeout, "pg-timeout", pgcopy.DefaultSilence, "bound `D` on the server's silence: past it a probe on a new connection asks whether the server is at work, and a try it is not at work on (or that gets no answer) is dropped with its connection and retried; a load the server works on is never cut")
		fs.IntVar(&p.connections, "connections", pgcopy.DefaultConnections, "`N` buckets committed at once, each on a connection of its own (--bulk uses one)")
	}
}

func (p *pgFlags) options(std cli.Stdio) pgcopy.Options {
	return pgcopy.Options{DSN: p.dsn, Schema: p.schema, Retries: p.retries, RetryWait: p.retryWait, Silence: p.timeout, Connections: p.connections,
		Log: func(format string, args ...any) {
			fmt.Fprintf(std.Err, "backfill: %s\n", cli.Printable(fmt.Sprintf(format, args...)))
		}}
}

func runSchema(ctx context.Context, args []string, std cli.Stdio) (err error) {
	fs := newFlags("schema", std)
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
