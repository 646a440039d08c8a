package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/backfill-dev/backfill/internal/cli"
	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/internal/store/location"
	"github.com/backfill-dev/backfill/pipeline/output"
	"github.com/backfill-dev/backfill/pipeline/scaleout"
	"github.com/backfill-dev/backfill/pipeline/sink"
)

func runLoad(ctx context.Context, args []string, std cli.Stdio) (err error) {
	fs := newFlags("load", std)
	var planFile, out, sinkName string
	var createSchema, replace, noWithdraw bool
	var lockWait time.Duration
	var pf pgFlags
	pf.register(fs, true)
	shard := -1
	fs.StringVar(&planFile, "plan", "", "the plan `FILE` of backfill plan")
	fs.StringVar(&out, "out", "", "the job's output `OUT` (a folder or s3://bucket/prefix)")
	fs.StringVar(&sinkName, "sink", "parquet", "`NAME`: parquet (into OUT) or postgres")
	fs.BoolVar(&createSchema, "create-schema", false, "create the tables when they are missing")
	fs.BoolVar(&replace, "replace", false, "replace buckets the output holds from another input (without it the load refuses, exit 1)")
	fs.BoolVar(&noWithdraw, "no-withdraw", false, "refuse a bucket that would withdraw IDs the output published, before anything of it is written (exit 1)")
	fs.DurationVar(&lockWait, "lock-wait", 10*time.Minute, "how long to wait for another writer of a Parquet OUT (a run, another shard's load) to release its lock; 0 refuses at once")
	fs.IntVar(&shard, "shard", -1, "the shard `I` to load (default: JOB_COMPLETION_INDEX)")
	rest, err := cli.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	pgOnly := cli.SetFlags(fs, "dsn", "pg-schema", "create-schema", "retries", "retry-wait", "pg-timeout", "connections")
	switch {
	case len(rest) > 0:
		return cli.Usagef("load: unexpected argument %q", rest[0])
	case planFile == "" || out == "":
		return cli.Usagef("load: --plan and --out are required")
	case sinkName != "parquet" && sinkName != "postgres":
		return cli.Usagef("load: --sink must be parquet or postgres")
	case sinkName == "parquet" && len(pgOnly) > 0:
		return cli.Usagef("load: %s %s for --sink postgres; add --sink postgres, or leave %s out", strings.Join(pgOnly, ", "), cli.Plural(len(pgOnly), "is", "are"), cli.Plural(len(pgOnly), "it", "them"))
	case pf.connections < 1 || pf.connections > 256:
		return cli.Usagef("load: --connections must be 1 to 256 (a PostgreSQL server holds about 100 by default)")
	case pf.timeout <= 0:
		return cli.Usagef("load: --pg-timeout must be positive")
	case lockWait < 0 || lockWait > 24*time.Hour:
		return cli.Usagef("load: --lock-wait must be 0 to 24h")
	}
	p, err := readPlan(ctx, "load", planFile)
	if err != nil {
		return err
	}
	if shard, err = shardIndex("load", p, shard); err != nil {
		return err
	}
	dst, err := location.Open(ctx, out)
	if err != nil {
		return err
	}
	src := scaleout.ShardOut(dst, shard)
	if len(p.Names(shard)) == 0 {
		fmt.Fprintf(std.Err, "backfill: shard %d of %s has no bucket; nothing to do\n", shard, planFile)
		return nil
	}
	if err := scaleout.Mapped(ctx, src, shard); isOrder(err) {
		return cli.Usagef("load: %v", err)
	} else if err != nil {
		return err
	}
	cfg := output.Config{Folder: dst, LockWait: lockWait, Waiting: func(le *store.LockedError) {
		fmt.Fprintf(std.Err, "backfill: %v; waiting up to %v for it (--lock-wait)\n", le, lockWait)
	}}
	if sinkName == "postgres" {
		pg := pf.options(std)
		pg.CreateSchema, pg.NoWithdraw = createSchema, noWithdraw
		cfg = output.Config{Postgres: true, PG: pg}
	}
	o, err := openOutput(ctx, std, cfg)
	if err != nil {
		return err
	}
	defer cli.CloseAlso(&err, o.Sink)
	sum, err := scaleout.Load(ctx, p, shard, dst, o.Sink, scaleout.LoadOptions{Replace: replace, NoWithdraw: noWithdraw})
	// A load that fails names no withdrawal: the journal keeps them for
	// the next writer, which names them once the settlement is done.
	if isOrder(err) {
		return cli.Usagef("load: %v", err)
	} else if err != nil {
		if ose := (*sink.OtherSourceError)(nil); errors.As(err, &ose) {
			ose.Output = o.Dest
		}
		return err
	}
	fmt.Fprintf(std.Err, "backfill: loaded shard %d: %s of %s into %s\n", shard, cli.Count(sum.Buckets, "bucket", "buckets"), src.Where("."), o.Dest)
	warnWithdrawn(std, sum.Withdrawn)
	warnStrays(std, sum.Strays)
	switch {
	case len(sum.Withdrawn) > 0:
		return &cli.RejectsError{N: len(sum.Withdrawn), What: "reports", Note: "whose published IDs the load withdrew", Verb: "named"}
	case len(sum.Strays) > 0:
		return &cli.RejectsError{N: len(sum.Strays), What: "stray files", Note: "in the output's folders, held by no committed bucket", Verb: "found"}
	}
	return nil
}
