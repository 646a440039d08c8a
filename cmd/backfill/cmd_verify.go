package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"runtime"
	"strings"

	"github.com/backfill-dev/backfill/internal/cli"
	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/internal/store/location"
	"github.com/backfill-dev/backfill/pipeline/ingest"
	"github.com/backfill-dev/backfill/pipeline/ooid"
	"github.com/backfill-dev/backfill/pipeline/reader"
	"github.com/backfill-dev/backfill/pipeline/sink/pgcopy"
	"github.com/backfill-dev/backfill/pipeline/verify"
)

func runVerify(ctx context.Context, args []string, std cli.Stdio) error {
	cli.LimitHeap()
	fs := newFlags("verify", std)
	var pf pgFlags
	pf.register(fs, false)
	sinkName := fs.String("sink", "parquet", "`NAME`: parquet (OUT is a folder) or postgres (a schema)")
	schemeFile := fs.String("scheme", "", "the scheme `FILE` of a keyed scheme (backfill keysearch writes them); the output records the key table's name")
	var in madeFrom
	in.register(fs)
	asJSON := fs.Bool("json", false, "one JSON object: the scheme, each bucket's counts and digest, the totals and the output's digest")
	quiet := fs.Bool("q", false, "no progress output")
	rest, err := cli.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if err := checkOutputArgs(fs, *sinkName, rest); err != nil {
		return err
	}
	var opt verify.Options
	if *schemeFile != "" {
		s, err := ooid.LoadScheme(*schemeFile)
		if err != nil {
			return cli.Usagef("verify: --scheme: %v", err)
		}
		opt.Keyed = &s
	}
	src, closeSrc, err := verifySource(ctx, std, *sinkName == "postgres", pf, rest)
	if err != nil {
		return err
	}
	defer closeSrc()
	// An output with OONI's identities of its measurements has them
	// computed again from the input.
	uids := false
	if u, ok := src.(interface {
		UIDs(context.Context) (bool, error)
	}); ok && in.loc != "" {
		uids, _ = u.UIDs(ctx) // an output that cannot be read says so when its buckets are read
	}
	if opt.Input, err = in.open(ctx, std, fs, uids); err != nil {
		return err
	} else if opt.Input != nil {
		defer opt.Input.Close()
	}
	if !*quiet {
		p, n := cli.NewLines(std.Err), 0
		defer p.Finish()
		opt.Done = func(b verify.Bucket) {
			n++
			p.Update(fmt.Sprintf("backfill: verify: %d buckets verified, the last %s", n, b.Date))
		}
	}
	res, err := verify.Run(ctx, src, opt)
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	if *asJSON {
		return json.NewEncoder(std.Out).Encode(res)
	}
	for _, b := range res.Buckets {
		fmt.Fprintf(std.Out, "%s  %d reports (%d collision losers)  %d measurements  sha256:%s\n", b.Date, b.Reports, b.CollisionLosers, b.Measurements, b.Digest)
	}
	fmt.Fprintf(std.Out, "output      %s, %d reports (%d collision losers), %d measurements under %s\ndigest      sha256:%s\n",
		cli.Count(len(res.Buckets), "bucket", "buckets"), res.Reports, res.CollisionLosers, res.Measurements, res.Scheme, res.Digest)
	return nil
}

// checkOutputArgs refuses, for cmd, a sink other than parquet or
// postgres, and an output named both ways (a folder and --dsn or
// --pg-schema) or neither.
func checkOutputArgs(fs *flag.FlagSet, sinkName string, rest []string) error {
	cmd := fs.Name()
	pgOnly := cli.SetFlags(fs, "dsn", "pg-schema")
	switch {
	case sinkName != "parquet" && sinkName != "postgres":
		return cli.Usagef("%s: --sink must be parquet or postgres", cmd)
	case sinkName == "parquet" && len(rest) != 1:
		return cli.Usagef("%s: name one output folder (or --sink postgres)", cmd)
	case sinkName == "parquet" && len(pgOnly) > 0:
		return cli.Usagef("%s: %s %s for --sink postgres", cmd, strings.Join(pgOnly, ", "), cli.Plural(len(pgOnly), "is", "are"))
	case sinkName == "postgres" && len(rest) > 0:
		return cli.Usagef("%s: with --sink postgres the output is --dsn and --pg-schema, not %q", cmd, rest[0])
	}
	return nil
}

