package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/backfill-dev/backfill/internal/cli"
	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/internal/store/location"
	"github.com/backfill-dev/backfill/pipeline/ingest"
	"github.com/backfill-dev/backfill/pipeline/output"
	"github.com/backfill-dev/backfill/pipeline/status"
)

func runStatus(ctx context.Context, args []string, std cli.Stdio) error {
	fs := newFlags("status", std)
	var sinkName, in string
	var asJSON bool
	var pf pgFlags
	pf.register(fs, false)
	fs.StringVar(&sinkName, "sink", "parquet", "`NAME`: parquet (OUT is a folder) or postgres")
	fs.StringVar(&in, "in", "", "the folder of bucket folders `DIR` the runs read")
	fs.BoolVar(&asJSON, "json", false, "one JSON object instead of the table")
	rest, err := cli.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if err := checkOutputArgs(fs, sinkName, rest); err != nil {
		return err
	}
	var input ingest.Input
	if in != "" {
		fsys, err := location.Open(ctx, in)
		if err != nil {
			return cli.Usagef("status: --in %v", err)
		}
		if input, err = ingest.ResolveInput(ctx, fsys, nil); err != nil {
			return inputError("status", err)
		}
	}
	cfg := output.Config{Postgres: sinkName == "postgres", PG: pf.options(std)}
	if !cfg.Postgres {
		if cfg.Folder, err = location.Open(ctx, rest[0]); err != nil {
			return err
		}
	}
	rep, states, err := output.ReadState(ctx, cfg)
	if errors.Is(err, output.ErrNotFolder) {
		return cli.Usagef("status: %s is not a folder", rest[0])
	} else if err != nil {
		return err
	}
	rep.Fill(states)
	if in != "" {
		rep.Resume = status.Resume(ctx, input, store.Identity(input.Dir.Where(".")), states)
	}
	if asJSON {
		b, _ := json.Marshal(rep)
		fmt.Fprintf(std.Out, "%s\n", b)
	} else {
		rep.WriteText(std.Out, in != "")
	}
	switch {
	case rep.Unsettled != "" && rep.WriterPID == 0:
		return &cli.RejectsError{N: 1, What: "unfinished settlement", Note: "left by a writer that stopped; its buckets are not as a run leaves them until the next run or load completes it", Verb: "found"}
	case len(rep.Strays) > 0:
		return &cli.RejectsError{N: len(rep.Strays), What: "stray files", Note: "in the output's folders, held by no committed bucket", Verb: "found"}
	}
	return nil
}
