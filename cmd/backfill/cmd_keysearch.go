package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"runtime"
	"time"

	"github.com/backfill-dev/backfill/internal/cli"
	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/internal/store/location"
	"github.com/backfill-dev/backfill/pipeline/audit"
	"github.com/backfill-dev/backfill/pipeline/keysearch"
	"github.com/backfill-dev/backfill/pipeline/ooid"
)

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
	fs := newFlags("keysearch", std)
	o := &keysearchOptions{}
	fs.StringVar(&o.out, "out", "", "the scheme `FILE` to write (required)")
	fs.IntVar(&o.bits, "counter-bits", 24, "counter width `N`, 20..28")
	fs.StringVar(&o.seed, "seed", "backfill", "the key family `S`, 1..64 printable characters")
	fs.Uint64Var(&o.from, "from", 0, "the first key index `N` tried")
	fs.Uint64Var(&o.to, "to", 1<<40, "the key indexes tried end before `N` (default 2^40)")
	fs.StringVar(&o.table, "table", "auto", "`MODE`: auto, a single key unless more than --max-trials keys are expected or tried, then a key table; never; always")
	fs.Uint64Var(&o.maxTrials, "max-trials", 1<<24, "see --table; also the most keys `N` tried for one timestamp of a table")
	fs.IntVar(&o.workers, "workers", runtime.NumCPU(), "`N` keys tried at once (default: the number of CPUs)")
	fs.BoolVar(&o.asJSON, "json", false, "one JSON object on stdout")
	fs.BoolVar(&o.quiet, "q", false, "no progress lines on standard error")
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
	case cli.CheckWorkers("keysearch", o.workers) != nil:
		return cli.CheckWorkers("keysearch", o.workers)
	case o.maxTrials < 1:
		return cli.Usagef("keysearch: --max-trials must be at least 1")
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
		SharedTimestamps: len(shape.Groups), Rejects: rejected, CounterBits: o.bits, MinCounterBits: max(shape.MinBits(), ooid.MinCounterBits),
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
		return &cli.RejectsError{N: int(rejected), What: "rejects", Note: "inputs lost, listed above", Verb: "found"}
	}
	return nil
}

// readCorpus reads the inputs twice (audit.KeysearchCorpus) and returns
// how many inputs were rejected.
func (o *keysearchOptions) readCorpus(ctx context.Context, std cli.Stdio) (_ *keysearch.Shape, _ *keysearch.Corpus, _ int64, err error) {
	o.in.read.Workers = o.workers
	pg, err := o.in.openPostgres(ctx, std)
	if err != nil {
		return nil, nil, 0, err
	}
	if pg != nil {
		defer cli.CloseAlso(&err, pg)
	}
	src := o.in.source("keysearch", std.Err)
	in := audit.Inputs{Names: o.inputs, Stdin: std.In, Open: location.Open, PG: pg}
	shape, corpus, err := audit.KeysearchCorpus(ctx, in, src, o.in.source("keysearch", io.Discard))
	return shape, corpus, src.Rejected, inputUsage("keysearch", err)
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
