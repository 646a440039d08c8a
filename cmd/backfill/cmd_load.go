package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/backfill-dev/backfill/internal/cli"
	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/internal/store/location"
	"github.com/backfill-dev/backfill/pipeline/output"
	"github.com/backfill-dev/backfill/pipeline/scaleout"
	"github.com/backfill-dev/backfill/pipeline/sink"
	"github.com/backfill-dev/backfill/pipeline/sink/pgcopy"
)

func runLoad(ctx context.Context, args []string, std cli.Stdio) error {
	fs := newFlags("load", std)
	var planFile, out, sinkName string
	var createSchema, replace, noWithdraw bool
	var pf pgFlags
	pf.register(fs, true)
	shard := -1
	fs.StringVar(&planFile, "plan", "", "the plan `FILE` of backfill plan")
	fs.StringVar(&out, "out", "", "the job's output `OUT` (a folder or s3://bucket/prefix)")
	fs.StringVar(&sinkName, "sink", "parquet", "`NAME`: parquet (into OUT) or postgres")
	fs.BoolVar(&createSchema, "create-schema", false, "create the tables when they are missing")
	fs.BoolVar(&replace, "replace", false, "replace buckets the output holds from another input (without it the load refuses, exit 1)")
	fs.BoolVar(&noWithdraw, "no-withdraw", false, "refuse a load that would withdraw IDs the output published (Parquet: before anything is copied; PostgreSQL: the bucket that would)")
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
	if sinkName == "postgres" {
		pg := pf.options(std)
		pg.CreateSchema, pg.NoWithdraw = createSchema, noWithdraw
		return loadPostgres(ctx, std, p, planFile, shard, dst, pg, replace)
	}
	n, ws, err := scaleout.Load(ctx, p, shard, dst, scaleout.LoadOptions{Replace: replace, NoWithdraw: noWithdraw})
	if isOrder(err) {
		return cli.Usagef("load: %v", err)
	} else if err != nil {
		return err
	}
	fmt.Fprintf(std.Err, "backfill: loaded shard %d: %s into %s\n", shard, cli.Count(n, "bucket", "buckets"), out)
	if len(ws) > 0 {
		warnWithdrawn(std, ws)
		return &cli.RejectsError{N: len(ws), What: "reports", Note: "whose published IDs the load withdrew", Verb: "named"}
	}
	return nil
}

// loadPostgres loads the buckets of shard from the job's output dst into
// the schema of pg (replacing buckets loaded from another input with
// replace).
func loadPostgres(ctx context.Context, std cli.Stdio, p scaleout.Plan, planFile string, shard int, dst store.Store, pg pgcopy.Options, replace bool) (err error) {
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
	o, err := openOutput(ctx, std, output.Config{Postgres: true, PG: pg})
	if err != nil {
		return err
	}
	defer cli.CloseAlso(&err, o.Sink)
	ws, err := scaleout.LoadInto(ctx, p, shard, dst, o.Sink, replace)
	if isOrder(err) {
		return cli.Usagef("load: %v", err)
	} else if err != nil {
		if ose := (*sink.OtherSourceError)(nil); errors.As(err, &ose) {
			ose.Output = o.Dest
		}
		return err
	}
	fmt.Fprintf(std.Err, "backfill: loaded %s of %s into %s\n", cli.Count(len(p.Names(shard)), "bucket", "buckets"), src.Where("."), o.Dest)
	if len(ws) > 0 {
		warnWithdrawn(std, ws)
		return &cli.RejectsError{N: len(ws), What: "reports", Note: "whose published IDs the load withdrew", Verb: "named"}
	}
	return nil
}
