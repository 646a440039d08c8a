package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"time"

	"github.com/backfill-dev/backfill/internal/cli"
	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/pipeline/audit"
	"github.com/backfill-dev/backfill/pipeline/keysearch"
	"github.com/backfill-dev/backfill/pipeline/ooid"
	"github.com/backfill-dev/backfill/pipeline/sink/pgcopy"
)

const keysearchHelp = `Usage: backfill keysearch --out FILE [flags] INPUT...
       backfill keysearch --out FILE --sink postgres [--dsn URL] [--pg-schema NAME] [flags]

Find a keyed ID scheme under which the corpus has no colliding OOIDs at the
counter width asked for, and write it as a scheme file for run, audit, ooid
and decode --verify (--scheme FILE).

A keyed scheme takes a report's counter base from SipHash-2-4 of its
textname under a 128-bit key, modulo 2^bits. Key I of a family is the
first 16 bytes of SHA-256("backfill-ooid-key" 0x00 SEED 0x00 I), so a key
is named by its seed and index. The search tries the indexes from --from
up and keeps the first one under which no two reports collide; the same
seed and input always give the same key, and a search split by index
range over several machines finds the same first key (take the smallest
found). Where one key cannot be expected to work (the width is narrow for
the corpus), a key table keeps key --from as the default and gives each
timestamp whose reports collide under it the first key that separates
them.

Only reports that share a timestamp with another can collide, so only
those are kept: the inputs are read twice, once to find the shared
timestamps, once to keep their textnames. A trial stops at its first
collision, trying the groups most likely to collide first.

The INPUTs are those of backfill audit: report manifests (TEXTNAME<TAB>N
lines), run output folders, and bucket folders (canned or autoclaved); or,
with --sink postgres, the reports of a PostgreSQL schema run loaded.

Flags:

	--out FILE          the scheme file to write (required)
	--counter-bits N    counter width, 20..28 (default 24)
	--seed S            the key family, 1..64 printable characters
	                    (default backfill)
	--from N            the first key index tried (default 0)
	--to N              the key indexes tried end before N
	                    (default 1099511627776, that is 2^40)
	--table MODE        auto (default): a single key unless more than
	                    --max-trials keys are expected or tried, then a
	                    key table; never; always
	--max-trials N      see --table; also the most keys tried for one
	                    timestamp of a table (default 16777216)
	--workers N         keys tried at once (default: the number of CPUs)
	--json              one JSON object on stdout
	-q                  no progress lines on standard error
	--format F          bucket layout: auto (default), canned or
	                    autoclaved
	--sink postgres     read the reports of a PostgreSQL schema
	--dsn URL           PostgreSQL connection string; the PG* environment
	                    variables fill in what it leaves out
	--pg-schema NAME    schema of the tables (default ` + pgcopy.DefaultSchema + `)
	--from-index        autoclaved buckets: count from the index alone
	--ndx POLICY        blobs (default) or datums, as for backfill run

Examples:

	backfill gen --profile ooni2018 --manifest-only --out corpus.tsv
	backfill keysearch --counter-bits 24 --out scheme24.txt corpus.tsv
	backfill audit --scheme scheme24.txt corpus.tsv
	backfill run --scheme scheme24.txt --in buckets/ --out out/

EXIT STATUS

	0    the scheme file was written
	1    failure; no key in the range works, or the width is too narrow
	     for the corpus (the smallest width that can work is printed)
	2    usage error
	3    written, but some inputs were rejected (listed on stderr)
	130  interrupted
`

// keysearchOptions are keysearch's flags.
type keysearchOptions struct {
	out, seed, table    string
	bits, workers       int
	from, to, maxTrials uint64
	asJSON, quiet       bool
	in                  inputFlags
	inputs              []string
}

