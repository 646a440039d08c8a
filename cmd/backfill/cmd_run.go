package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/backfill-dev/backfill/cmd/backfill/internal/idcmd"
	"github.com/backfill-dev/backfill/internal/cli"
	"github.com/backfill-dev/backfill/internal/pgnet"
	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/internal/store/location"
	"github.com/backfill-dev/backfill/internal/units"
	"github.com/backfill-dev/backfill/pipeline/ingest"
	"github.com/backfill-dev/backfill/pipeline/job"
	"github.com/backfill-dev/backfill/pipeline/ooid"
	"github.com/backfill-dev/backfill/pipeline/output"
	"github.com/backfill-dev/backfill/pipeline/reader"
	"github.com/backfill-dev/backfill/pipeline/reader/report"
	"github.com/backfill-dev/backfill/pipeline/scaleout"
	"github.com/backfill-dev/backfill/pipeline/sink"
)

// runOptions are run's flags.
type runOptions struct {
	cfg                                   job.Config
	inLoc, cannedLoc, out, sink, planFile string
	asJSON, quiet, strict                 bool
	createSchema, bulk, skipLocked        bool
	build                                 buildFlags
	shard                                 int
	pg                                    pgFlags
	maxBlob                               units.Size
	buckets                               []string
	pgOnly                                []string     // the PostgreSQL-only flags set
	buildSet                              []string     // the flags of --bulk's builds set
	loadScheme                            func() error // reads --scheme, once the flags are checked
}

func parseRunFlags(args []string, std cli.Stdio) (*runOptions, error) {
	fs := newFlags("run", std)
	o := &runOptions{cfg: job.Config{Scheme: ooid.DefaultScheme, Version: buildVersion()}, shard: -1, maxBlob: units.Size(report.DefaultMaxBlob)}
	cfg := &o.cfg
	o.pg.register(fs, true)
	fs.StringVar(&o.sink, "sink", "parquet", "`NAME`: parquet or postgres")
	fs.BoolVar(&o.createSchema, "create-schema", false, "create the schema first where it is missing")
	fs.BoolVar(&o.bulk, "bulk", false, "one-off migration into an empty schema: load without the indexes, build them at the end (same end state; rerun with --bulk --resume if interrupted)")
	o.build.register(fs)
	fs.BoolVar(&o.skipLocked, "skip-locked", false, "skip buckets another run is loading instead of waiting")
	fs.StringVar(&o.inLoc, "in", "", "the folder of bucket folders, or one bucket folder, a path or s3://bucket/prefix `DIR` (required but for --plan)")
	fs.StringVar(&o.out, "out", "", "the output folder `DIR`, a path or s3://bucket/prefix (required for --sink parquet)")
	fs.StringVar(&o.planFile, "plan", "", "run one shard of the plan `FILE` (backfill plan): its input, its buckets; refused when they changed since planning")
	fs.IntVar(&o.shard, "shard", -1, "the shard `I` of --plan (default: JOB_COMPLETION_INDEX, as a Kubernetes Indexed Job sets it)")
	fs.IntVar(&cfg.Workers, "workers", runtime.NumCPU(), "`N` containers read at once (default: the number of CPUs)")
	fs.BoolVar(&cfg.Resume, "resume", false, "skip buckets committed with the same input and scheme")
	fs.BoolVar(&cfg.UIDs, "measurement-uid", false, "give every measurement row OONI's identity of it: measurement_uid (null where OONI's code gives none) and content_hash (SHAKE128 of its raw bytes); autoclaved buckets take the raw bytes from --canned")
	fs.BoolVar(&cfg.NoWithdraw, "no-withdraw", false, "refuse to commit a bucket that would take back the IDs of a committed report (a collision with a report that sorts first); without it they are withdrawn, named, and counted as rejects (exit 3)")
	fs.BoolVar(&cfg.Replace, "replace", false, "replace buckets the output holds from another input folder (without it the run refuses, exit 1)")
	fs.BoolVar(&cfg.VerifySHA1, "verify-sha1", false, "")
	fs.BoolVar(&cfg.VerifySHA1, "verify", false, "check every report's and file's SHA-1 against the index too (sizes and CRC-32s always are), every LZ4 checksum, and parse every autoclaved datum as JSON: about half the CPU time of a run (--verify-sha1 is the same flag)")
	cfg.Format, cfg.Ndx = reader.FormatAuto, reader.NdxBlobs
	fs.Var(&cfg.Format, "format", "bucket layout `F`: auto (told per bucket), canned or autoclaved")
	fs.BoolVar(&cfg.FromIndex, "from-index", false, "autoclaved buckets: IDs from the index alone, no data read")
	fs.Var(&cfg.Ndx, "ndx", "`POLICY`: blobs (badblobs count) or datums (badblobs get no ID and a dead-letter record)")
	fs.StringVar(&o.cannedLoc, "canned", "", "autoclaved buckets: compare each file with its canned form in `DIR`/BUCKET, report by report and measurement by measurement (orig_sha1s, sizes, cutoffs); a difference is a canned_mismatch record")
	fs.Var(&o.maxBlob, "max-blob", "flag measurements over `SIZE` bytes")
	fs.BoolVar(&o.asJSON, "json", false, "print the summary as JSON")
	fs.BoolVar(&o.quiet, "q", false, "no progress output")
	fs.BoolVar(&o.strict, "strict", false, "exit 3 for notices too, not only for rejects")
	o.loadScheme = idcmd.SchemeFlags(fs, &cfg.Scheme)
	var err error
	if o.buckets, err = cli.ParseFlags(fs, args); err != nil {
		return nil, err
	}
	o.pgOnly = cli.SetFlags(fs, "dsn", "pg-schema", "create-schema", "bulk", "skip-locked", "retries", "retry-wait", "pg-timeout", "connections",
		"build-memory", "build-workers")
	o.buildSet = cli.SetFlags(fs, "build-memory", "build-workers")
	return o, nil
}

