package main

import (
	"context"
	"flag"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/backfill-dev/backfill/cumulus/dla"
	"github.com/backfill-dev/backfill/cumulus/message"
	"github.com/backfill-dev/backfill/cumulus/records"
	"github.com/backfill-dev/backfill/cumulus/replay"
	"github.com/backfill-dev/backfill/internal/cli"
	"github.com/backfill-dev/backfill/internal/pgconn"
	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/internal/store/location"
)

const granuleWriteHelp = `Usage: backfill granule-write [flags] INPUT...

Write the database records of NASA Cumulus workflow messages as Cumulus
v21's message path (sfEventSqsToDbRecords) writes them: the execution, the
PDR, and each granule with its files and execution join row, under the
same write constraints, into a database with Cumulus's tables (made by
Cumulus's migrations, or by backfill granule-schema).

An INPUT is a file, a folder (its files at any depth, in name order,
hidden ones left out) or "-" for standard input. A file holds JSON lines
or one JSON document; each value is a Cumulus message, an EventBridge
"Step Functions Execution Status Change" event, an SQS record whose body
holds either (nested at any depth), a Dead Letter Archive record, or a
Lambda SQS event {"Records": [...]} or an array of any of these.

A granule that the write constraints keep out (an older or superseded
write) is dropped without error and counted. A message that fails (bad
JSON, not a Cumulus message, a schema error, an unknown collection or
provider, a granule ID another collection holds, ...) is written to the
Dead Letter Archive under --archive as Cumulus's DLA records are:

	DIR/dead-letter-archive/sqs/<YYYY-MM-DD>/<executionName>-<uuid>

and reported on standard error with its input position; granule-recover
replays the archive. Messages are written in batches of --batch per
transaction, --concurrency batches at a time; the verdict of each message
and each granule is its own, as if it were written alone.

What differs from Cumulus: nothing is published to SNS and nothing is
indexed in Elasticsearch; the execution's start and stop dates come from
the event (detail.startDate, detail.stopDate), or from the message's
workflow_start_time and workflow_stop_time, not from Step Functions; a
FAILED event's message is detail.output when present, else detail.input
(Cumulus rebuilds the failed step's message from the execution history);
remote messages ("replace") and CMR files are read from --files-root.

Flags:

	--dsn URL            connection string (default: the PG* variables)
	--pg-schema NAME     schema of Cumulus's tables (default: the
	                     connection's search_path)
	--archive DIR        root of the Dead Letter Archive, a folder or
	                     s3://bucket/prefix (default .)
	--files-root DIR     where the S3 buckets are: s3:// for S3 itself,
	                     or a folder (or s3:// prefix) that stands for
	                     them, DIR/<bucket>/<key> (CMR files, unsized
	                     files, remote messages); without it, none are
	                     read
	--batch N            messages per transaction (default 100)
	--concurrency N      transactions at once (default 4)
	--pg-timeout D       bound on each try of a batch: past it the try is
	                     dropped with its connection and made again, as the
	                     database refusing it is (default 10m0s)
	--region R           AWS region of execution URLs (default us-east-1)

Examples:

	backfill granule-schema --dsn postgres:///cumulus
	backfill granule-write --dsn postgres:///cumulus --archive dla --files-root buckets messages/
	aws sqs receive-message ... | jq -c '.Messages[]' | backfill granule-write -

EXIT STATUS

	0    every message written (granules dropped by the constraints included)
	1    failure (database unavailable after retries, unreadable input)
	2    usage error
	3    some messages failed and are in the archive (each one reported)
	130  interrupted
`