// verifySource opens the output to verify: a PostgreSQL schema, or the
// folder named on the command line.
func verifySource(ctx context.Context, std cli.Stdio, postgres bool, pf pgFlags, rest []string) (verify.Source, func(), error) {
	if postgres {
		s, err := pgcopy.Open(ctx, pf.options(std))
		if err != nil {
			return nil, nil, err
		}
		return &verify.Postgres{S: s}, func() { _ = s.Close() }, nil // read only: nothing is lost with the connection
	}
	st, err := location.Open(ctx, rest[0])
	if err != nil {
		return nil, nil, err
	}
	// As status says it: a folder that is not there is a usage error.
	switch info, err := st.Stat(ctx, "."); {
	case store.Failed(err):
		return nil, nil, err
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return nil, nil, err
	case err != nil || !info.IsDir():
		return nil, nil, cli.Usagef("verify: %s is not a folder", rest[0])
	}
	return &verify.Parquet{St: st}, func() {}, nil
}

// madeFrom are verify's flags of the input an output was made from,
// read as run read it.
type madeFrom struct {
	loc       string
	canned    string
	fromIndex bool
	ndx       reader.Ndx
	format    reader.Format
	workers   int
}

func (f *madeFrom) register(fs *flag.FlagSet) {
	fs.StringVar(&f.loc, "in", "", "the folder of bucket folders `DIR` the output was made from: the output must have its every bucket and report, with their counts, and no other")
	fs.BoolVar(&f.fromIndex, "from-index", false, "with --in: autoclaved buckets' reports from the index alone, as run --from-index reads them")
	fs.StringVar(&f.canned, "canned", "", "with --in: the canned form `DIR` of autoclaved buckets, as run --canned read it (where an output made with --measurement-uid took their raw bytes)")
	f.ndx, f.format = reader.NdxBlobs, reader.FormatAuto
	fs.Var(&f.ndx, "ndx", "with --in: the `POLICY` the run counted measurements by, blobs or datums")
	fs.Var(&f.format, "format", "with --in: bucket layout `F`: auto, canned or autoclaved")
	fs.IntVar(&f.workers, "workers", runtime.NumCPU(), "with --in: `N` containers read at once (default: the number of CPUs)")
}

// open starts reading the input, nil without --in. A misnamed folder in it
// holds reports no output can have: it fails.
func (f *madeFrom) open(ctx context.Context, std cli.Stdio, fs *flag.FlagSet, uids bool) (*verify.Input, error) {
	if f.loc == "" {
		if inOnly := cli.SetFlags(fs, "from-index", "ndx", "format", "workers", "canned"); len(inOnly) > 0 {
			return nil, cli.Usagef("verify: %s %s for --in", strings.Join(inOnly, ", "), cli.Plural(len(inOnly), "is", "are"))
		}
		return nil, nil
	}
	if err := cli.CheckWorkers("verify", f.workers); err != nil {
		return nil, err
	}
	fsys, err := location.Open(ctx, f.loc)
	if err != nil {
		return nil, cli.Usagef("verify: --in %v", err)
	}
	in, err := ingest.ResolveInput(ctx, fsys, nil)
	if err != nil {
		return nil, inputError("verify", err)
	}
	if len(in.Misnamed) > 0 {
		return nil, fmt.Errorf("verify: --in: %s", in.Misnamed[0].Say(in.Dir))
	}
	for _, name := range in.Ignored {
		fmt.Fprintf(std.Err, "backfill: notice: %s is not a bucket folder (its name is not a date YYYY-MM-DD); skipped\n", cli.Printable(in.Dir.Where(name)))
	}
	cfg := ingest.Config{In: in.Dir, Buckets: in.Buckets, Workers: f.workers, Scheme: ooid.DefaultScheme, Format: f.format,
		Read: reader.ReadOptions{Ndx: f.ndx, FromIndex: f.fromIndex, UIDs: uids}, Source: store.Identity(in.Dir.Where("."))}
	if f.canned != "" {
		if cfg.Canned, err = location.Open(ctx, f.canned); err != nil {
			return nil, cli.Usagef("verify: --canned %v", err)
		}
		if !store.IsDir(ctx, cfg.Canned, ".") {
			return nil, cli.Usagef("verify: --canned %s is not a folder", f.canned)
		}
	}
	input, err := verify.ReadInput(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("verify: --in: %w", err)
	}
	return input, nil
}