// check checks the flags against each other.
func (o *runOptions) check() error {
	switch pf := o.pg; {
	case o.sink != "parquet" && o.sink != "postgres":
		return cli.Usagef("run: --sink must be parquet or postgres")
	case o.planFile != "" && (o.inLoc != "" || len(o.buckets) > 0):
		return cli.Usagef("run: with --plan the input and its buckets are the plan's; leave --in and BUCKETs out")
	case o.planFile == "" && o.shard >= 0:
		return cli.Usagef("run: --shard is a shard of --plan")
	case o.inLoc == "" && o.planFile == "":
		return cli.Usagef("run: --in is required")
	case o.sink == "parquet" && o.out == "":
		return cli.Usagef("run: --out is required (or --sink postgres)")
	case o.sink == "postgres" && o.out != "":
		return cli.Usagef("run: --out is for --sink parquet; Postgres output goes to --dsn")
	case o.sink == "parquet" && len(o.pgOnly) > 0:
		return cli.Usagef("run: %s %s for --sink postgres; add --sink postgres, or leave %s out", strings.Join(o.pgOnly, ", "), cli.Plural(len(o.pgOnly), "is", "are"), cli.Plural(len(o.pgOnly), "it", "them"))
	case pf.retries < 0 || pf.retryWait <= 0:
		return cli.Usagef("run: --retries must be 0 or more and --retry-wait positive")
	case len(o.buildSet) > 0 && !o.bulk:
		return cli.Usagef("run: %s %s how --bulk builds the indexes at the end; add --bulk, or leave %s out", strings.Join(o.buildSet, ", "), cli.Plural(len(o.buildSet), "says", "say"), cli.Plural(len(o.buildSet), "it", "them"))
	case o.build.workers < -1 || o.build.workers > 64:
		return cli.Usagef("run: --build-workers must be -1 (the server's setting) or 0 to 64")
	case pf.connections < 1 || pf.connections > 256:
		return cli.Usagef("run: --connections must be 1 to 256 (a PostgreSQL server holds about 100 by default)")
	case o.pg.timeout <= 0:
		return cli.Usagef("run: --pg-timeout must be positive")
	case pf.schema == "":
		return cli.Usagef("run: --pg-schema must not be empty")
	case cli.CheckWorkers("run", o.cfg.Workers) != nil:
		return cli.CheckWorkers("run", o.cfg.Workers)
	case o.maxBlob <= 0:
		return cli.Usagef("run: --max-blob must be positive")
	case o.cfg.UIDs && o.cfg.FromIndex:
		return cli.Usagef("run: --measurement-uid hashes each measurement's raw bytes, which --from-index does not read; leave one of them out")
	case o.cfg.UIDs && o.cfg.Format == reader.FormatAutoclaved && o.cannedLoc == "":
		return cli.Usagef("run: --measurement-uid hashes each measurement's raw bytes, which autoclaved files do not hold (they hold OONI's re-serialised JSON); name their canned form with --canned DIR")
	case o.planFile != "" && o.sink != "parquet":
		return cli.Usagef("run: --plan writes Parquet shards; load them into PostgreSQL with backfill load --sink postgres")
	}
	return o.loadScheme()
}