const granuleRecoverHelp = `Usage: backfill granule-recover [flags]

Replay the Dead Letter Archive under --archive through the same writer as
granule-write, as Cumulus's recovery does: every record of
DIR/dead-letter-archive/sqs/ is written; a record written is deleted, one
that fails again is moved to DIR/dead-letter-archive/failed-sqs/<date>/
(the date of the record's time, else today's) and reported. Killed at any
moment and run again, every record ends written or moved: a record leaves
sqs/ only after its write has committed, or after its copy under
failed-sqs/ is stored (a kill between the two leaves both).

Flags:

	--dsn URL            connection string (default: the PG* variables)
	--pg-schema NAME     schema of Cumulus's tables (default: the
	                     connection's search_path)
	--archive DIR        root of the Dead Letter Archive, a folder or
	                     s3://bucket/prefix (default .)
	--files-root DIR     where the S3 buckets are (as for granule-write)
	--batch N            records per transaction (default 100)
	--concurrency N      transactions at once (default 4)
	--pg-timeout D       bound on each try of a batch: past it the try is
	                     dropped with its connection and made again, as the
	                     database refusing it is (default 10m0s)
	--region R           AWS region of execution URLs (default us-east-1)

EXIT STATUS

	0    every record written
	1    failure (database unavailable after retries)
	2    usage error
	3    some records failed again and were moved to failed-sqs
	130  interrupted
`

const granuleSchemaHelp = `Usage: backfill granule-schema [--dsn URL] [--pg-schema NAME]

Create, where they are missing, the tables of Cumulus v21's database that
granule-write uses (collections, providers, async_operations, executions,
pdrs, granules, files, granules_executions) as Cumulus's own migrations
define them: the same columns, types, defaults, checks, keys and indexes.
For databases Cumulus did not create; on one it did, there is nothing to
do. With --pg-schema, the schema is created if missing and the tables go
there. Collections and providers are Cumulus's configuration: insert the
ones your messages name before writing.

EXIT STATUS

	0    the tables are ready
	1    failure (connection, permissions)
	2    usage error
`

// cumulusFlags are the flags of granule-write and granule-recover.
type cumulusFlags struct {
	dsn, schema, archive, filesRoot, region string
	batch, concurrency                      int
	timeout                                 time.Duration
}

func (c *cumulusFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.dsn, "dsn", "", "")
	fs.StringVar(&c.schema, "pg-schema", "", "")
	fs.StringVar(&c.archive, "archive", ".", "")
	fs.StringVar(&c.filesRoot, "files-root", "", "")
	fs.StringVar(&c.region, "region", "", "")
	fs.IntVar(&c.batch, "batch", 100, "")
	fs.IntVar(&c.concurrency, "concurrency", 4, "")
	fs.DurationVar(&c.timeout, "pg-timeout", 10*time.Minute, "")
}

func (c *cumulusFlags) check(cmd string) error {
	switch {
	case c.batch <= 0:
		return cli.Usagef("%s: --batch must be positive", cmd)
	case c.concurrency <= 0 || c.concurrency > 256:
		return cli.Usagef("%s: --concurrency must be 1 to 256", cmd)
	case c.timeout <= 0:
		return cli.Usagef("%s: --pg-timeout must be positive", cmd)
	case c.archive == "":
		return cli.Usagef("%s: --archive must not be empty", cmd)
	}
	return nil
}

// setup connects and builds the writer and the replay options of the flags.
// The files root is checked before connecting: a bad one is a usage error.
func (c *cumulusFlags) setup(ctx context.Context, cmd string, std cli.Stdio) (*pgxpool.Pool, *records.Writer, replay.Options, error) {
	var files records.Files
	if c.filesRoot != "" {
		root, err := location.Open(ctx, c.filesRoot)
		if err != nil {
			return nil, nil, replay.Options{}, err
		}
		files = records.Objects{Ctx: ctx, Root: root}
		if dir, ok := store.LocalDir(root); ok {
			if !store.IsDir(ctx, root, ".") {
				return nil, nil, replay.Options{}, cli.Usagef("%s: --files-root %s is not a folder", cmd, c.filesRoot)
			}
			files = records.Dir(dir)
		}
	}
	pool, err := pgconn.Pool(ctx, c.dsn, c.schema, c.concurrency+1, c.timeout)
	if err != nil {
		return nil, nil, replay.Options{}, err
	}
	var mu sync.Mutex
	logf := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(std.Err, "backfill: %s\n", s)
	}
	opt := records.Options{Region: c.region, Now: func() int64 { return time.Now().UnixMilli() }, Warn: logf}
	ropt := replay.Options{Batch: c.batch, Concurrency: c.concurrency, Timeout: c.timeout, Log: logf}
	if files != nil {
		opt.Files = files
		ropt.Decode = message.Options{Open: files.Open}
	}
	return pool, records.New(pool, opt), ropt, nil
}

