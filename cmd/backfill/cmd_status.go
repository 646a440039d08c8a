package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/backfill-dev/backfill/internal/cli"
	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/internal/store/location"
	"github.com/backfill-dev/backfill/pipeline/sink/parquetfile"
	"github.com/backfill-dev/backfill/pipeline/sink/pgcopy"
	"github.com/backfill-dev/backfill/pipeline/stamp"
	"github.com/backfill-dev/backfill/pipeline/stamped"
	"github.com/backfill-dev/backfill/pipeline/status"
)

// readStatus reads the state of the output: a Parquet folder (the one of
// rest) or a PostgreSQL schema; closeOut releases what it opened.
func readStatus(ctx context.Context, std cli.Stdio, sinkName string, rest []string, pf pgFlags) (rep status.Output, states []stamped.State, closeOut func(), err error) {
	closeOut = func() {}
	if sinkName == "postgres" {
		s, err := pgcopy.Open(ctx, pf.options(std))
		if err != nil {
			return rep, nil, closeOut, err
		}
		if states, err = s.State(ctx); err == nil {
			rep.Input, err = s.InputDeadLetters(ctx)
		}
		if err != nil {
			return rep, nil, closeOut, errors.Join(err, s.Close())
		}
		rep.Output = s.String()
		return rep, states, func() { _ = s.Close() }, nil // the states are read; a connection ended badly changes nothing
	}
	out, err := location.Open(ctx, rest[0])
	if err != nil {
		return rep, nil, closeOut, err
	}
	if !store.IsDir(ctx, out, ".") {
		return rep, nil, closeOut, cli.Usagef("status: %s is not a folder", rest[0])
	}
	if states, err = parquetfile.ReadState(ctx, out); err != nil {
		return rep, nil, closeOut, err
	}
	if rep.Input, err = parquetfile.ReadInputDeadLetters(ctx, out); err != nil {
		return rep, nil, closeOut, err
	}
	rep.Output = "Parquet in " + store.Abs(rest[0])
	if pid, locked := parquetfile.Holder(ctx, out); locked {
		rep.WriterPID = max(pid, -1)
	}
	return rep, states, closeOut, nil
}

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
	pgOnly := cli.SetFlags(fs, "dsn", "pg-schema")
	switch {
	case sinkName != "parquet" && sinkName != "postgres":
		return cli.Usagef("status: --sink must be parquet or postgres")
	case sinkName == "parquet" && len(rest) != 1:
		return cli.Usagef("status: name one output folder (or --sink postgres)")
	case sinkName == "parquet" && len(pgOnly) > 0:
		return cli.Usagef("status: %s %s for --sink postgres", strings.Join(pgOnly, ", "), cli.Plural(len(pgOnly), "is", "are"))
	case sinkName == "postgres" && len(rest) > 0:
		return cli.Usagef("status: with --sink postgres the output is --dsn and --pg-schema, not %q", rest[0])
	}
	var input stamp.Input
	if in != "" {
		fsys, err := location.Open(ctx, in)
		if err != nil {
			return cli.Usagef("status: --in %v", err)
		}
		if input, err = stamp.ResolveInput(ctx, fsys, nil); err != nil {
			return inputError("status", err)
		}
	}
	rep, states, closeOut, err := readStatus(ctx, std, sinkName, rest, pf)
	if err != nil {
		return err
	}
	defer closeOut()
	rep.Fill(states)
	if in != "" {
		rep.Resume = status.Resume(ctx, input, states)
	}
	if asJSON {
		b, _ := json.Marshal(rep)
		fmt.Fprintf(std.Out, "%s\n", b)
		return nil
	}
	rep.WriteText(std.Out, in != "")
	return nil
}