func runRun(ctx context.Context, args []string, std cli.Stdio) (err error) {
	cli.LimitHeap()
	o, err := parseRunFlags(args, std)
	if err != nil {
		return err
	}
	if err := o.check(); err != nil {
		return err
	}
	if ownProcess {
		cli.SpareProcs(o.cfg.Workers + 2) // the readers, and the writer and the progress line beside them
	}
	outStore, nothing, err := o.locations(ctx, std)
	if err != nil || nothing {
		return err
	}
	pg := o.pg.options(std)
	pg.CreateSchema, pg.SkipLocked, pg.Resume, pg.NoWithdraw = o.createSchema, o.skipLocked, o.cfg.Resume, o.cfg.NoWithdraw
	pg.Build = o.build.build()
	if !o.quiet {
		pg.Progress = pg.Log // the indexes a bulk load builds, one by one
	}
	out, err := openOutput(ctx, std, output.Config{Postgres: o.sink == "postgres", Folder: outStore, PG: pg, Bulk: o.bulk})
	if err != nil {
		return err
	}
	defer cli.CloseAlso(&err, out.Sink)
	sum, err := o.run(ctx, std, out, outStore)
	if ose := (*sink.OtherSourceError)(nil); errors.As(err, &ose) {
		ose.Output = out.Dest
	}
	switch {
	case errors.Is(err, context.Canceled):
		fmt.Fprintf(std.Err, "backfill: interrupted: %s committed in this run, each whole; the others are untouched.\n", cli.Count(sum.Buckets, "bucket", "buckets"))
		fmt.Fprintf(std.Err, "backfill: to finish, run: %s\n", resumeCommand(args))
	case err != nil && sum.Buckets > 0:
		// The error is printed once, by main; here what stays of the run.
		fmt.Fprintf(std.Err, "backfill: failed after %s committed in this run, each whole; the others are untouched.\n", cli.Count(sum.Buckets, "bucket", "buckets"))
		fmt.Fprintf(std.Err, "backfill: once the cause is mended, finish with: %s\n", resumeCommand(args))
	}
	if err != nil {
		return err
	}
	where := out.DeadLetters
	if len(sum.Ignored) > 0 {
		where += " and " + out.InputDead
	}
	return o.report(std, sum, where)
}