func runGranuleWrite(ctx context.Context, args []string, std cli.Stdio) error {
	fs := cli.NewFlagSet("granule-write", granuleWriteHelp, std)
	var c cumulusFlags
	c.register(fs)
	inputs, err := cli.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(inputs) == 0 {
		return cli.Usagef("granule-write: no input given (a file, a folder or - for standard input)")
	}
	if err := c.check("granule-write"); err != nil {
		return err
	}
	pool, w, opt, err := c.setup(ctx, "granule-write", std)
	if err != nil {
		return err
	}
	defer pool.Close()
	root, err := location.Open(ctx, c.archive)
	if err != nil {
		return err
	}
	arch := dla.New(root)
	st, err := replay.Write(ctx, inputs, std.In, w, arch, opt)
	report(std, "granule-write", st, w)
	if err != nil {
		return err
	}
	if st.Archived > 0 {
		return &cli.RejectsError{N: st.Archived, What: "messages", Verb: "failed and " + cli.Plural(st.Archived, "is", "are") + " in the archive under " + c.archive}
	}
	return nil
}

func runGranuleRecover(ctx context.Context, args []string, std cli.Stdio) error {
	fs := cli.NewFlagSet("granule-recover", granuleRecoverHelp, std)
	var c cumulusFlags
	c.register(fs)
	rest, err := cli.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return cli.Usagef("granule-recover: unexpected argument %q (the archive is --archive)", rest[0])
	}
	if err := c.check("granule-recover"); err != nil {
		return err
	}
	pool, w, opt, err := c.setup(ctx, "granule-recover", std)
	if err != nil {
		return err
	}
	defer pool.Close()
	root, err := location.Open(ctx, c.archive)
	if err != nil {
		return err
	}
	arch := dla.New(root)
	st, err := replay.Recover(ctx, arch, w, opt)
	report(std, "granule-recover", st, w)
	if err != nil {
		return err
	}
	if st.Archived > 0 {
		return &cli.RejectsError{N: st.Archived, What: "records", Verb: "failed again and " + cli.Plural(st.Archived, "was", "were") + " moved to failed-sqs"}
	}
	return nil
}

// report prints what became of the messages.
func report(std cli.Stdio, cmd string, st replay.Stats, w *records.Writer) {
	fmt.Fprintf(std.Err, "backfill: %s: %s: %d written, %d failed; %s: %d written, %d written with status failed (a final status that fails the schema, as Cumulus does), %d dropped by the write constraints, %d failed to write",
		cmd, cli.Count(st.Messages, "message", "messages"), st.OK, st.Archived, cli.Plural(st.Granules, "granule", "granules"),
		st.GranulesWritten, st.GranulesMarked, st.GranulesDropped, st.GranulesFailed)
	if cmd == "granule-recover" {
		fmt.Fprintf(std.Err, "; %s deleted from the archive", cli.Count(st.Deleted, "record", "records"))
	}
	if n := w.Fallbacks(); n > 0 {
		fmt.Fprintf(std.Err, "; %s written one message at a time", cli.Count(n, "batch", "batches"))
	}
	fmt.Fprintln(std.Err)
}

func runGranuleSchema(ctx context.Context, args []string, std cli.Stdio) error {
	fs := cli.NewFlagSet("granule-schema", granuleSchemaHelp, std)
	var dsn, schema string
	fs.StringVar(&dsn, "dsn", "", "")
	fs.StringVar(&schema, "pg-schema", "", "")
	rest, err := cli.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return cli.Usagef("granule-schema: unexpected argument %q", rest[0])
	}
	if schema != "" {
		pool, err := pgconn.Pool(ctx, dsn, "", 1, 10*time.Minute)
		if err != nil {
			return err
		}
		_, err = pool.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{schema}.Sanitize())
		pool.Close()
		if err != nil {
			return err
		}
	}
	pool, err := pgconn.Pool(ctx, dsn, schema, 1, 10*time.Minute)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := records.CreateTables(ctx, pool); err != nil {
		return err
	}
	where := "the connection's schema"
	if schema != "" {
		where = "schema " + pgx.Identifier{schema}.Sanitize()
	}
	fmt.Fprintf(std.Out, "Cumulus granule tables ready in %s\n", where)
	return nil
}
