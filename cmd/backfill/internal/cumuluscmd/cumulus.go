package cumuluscmd

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/backfill-dev/backfill/cumulus/cumulusdb"
	"github.com/backfill-dev/backfill/cumulus/dla"
	"github.com/backfill-dev/backfill/cumulus/granulefiles"
	"github.com/backfill-dev/backfill/cumulus/message"
	"github.com/backfill-dev/backfill/cumulus/records"
	"github.com/backfill-dev/backfill/cumulus/replay"
	"github.com/backfill-dev/backfill/docs"
	"github.com/backfill-dev/backfill/internal/cli"
	"github.com/backfill-dev/backfill/internal/pgnet"
	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/internal/store/location"
)

// cumulusFlags are the flags of granule-write and granule-recover.
type cumulusFlags struct {
	dsn, schema, archive, filesRoot, region string
	batch, concurrency                      int
	timeout                                 time.Duration
}

func (c *cumulusFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.dsn, "dsn", "", "connection string `URL` (default: the PG* variables)")
	fs.StringVar(&c.schema, "pg-schema", "", "schema `NAME` of Cumulus's tables (default: the connection's search_path)")
	fs.StringVar(&c.archive, "archive", ".", "root `DIR` of the Dead Letter Archive, a folder or s3://bucket/prefix")
	fs.StringVar(&c.filesRoot, "files-root", "", "where the S3 buckets are: s3:// for S3 itself, or a folder (or s3:// prefix) `DIR` that stands for them, DIR/<bucket>/<key> (CMR files, unsized files, remote messages); without it, none are read")
	fs.StringVar(&c.region, "region", "", "AWS region `R` of execution URLs (default: us-east-1)")
	fs.IntVar(&c.batch, "batch", 100, "`N` messages (or records) per transaction")
	fs.IntVar(&c.concurrency, "concurrency", 4, "`N` transactions at once")
	fs.DurationVar(&c.timeout, "pg-timeout", 10*time.Minute, "bound `D` on each try of a batch: past it the try is dropped with its connection and made again, as the database refusing it is")
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
	var files granulefiles.Source
	if c.filesRoot != "" {
		root, err := location.Open(ctx, c.filesRoot)
		if err != nil {
			return nil, nil, replay.Options{}, err
		}
		files = granulefiles.Objects{Ctx: ctx, Root: root}
		if dir, ok := store.LocalDir(root); ok {
			if !store.IsDir(ctx, root, ".") {
				return nil, nil, replay.Options{}, cli.Usagef("%s: --files-root %s is not a folder", cmd, c.filesRoot)
			}
			files = granulefiles.Dir(dir)
		}
	}
	pool, err := pgnet.Pool(ctx, c.dsn, c.schema, c.concurrency+1, c.timeout)
	if err != nil {
		return nil, nil, replay.Options{}, err
	}
	var mu sync.Mutex
	logf := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(std.Err, "backfill: %s\n", cli.Printable(s)) // it carries a message's fields
	}
	opt := records.Options{Region: c.region, Now: func() int64 { return time.Now().UnixMilli() }, Warn: logf}
	ropt := replay.Options{Batch: c.batch, Concurrency: c.concurrency, Timeout: c.timeout, Log: logf}
	if files != nil {
		opt.Files = files
		ropt.Decode = message.Options{Open: files.Open}
	}
	return pool, records.New(pool, opt), ropt, nil
}

func RunGranuleWrite(ctx context.Context, args []string, std cli.Stdio) error {
	return replayMessages(ctx, "granule-write", args, std)
}

func RunGranuleRecover(ctx context.Context, args []string, std cli.Stdio) error {
	return replayMessages(ctx, "granule-recover", args, std)
}