// locations opens the input, the canned input and the output, and checks
// the input before anything is created under the output. With --plan they
// are the shard's; nothing says when the shard has no bucket.
func (o *runOptions) locations(ctx context.Context, std cli.Stdio) (outStore store.Store, nothing bool, err error) {
	cfg := &o.cfg
	if o.cannedLoc != "" {
		if cfg.Canned, err = location.Open(ctx, o.cannedLoc); err != nil {
			return nil, false, err
		}
		if !store.IsDir(ctx, cfg.Canned, ".") {
			return nil, false, cli.Usagef("run: --canned %s is not a folder", o.cannedLoc)
		}
	}
	buckets := o.buckets
	if o.planFile != "" {
		_, i, names, pin, err := planShard(ctx, o.planFile, o.shard)
		if err != nil {
			return nil, false, err
		}
		jobOut, err := location.Open(ctx, o.out)
		if err != nil {
			return nil, false, err
		}
		cfg.In, buckets, outStore = pin, names, scaleout.ShardOut(jobOut, i)
		if len(buckets) == 0 {
			fmt.Fprintf(std.Err, "backfill: shard %d of %s has no bucket; nothing to do\n", i, o.planFile)
			return nil, true, nil
		}
	}
	if cfg.In == nil {
		if cfg.In, err = location.Open(ctx, o.inLoc); err != nil {
			return nil, false, cli.Usagef("run: --in %v", err)
		}
	}
	if outStore == nil && o.out != "" {
		if outStore, err = location.Open(ctx, o.out); err != nil {
			return nil, false, err
		}
	}
	in, err := ingest.ResolveInput(ctx, cfg.In, buckets)
	if ie := (*ingest.InputError)(nil); errors.As(err, &ie) && ie.Name {
		return nil, false, cli.Usagef("run: %v", err)
	} else if err != nil {
		return nil, false, inputError("run", err)
	}
	if outStore != nil && store.Inside(outStore, in.Dir) {
		return nil, false, cli.Usagef("run: --out %s is inside --in %s: the output would be read as input (and change its buckets' fingerprints); give a folder outside it", outStore.Where("."), in.Dir.Where("."))
	}
	cfg.In, cfg.Buckets, cfg.MaxBlob = in.Dir, in.Buckets, int64(o.maxBlob)
	cfg.Source = store.Identity(in.Dir.Where("."))
	if o.planFile == "" { // a plan's input records are said by plan, counted by check
		cfg.InputRecords = in.Records()
		for _, m := range in.Misnamed {
			fmt.Fprintf(std.Err, "backfill: reject: %s\n", cli.Printable(m.Say(in.Dir)))
		}
		for _, name := range in.Ignored {
			fmt.Fprintf(std.Err, "backfill: notice: %s is not a bucket folder (its name is not a date YYYY-MM-DD); skipped\n", cli.Printable(in.Dir.Where(name)))
		}
	}
	return outStore, false, nil
}

// run runs the job into out, then what completes it: a bulk load's
// indexes, a shard's manifest.
func (o *runOptions) run(ctx context.Context, std cli.Stdio, out output.Output, outStore store.Store) (job.Summary, error) {
	cfg := o.cfg
	if !o.quiet {
		fmt.Fprintf(std.Err, "backfill: %s from %s into %s\n", cli.Count(len(cfg.Buckets), "bucket", "buckets"), store.Abs(cfg.In.Where(".")), out.Dest)
		p := cli.NewProgress(std.Err)
		defer p.Finish()
		cfg.Progress = func(j job.Progress) {
			p.Update(cli.Done{Buckets: j.Buckets, BucketsTotal: j.BucketsTotal, BytesIn: j.BytesIn, BytesTotal: j.BytesTotal, Measurements: j.Measurements})
		}
	}
	start := time.Now()
	sum, err := job.Run(ctx, cfg, out.Sink)
	if err == nil && out.Finish != nil {
		err = out.Finish(ctx) // the bulk load's indexes: part of the run's time
		sum.Elapsed = time.Since(start)
	}
	if err == nil && o.planFile != "" {
		err = scaleout.WriteManifest(ctx, outStore) // the shard's reports, sorted, for check
	}
	return sum, err
}

