package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/backfill-dev/backfill/internal/cli"
	"github.com/backfill-dev/backfill/internal/store/location"
	"github.com/backfill-dev/backfill/pipeline/ooid"
	"github.com/backfill-dev/backfill/pipeline/sink/pgcopy"
	"github.com/backfill-dev/backfill/pipeline/verify"
)

func runVerify(ctx context.Context, args []string, std cli.Stdio) error {
	fs := newFlags("verify", std)
	var pf pgFlags
	pf.register(fs, false)
	sinkName := fs.String("sink", "parquet", "`NAME`: parquet (OUT is a folder) or postgres (a schema)")
	schemeFile := fs.String("scheme", "", "the scheme `FILE` of a keyed scheme (backfill keysearch writes them); the output records the key table's name")
	asJSON := fs.Bool("json", false, "one JSON object: the scheme, each bucket's counts and digest, the totals and the output's digest")
	quiet := fs.Bool("q", false, "no progress output")
	rest, err := cli.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	pgOnly := cli.SetFlags(fs, "dsn", "pg-schema")
	switch {
	case *sinkName != "parquet" && *sinkName != "postgres":
		return cli.Usagef("verify: --sink must be parquet or postgres")
	case *sinkName == "parquet" && len(rest) != 1:
		return cli.Usagef("verify: name one output folder (or --sink postgres)")
	case *sinkName == "parquet" && len(pgOnly) > 0:
		return cli.Usagef("verify: %s %s for --sink postgres", strings.Join(pgOnly, ", "), cli.Plural(len(pgOnly), "is", "are"))
	case *sinkName == "postgres" && len(rest) > 0:
		return cli.Usagef("verify: with --sink postgres the output is --dsn and --pg-schema, not %q", rest[0])
	}
	var keyed *ooid.Scheme
	if *schemeFile != "" {
		s, err := ooid.LoadScheme(*schemeFile)
		if err != nil {
			return cli.Usagef("verify: --scheme: %v", err)
		}
		keyed = &s
	}
	var src verify.Source
	if *sinkName == "postgres" {
		s, err := pgcopy.Open(ctx, pf.options(std))
		if err != nil {
			return err
		}
		defer func() { _ = s.Close() }() // read only: nothing is lost with the connection
		src = &verify.Postgres{S: s}
	} else {
		st, err := location.Open(ctx, rest[0])
		if err != nil {
			return err
		}
		src = &verify.Parquet{St: st}
	}
	var done func(verify.Bucket)
	if !*quiet {
		p, n := cli.NewLines(std.Err), 0
		defer p.Finish()
		done = func(b verify.Bucket) {
			n++
			p.Update(fmt.Sprintf("backfill: verify: %d buckets verified, the last %s", n, b.Date))
		}
	}
	res, err := verify.Run(ctx, src, keyed, done)
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	if *asJSON {
		return json.NewEncoder(std.Out).Encode(res)
	}
	for _, b := range res.Buckets {
		fmt.Fprintf(std.Out, "%s  %d reports (%d rejected)  %d measurements  sha256:%s\n", b.Date, b.Reports, b.Rejected, b.Measurements, b.Digest)
	}
	fmt.Fprintf(std.Out, "output      %d buckets, %d reports (%d rejected), %d measurements under %s\ndigest      sha256:%s\n",
		len(res.Buckets), res.Reports, res.Rejected, res.Measurements, res.Scheme, res.Digest)
	return nil
}