func parseKeysearchFlags(args []string, std cli.Stdio) (*keysearchOptions, error) {
	fs := cli.NewFlagSet("keysearch", keysearchHelp, std)
	o := &keysearchOptions{}
	fs.StringVar(&o.out, "out", "", "")
	fs.IntVar(&o.bits, "counter-bits", 24, "")
	fs.StringVar(&o.seed, "seed", "backfill", "")
	fs.Uint64Var(&o.from, "from", 0, "")
	fs.Uint64Var(&o.to, "to", 1<<40, "")
	fs.StringVar(&o.table, "table", "auto", "")
	fs.Uint64Var(&o.maxTrials, "max-trials", 1<<24, "")
	fs.IntVar(&o.workers, "workers", runtime.NumCPU(), "")
	fs.BoolVar(&o.asJSON, "json", false, "")
	fs.BoolVar(&o.quiet, "q", false, "")
	o.in.register(fs)
	var err error
	if o.inputs, err = cli.ParseFlags(fs, args); err != nil {
		return nil, err
	}
	if o.out == "" {
		return nil, cli.Usagef("keysearch: --out FILE is required")
	}
	if err := o.in.check(fs, o.inputs); err != nil {
		return nil, err
	}
	return o, nil
}

// check checks the flags against each other.
func (o *keysearchOptions) check() error {
	switch {
	case o.bits < ooid.MinCounterBits || o.bits > ooid.MaxCounterBits:
		return cli.Usagef("keysearch: --counter-bits %d: want %d..%d", o.bits, ooid.MinCounterBits, ooid.MaxCounterBits)
	case o.to <= o.from:
		return cli.Usagef("keysearch: --to must be above --from")
	case o.table != "auto" && o.table != "never" && o.table != "always":
		return cli.Usagef("keysearch: --table %q: want auto, never or always", o.table)
	case o.workers < 1 || o.maxTrials < 1:
		return cli.Usagef("keysearch: --workers and --max-trials must be at least 1")
	}
	if _, err := ooid.NewKeyTable(o.seed, o.from, nil); err != nil {
		return cli.Usagef("keysearch: --seed: %v", err)
	}
	for _, input := range o.inputs {
		if input == "-" {
			return cli.Usagef("keysearch: reads its inputs twice: name a file, not standard input")
		}
	}
	return nil
}

func runKeysearch(ctx context.Context, args []string, std cli.Stdio) error {
	o, err := parseKeysearchFlags(args, std)
	if err != nil {
		return err
	}
	if err := o.check(); err != nil {
		return err
	}
	start := time.Now()
	shape, corpus, rejected, err := o.readCorpus(ctx, std)
	if err != nil {
		return err
	}
	res := keysearch.Report{Reports: shape.Reports, Measurements: shape.Measurements, SharedReports: shape.SharedReports,
		SharedTimestamps: len(shape.Groups), Rejected: rejected, CounterBits: o.bits, MinCounterBits: shape.MinBits(),
		ExpectedTrials: shape.ExpectedTrials(o.bits), NotebookTrials: shape.NotebookTrials(o.bits), Seed: o.seed, File: o.out}
	if res.MinCounterBits > o.bits {
		return fmt.Errorf("keysearch: %d measurements share one timestamp: no key works below %d counter bits", shape.MaxGroup, res.MinCounterBits)
	}
	if !o.quiet {
		fmt.Fprintf(std.Err, "backfill keysearch: %s, %d share a timestamp (%s); at %d bits one key is expected after %s %s\n",
			cli.Count(shape.Reports, "report", "reports"), shape.SharedReports, cli.Count(len(shape.Groups), "timestamp", "timestamps"), o.bits,
			keysearch.TrialsText(res.ExpectedTrials), cli.Plural(int64(math.Round(res.ExpectedTrials)), "trial", "trials"))
	}
	searchStart := time.Now()
	found, err := corpus.Find(ctx, o.policy(std, res.ExpectedTrials))
	if err != nil {
		return err
	}
	res.Key, res.Trials = found.Key, found.Trials
	if found.Table {
		res.Overrides = found.Overrides
		res.ExpectedOverrides, res.ExpectedTableTrials = shape.ExpectedTable(o.bits)
	}
	res.Scheme = found.Scheme.String()
	res.Seconds, res.SearchSeconds = time.Since(start).Seconds(), time.Since(searchStart).Seconds()
	if err := o.write(std, res, found.Scheme, shape); err != nil {
		return err
	}
	if rejected > 0 {
		return &cli.RejectsError{N: int(rejected), What: "inputs"}
	}
	return nil
}