// report prints the summary and returns the run's verdict on it.
func (o *runOptions) report(std cli.Stdio, sum job.Summary, deadLetters string) error {
	write := sum.WriteText
	if o.asJSON {
		write = sum.WriteJSON
	}
	if err := write(std.Out); err != nil {
		return fmt.Errorf("write the summary: %w", err)
	}
	warnWithdrawn(std, sum.Withdrawn)
	warnStrays(std, sum.Strays)
	switch {
	case o.planFile != "":
		// A shard that completed exits 0 whatever it recorded, so that a
		// Job does not redo it: check sums every shard's rejects.
		if sum.Rejects > 0 || sum.Notices > 0 {
			fmt.Fprintf(std.Err, "backfill: shard complete with %d rejects and %d notices recorded in %s; backfill check sums every shard's\n", sum.Rejects, sum.Notices, deadLetters)
		}
		return nil
	case sum.Rejects > 0:
		return &cli.RejectsError{N: int(sum.Rejects), What: "rejects", Note: "inputs lost, or reports and measurements left without IDs; their records, of kind reject, are in " + deadLetters, Verb: "recorded"}
	case len(sum.Strays) > 0:
		return &cli.RejectsError{N: len(sum.Strays), What: "stray files", Note: "in the output's folders, held by no committed bucket", Verb: "found"}
	case o.strict && sum.Notices > 0:
		return &cli.RejectsError{N: int(sum.Notices), What: "notices", Note: "--strict; records in " + deadLetters, Verb: "recorded"}
	}
	return nil
}

// warnStrays names each stray file a writer found in the output.
func warnStrays(std cli.Stdio, strays []string) {
	for _, f := range strays {
		fmt.Fprintf(std.Err, "backfill: stray file %s: no committed bucket holds it, and readers that glob its folder read it; move it out of the output\n", cli.Printable(f))
	}
}

// warnWithdrawn names each committed report whose IDs the run took back.
func warnWithdrawn(std cli.Stdio, ws []sink.Withdrawal) {
	if len(ws) == 0 {
		return
	}
	var n int64
	for _, w := range ws {
		n += int64(w.N)
	}
	fmt.Fprintf(std.Err, "backfill: warning: published IDs withdrawn: %s committed before this run lost %d IDs (--no-withdraw refuses instead):\n",
		cli.Count(len(ws), "report", "reports"), n)
	for _, w := range ws {
		fmt.Fprintf(std.Err, "backfill:   %s\n", cli.Printable(w.Says()))
	}
}

// progName is the program as it was invoked (bin/backfill, say), for the
// command lines a command prints; main sets it.
var progName = "backfill"

// resumeCommand is the command line that finishes an interrupted run. A
// password in --dsn is left out of it (and the line says so): a command
// line that is printed is read by others, and kept in logs.
func resumeCommand(args []string) string {
	parts := []string{cli.ShellQuote(progName), "run"}
	resume, hidden := false, false
	dsnNext := false
	for _, a := range args {
		if a == "--resume" || a == "-resume" || strings.HasPrefix(a, "--resume=") || strings.HasPrefix(a, "-resume=") {
			resume = true
		}
		switch {
		case dsnNext:
			var h bool
			a, h = pgnet.WithoutPassword(a)
			hidden = hidden || h
		case strings.HasPrefix(a, "--dsn=") || strings.HasPrefix(a, "-dsn="):
			flag, v, _ := strings.Cut(a, "=")
			v, h := pgnet.WithoutPassword(v)
			a, hidden = flag+"="+v, hidden || h
		}
		dsnNext = a == "--dsn" || a == "-dsn"
		parts = append(parts, cli.ShellQuote(a))
	}
	if !resume {
		parts = append(parts[:2], append([]string{"--resume"}, parts[2:]...)...)
	}
	line := strings.Join(parts, " ")
	if hidden {
		line += "\nbackfill: (the password is left out of --dsn: give it in PGPASSWORD or a .pgpass file)"
	}
	return line
}

// openOutput opens the output, saying what a run that died had left in it.
func openOutput(ctx context.Context, std cli.Stdio, cfg output.Config) (output.Output, error) {
	o, err := output.Open(ctx, cfg)
	if err == nil && o.Cleared > 0 {
		fmt.Fprintf(std.Err, "backfill: removed %s that a run that died left in %s\n",
			cli.Count(o.Cleared, "unfinished file", "unfinished files"), o.ClearedFrom)
	}
	return o, err
}