// replayMessages runs granule-write (the messages of the inputs) or
// granule-recover (those of the archive) through the writer.
func replayMessages(ctx context.Context, cmd string, args []string, std cli.Stdio) error {
	fs := cli.NewFlagSet(cmd, docs.Help(cmd), std)
	var c cumulusFlags
	c.register(fs)
	inputs, err := cli.ParseFlags(fs, args)
	recovering := cmd == "granule-recover"
	switch {
	case err != nil:
		return err
	case !recovering && len(inputs) == 0:
		return cli.Usagef("granule-write: no input given (a file, a folder or - for standard input)")
	case recovering && len(inputs) > 0:
		return cli.Usagef("granule-recover: unexpected argument %q (the archive is --archive)", inputs[0])
	}
	if err := c.check(cmd); err != nil {
		return err
	}
	root, err := location.Open(ctx, c.archive)
	if err != nil {
		return err
	}
	if _, local := store.LocalDir(root); recovering && local && !store.IsDir(ctx, root, ".") {
		return cli.Usagef("granule-recover: --archive %s is not a folder (a Dead Letter Archive that granule-write made)", c.archive)
	}
	pool, w, opt, err := c.setup(ctx, cmd, std)
	if err != nil {
		return err
	}
	defer pool.Close()
	// A database without Cumulus's tables is a setup to finish: every
	// message would fail, and be archived, for it.
	missing, err := cumulusdb.MissingTables(ctx, pool)
	if err != nil {
		return pgnet.Named(pool.Config().ConnConfig, err)
	}
	if len(missing) > 0 {
		return pgnet.Named(pool.Config().ConnConfig, fmt.Errorf("no Cumulus tables (%s): run backfill granule-schema first, or point --dsn at the database Cumulus made; nothing was written or archived",
			strings.Join(missing, ", ")))
	}
	if !recovering {
		// The archive is there once a write has run, failures or none:
		// granule-recover then finds it, empty, rather than no folder.
		if err := root.MkdirAll(ctx, "."); err != nil {
			return fmt.Errorf("granule-write: --archive %s is not a folder and cannot be made one: %w", c.archive, err)
		}
	}
	var st replay.Stats
	if recovering {
		st, err = replay.Recover(ctx, dla.New(root), w, opt)
	} else {
		st, err = replay.Write(ctx, inputs, std.In, w, dla.New(root), opt)
	}
	fmt.Fprintf(std.Err, "backfill: %s: %s: %d written, %d failed; %s: %d written, %d written with status failed (a final status that fails the schema, as Cumulus does), %d dropped by the write constraints, %d failed to write",
		cmd, cli.Count(st.Messages, "message", "messages"), st.OK, st.Archived, cli.Plural(st.Granules, "granule", "granules"),
		st.GranulesWritten, st.GranulesMarked, st.GranulesDropped, st.GranulesFailed)
	if recovering {
		fmt.Fprintf(std.Err, "; %s deleted from the archive", cli.Count(st.Deleted, "record", "records"))
	}
	if st.Left > 0 {
		one, many := leftWhat(recovering)
		fmt.Fprintf(std.Err, "; %s left where %s (named above)", cli.Count(st.Left, one, many), cli.Plural(st.Left, "it is", "they are"))
	}
	if n := w.Fallbacks(); n > 0 {
		fmt.Fprintf(std.Err, "; %s written one message at a time", cli.Count(n, "batch", "batches"))
	}
	fmt.Fprintln(std.Err)
	switch {
	case err != nil:
		return err
	case st.Archived > 0 && recovering:
		return &cli.RejectsError{N: st.Archived, What: "records", Verb: "failed again and " + cli.Plural(st.Archived, "was", "were") + " moved to failed-sqs"}
	case st.Archived > 0:
		return &cli.RejectsError{N: st.Archived, What: "messages", Verb: "failed and " + cli.Plural(st.Archived, "is", "are") + " in the archive under " + c.archive}
	case st.Left > 0:
		if recovering {
			return &cli.RejectsError{N: st.Left, What: "strays", Note: "archive entries that are not records", Verb: "left in place"}
		}
		return &cli.RejectsError{N: st.Left, What: "inputs", Note: "not regular files", Verb: "refused"}
	}
	return nil
}

// leftWhat names what Stats.Left counts, one and many.
func leftWhat(recovering bool) (string, string) {
	if recovering {
		return "archive entry that is not a record", "archive entries that are not records"
	}
	return "input that is not a regular file", "inputs that are not regular files"
}

func RunGranuleSchema(ctx context.Context, args []string, std cli.Stdio) error {
	fs := cli.NewFlagSet("granule-schema", docs.Help("granule-schema"), std)
	var dsn, schema string
	fs.StringVar(&dsn, "dsn", "", "connection string `URL` (default: the PG* variables)")
	fs.StringVar(&schema, "pg-schema", "", "schema `NAME` to create the tables in (default: the connection's search_path)")
	rest, err := cli.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return cli.Usagef("granule-schema: unexpected argument %q", rest[0])
	}
	if schema != "" {
		pool, err := pgnet.Pool(ctx, dsn, "", 1, 10*time.Minute)
		if err != nil {
			return err
		}
		_, err = pool.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{schema}.Sanitize())
		pool.Close()
		if err != nil {
			return err
		}
	}
	pool, err := pgnet.Pool(ctx, dsn, schema, 1, 10*time.Minute)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := cumulusdb.CreateTables(ctx, pool); err != nil {
		return err
	}
	where := "the connection's schema"
	if schema != "" {
		where = "schema " + pgx.Identifier{schema}.Sanitize()
	}
	fmt.Fprintf(std.Out, "Cumulus granule tables ready in %s\n", where)
	return nil
}