// readCorpus reads the inputs twice: the shape of the corpus (its
// timestamps and their reports), then the textnames of the reports that
// share a timestamp. It returns how many inputs were rejected.
func (o *keysearchOptions) readCorpus(ctx context.Context, std cli.Stdio) (_ *keysearch.Shape, _ *keysearch.Corpus, _ int64, err error) {
	o.in.read.Workers = o.workers
	pg, err := o.in.openPostgres(ctx, std)
	if err != nil {
		return nil, nil, 0, err
	}
	if pg != nil {
		defer cli.CloseAlso(&err, pg)
	}
	// each reads every input once.
	each := func(src *audit.Source, fn audit.Func) error {
		if pg != nil {
			if err := src.Postgres(ctx, pg, fn); err != nil {
				return err
			}
		}
		for _, input := range o.inputs {
			if err := eachReport(ctx, src, "keysearch", input, std.In, fn); err != nil {
				return err
			}
		}
		return nil
	}
	src := o.in.source("keysearch", std.Err)
	var census keysearch.Census
	err = each(src, func(at audit.Place, textname []byte, n uint32) {
		t, err := ooid.ParseTextnameBytes(textname)
		if err != nil {
			src.Reject(at.String(), err)
			return
		}
		census.Add(t.TS, n)
	})
	if err != nil {
		return nil, nil, 0, err
	}
	shape := census.Shape()
	corpus := keysearch.NewCorpus(shape)
	var addErr error // a corpus too large to search; the search must not run on part of it
	err = each(o.in.source("keysearch", io.Discard), func(_ audit.Place, textname []byte, n uint32) {
		if t, err := ooid.ParseTextnameBytes(textname); err == nil && addErr == nil {
			addErr = corpus.Add(t.TS, textname, n)
		}
	})
	return shape, corpus, src.Rejected, errors.Join(err, addErr)
}

// policy is the search the flags ask for, with its progress lines.
func (o *keysearchOptions) policy(std cli.Stdio, expected float64) keysearch.Policy {
	pol := keysearch.Policy{Options: keysearch.Options{Bits: o.bits, Seed: o.seed, From: o.from, To: o.to, Workers: o.workers},
		Table: o.table, MaxTrials: o.maxTrials}
	if o.quiet {
		return pol
	}
	pol.Progress = keysearch.ProgressLines(std.Err, expected)
	pol.Fallback = func(trials uint64) {
		fmt.Fprintf(std.Err, "backfill keysearch: no single key among %d; building a key table\n", trials)
	}
	var last time.Duration
	pol.TableProgress = func(p keysearch.Progress) {
		if p.Elapsed-last >= 5*time.Second {
			last = p.Elapsed
			fmt.Fprintf(std.Err, "backfill keysearch: key table: %d timestamps left, %d keys tried\n", p.Groups, p.Trials)
		}
	}
	return pol
}

// write writes the scheme file, then prints what was found.
func (o *keysearchOptions) write(std cli.Stdio, res keysearch.Report, scheme ooid.Scheme, shape *keysearch.Shape) error {
	b, err := ooid.MarshalScheme(scheme, fmt.Sprintf("Made by backfill keysearch over %d reports (%d measurements) at %d counter bits.", shape.Reports, shape.Measurements, o.bits))
	if err != nil {
		return err
	}
	if err := store.WriteLocalFile(o.out, b); err != nil {
		return err
	}
	if o.asJSON {
		enc := json.NewEncoder(std.Out)
		enc.SetEscapeHTML(false)
		return enc.Encode(res)
	}
	res.WriteText(std.Out)
	return nil
}
