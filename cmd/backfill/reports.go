package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/backfill-dev/backfill/internal/cli"
	"github.com/backfill-dev/backfill/pipeline/audit"
	"github.com/backfill-dev/backfill/pipeline/ingest"
	"github.com/backfill-dev/backfill/pipeline/reader"
	"github.com/backfill-dev/backfill/pipeline/sink/pgcopy"
)

// inputFlags are the flags of the inputs audit and keysearch read: how
// bucket folders are read, and --sink postgres with its connection.
type inputFlags struct {
	read ingest.Config
	sink string
	pg   pgFlags
}

func (f *inputFlags) register(fs *flag.FlagSet) {
	f.read.Format, f.read.Read.Ndx = reader.FormatAuto, reader.NdxBlobs
	fs.Var(&f.read.Format, "format", "bucket layout `F`: auto, canned or autoclaved")
	fs.BoolVar(&f.read.Read.FromIndex, "from-index", false, "autoclaved buckets: count from the index alone")
	fs.Var(&f.read.Read.Ndx, "ndx", "`POLICY`: blobs or datums, as for backfill run")
	fs.StringVar(&f.sink, "sink", "", "`postgres`: read the reports of a PostgreSQL schema")
	f.pg.register(fs, false)
}

// check refuses a sink other than postgres, connection flags without it,
// and no input at all.
func (f *inputFlags) check(fs *flag.FlagSet, inputs []string) error {
	cmd := fs.Name()
	pgOnly := cli.SetFlags(fs, "dsn", "pg-schema")
	switch {
	case f.sink != "" && f.sink != "postgres":
		return cli.Usagef("%s: --sink must be postgres (a Parquet output is named as an INPUT)", cmd)
	case f.sink == "" && len(pgOnly) > 0:
		return cli.Usagef("%s: %s %s for --sink postgres", cmd, strings.Join(pgOnly, ", "), cli.Plural(len(pgOnly), "is", "are"))
	case f.sink == "" && len(inputs) == 0:
		return cli.Usagef("%s: no input: name a manifest, a run's output folder or bucket folders (or --sink postgres)", cmd)
	}
	return nil
}

// openPostgres opens the schema of --sink postgres; nil without it.
func (f *inputFlags) openPostgres(ctx context.Context, std cli.Stdio) (*pgcopy.Sink, error) {
	if f.sink != "postgres" {
		return nil, nil
	}
	return pgcopy.Open(ctx, f.pg.options(std))
}

// source returns the report source of the flags, which says on w what it
// rejects.
func (f *inputFlags) source(cmd string, w io.Writer) *audit.Source {
	cfg := f.read
	cfg.Version = buildVersion()
	return &audit.Source{Stamp: cfg, OnReject: func(what string, err error) {
		fmt.Fprintf(w, "backfill %s: %s: %s\n", cmd, cli.Printable(what), cli.Printable(err.Error()))
	}}
}

// inputUsage is err, or, when an input named on the command line holds no
// bucket, the usage error of cmd that says so (exit 2).
func inputUsage(cmd string, err error) error {
	if ie := (*ingest.InputError)(nil); errors.As(err, &ie) {
		return &cli.UsageError{Msg: cmd + ": " + err.Error(), Cmd: cmd}
	}
	return err
}

// inputError is the error of cmd when --in cannot be resolved: a usage
// error when the folder is not one a run reads (exit 2), the store's
// failure (network, permissions: exit 1) otherwise.
func inputError(cmd string, err error) error {
	if ie := (*ingest.InputError)(nil); errors.As(err, &ie) {
		return cli.Usagef("%s: --in %v", cmd, err)
	}
	return fmt.Errorf("%s: --in %w", cmd, err)
}
