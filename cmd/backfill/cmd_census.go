package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/backfill-dev/backfill/internal/cli"
	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/internal/store/location"
	"github.com/backfill-dev/backfill/pipeline/census"
	"github.com/backfill-dev/backfill/pipeline/ooniuid"
	"github.com/backfill-dev/backfill/pipeline/sink/pgcopy"
)

func runCensus(ctx context.Context, args []string, std cli.Stdio) (err error) {
	cli.LimitHeap() // it holds every report's place
	fs := newFlags("census", std)
	var pf pgFlags
	pf.register(fs, false)
	sinkName := fs.String("sink", "parquet", "`NAME`: parquet (OUT is a folder) or postgres (a schema)")
	asJSON := fs.Bool("json", false, "one JSON object: groups, duplicates and their kinds")
	pairsFile := fs.String("pairs", "", "write each duplicate's OOID beside its group's first's, its kind and both textnames and ndx, as CSV, to the new `FILE`")
	rest, err := cli.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if err := checkOutputArgs(fs, *sinkName, rest); err != nil {
		return err
	}
	var src census.Source
	if *sinkName == "postgres" {
		s, err := pgcopy.Open(ctx, pf.options(std))
		if err != nil {
			return err
		}
		defer func() { _ = s.Close() }() // read only
		src = census.WithListed(func(ctx context.Context, fn func(bucket string, r census.Report) error) error {
			return s.EachIdentity(ctx, func(r pgcopy.IdentityReport) error {
				hashes := make([]ooniuid.Hash, len(r.Hashes))
				for i, h := range r.Hashes {
					copy(hashes[i][:], h)
				}
				return fn(r.Bucket, census.Report{Textname: r.Textname, TS: r.TS, Base: r.Base, Bits: r.Bits, Loser: r.Loser, Hashes: hashes})
			})
		}, s.ListedUIDs)
	} else {
		st, err := location.Open(ctx, rest[0])
		if err != nil {
			return err
		}
		src = census.Parquet(st)
	}
	var pairs io.Writer
	if *pairsFile != "" {
		// A new file, never one that is there (or a link planted there).
		f, err := os.OpenFile(*pairsFile, os.O_WRONLY|os.O_CREATE|os.O_EXCL, store.FileMode())
		if err != nil {
			return fmt.Errorf("census: --pairs: %w", err)
		}
		defer func() {
			if cerr := f.Close(); err == nil && cerr != nil {
				err = fmt.Errorf("census: --pairs: %w", cerr)
			}
			if err != nil {
				_ = os.Remove(*pairsFile) // half a file is no result
			}
		}()
		pairs = f
	}
	res, err := census.Run(ctx, src, pairs, "")
	if err != nil {
		return fmt.Errorf("census: %w", err)
	}
	if *asJSON {
		return json.NewEncoder(std.Out).Encode(res)
	}
	fmt.Fprintf(std.Out, "buckets        %d\nreports        %d (with measurements)\nmeasurements   %d (collision losers' included)\ngroups         %d (of two or more measurements with equal raw bytes)\nduplicates     %d (every member of a group after its first)\n",
		res.Buckets, res.Reports, res.Measurements, res.Groups, res.Duplicates)
	for _, k := range []string{census.SameReport, census.Retry, census.Other} {
		fmt.Fprintf(std.Out, "  %-12s %d\n", k, res.ByKind[k])
	}
	if res.Listed > 0 {
		fmt.Fprintf(std.Out, "listed         %d (OONI's uids no row carries, listed in dead letters: in the groups by their hash)\n", res.Listed)
	}
	if res.Unhashed > 0 {
		fmt.Fprintf(std.Out, "unhashed       %d (no content_hash: their raw bytes were not read; in no group)\n", res.Unhashed)
	}
	return nil
}
