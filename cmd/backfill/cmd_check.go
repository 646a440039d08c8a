package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/backfill-dev/backfill/internal/store/location"
	"github.com/backfill-dev/backfill/pipeline/scaleout"
)

const checkHelp = `Usage: backfill check --plan FILE --out OUT [--json] [--strict]

Settle the collision verdicts of a corpus stamped in shards (backfill run
--plan FILE --out OUT, each shard in OUT/shards/I): merge every shard's
report manifest by time, a streaming k-way merge that holds one timestamp's
reports at a time, and apply the policy of a single run to them. It writes
OUT/verdicts.jsonl, the reports whose verdict differs from their shard's,
and prints the buckets whose rows change; backfill load applies them.

Every shard must have committed every bucket the plan gives it.

Check is where the corpus's rejects are met: the shards exit 0 whatever
they recorded, and check prints the rejects and notices of every shard
summed by reason, the collisions as the settled verdicts count them: the
figures one run over the whole corpus prints. The records are in each
shard's dead-letters/ and, after load, in OUT/dead-letters/.

Flags:

	--plan FILE    the plan of backfill plan (a path or an s3:// URL)
	--out OUT      the job's output, as given to the shards' runs
	--json         print the summary as one JSON object
	--strict       exit 3 for notices too, not only for rejects
	--rejects-exit N  the exit status when the corpus has rejects:
	               3 (default), or 0 in a Kubernetes Job, which retries
	               a pod that exits otherwise; the summary says them

EXIT STATUS

	0    the verdicts were written; no reject in the corpus
	1    failure (the store; a manifest unreadable or incomplete)
	2    usage error, or a shard's map has not completed: run it first
	3    the verdicts were written; the corpus has rejects (with
	     --strict: or notices)
`

const loadHelp = `Usage: backfill load --plan FILE --out OUT [--shard I]
       backfill load --plan FILE --out OUT --sink postgres [--dsn URL] [--pg-schema NAME] [--create-schema] [--shard I]

Load the buckets of one shard of a plan into the job's output OUT, once
backfill check has written OUT/verdicts.jsonl: each bucket's files are
copied from OUT/shards/I (the ledger entry last), and the buckets whose
verdicts changed are rewritten with them, as a single run would have
written them. The shard is --shard, or JOB_COMPLETION_INDEX as a
Kubernetes Indexed Job sets it. Loading a shard again gives the same
files; shards load side by side, each under its own lock.

With --sink postgres, each bucket of the shard is loaded from
OUT/shards/I into PostgreSQL in its own transaction, as run --sink
postgres loads it: the database settles the verdicts across buckets and
shards itself (check is not needed), and the tables end as a one-machine
run leaves them.

Flags:

	--plan FILE    the plan of backfill plan
	--out OUT      the job's output (a folder or s3://bucket/prefix)
	--shard I      the shard to load (default: JOB_COMPLETION_INDEX)
	--sink NAME    parquet (default: into OUT) or postgres
	--dsn URL      PostgreSQL connection string (the PG* variables fill in
	               what it leaves out)
	--pg-schema NAME  schema of the tables (default backfill)
	--create-schema   create the tables when they are missing
	--retries N    tries again per bucket after a lost connection (default 5)
	--retry-wait D first wait before a retry (default 1s)
	--connections N   buckets loaded at once (default 2)

EXIT STATUS

	0    the shard was loaded (the corpus's rejects are check's to report)
	1    failure (the store, the database): running it again may mend it
	2    usage error, or a phase out of order: the shard's map, or check,
	     has not completed; running it again does not mend that
`

func runCheck(ctx context.Context, args []string, std stdio) error {
	fs := newFlagSet("check", checkHelp, std)
	var planFile, out string
	var asJSON, strict bool
	fs.StringVar(&planFile, "plan", "", "")
	fs.StringVar(&out, "out", "", "")
	fs.BoolVar(&asJSON, "json", false, "")
	fs.BoolVar(&strict, "strict", false, "")
	rejectsExit := exitRejects
	fs.IntVar(&rejectsExit, "rejects-exit", exitRejects, "")
	rest, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(rest) > 0:
		return usagef("check: unexpected argument %q", rest[0])
	case rejectsExit != exitRejects && rejectsExit != exitOK:
		return usagef("check: --rejects-exit must be 3 or 0")
	case planFile == "" || out == "":
		return usagef("check: --plan and --out are required")
	}
	p, err := readPlan(ctx, "check", planFile)
	if err != nil {
		return err
	}
	dst, err := location.Open(ctx, out)
	if err != nil {
		return err
	}
	sum, err := scaleout.Check(ctx, p, dst)
	if isOrder(err) {
		return usagef("check: %v", err)
	} else if err != nil {
		return err
	}
	if asJSON {
		b, _ := json.Marshal(sum)
		fmt.Fprintf(std.out, "%s\n", b)
	} else {
		st := sum.Stats
		fmt.Fprintf(std.out, "manifests      %d\nreports        %d\nshared ts      %d (largest group %d)\nrejected       %d\nchanged        %d verdicts, in %d buckets\n",
			st.Manifests, st.Reports, st.Groups, st.Largest, st.Rejected, st.Changed, len(sum.Buckets))
		for _, b := range sum.Buckets {
			fmt.Fprintf(std.out, "  %s\n", b)
		}
		fmt.Fprintf(std.out, "measurements   %d\n", sum.Totals.Measurements)
		printRejects(std.out, sum.Totals)
	}
	records := dst.Where("shards") + "/*/dead-letters/"
	switch t := sum.Totals; {
	case rejectsExit == exitOK:
		return nil
	case t.Rejects > 0:
		return &rejectsError{n: int(t.Rejects), what: "inputs of the corpus (reject records in " + records + ")"}
	case strict && t.Notices > 0:
		return &rejectsError{n: int(t.Notices), what: "notices in the corpus (--strict; records in " + records + ")", verb: "recorded"}
	}
	return nil
}

func runLoad(ctx context.Context, args []string, std stdio) error {
	fs := newFlagSet("load", loadHelp, std)
	var planFile, out, sinkName string
	var createSchema bool
	var pf pgFlags
	pf.register(fs, true)
	shard := -1
	fs.StringVar(&planFile, "plan", "", "")
	fs.StringVar(&out, "out", "", "")
	fs.StringVar(&sinkName, "sink", "parquet", "")
	fs.BoolVar(&createSchema, "create-schema", false, "")
	fs.IntVar(&shard, "shard", -1, "")
	rest, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	pgOnly := setFlags(fs, "dsn", "pg-schema", "create-schema", "retries", "retry-wait", "connections")
	switch {
	case len(rest) > 0:
		return usagef("load: unexpected argument %q", rest[0])
	case planFile == "" || out == "":
		return usagef("load: --plan and --out are required")
	case sinkName != "parquet" && sinkName != "postgres":
		return usagef("load: --sink must be parquet or postgres")
	case sinkName == "parquet" && len(pgOnly) > 0:
		return usagef("load: %s %s for --sink postgres; add --sink postgres, or leave %s out", strings.Join(pgOnly, ", "), isAre(len(pgOnly)), itThem(len(pgOnly)))
	case pf.connections < 1:
		return usagef("load: --connections must be 1 or more")
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
		src := scaleout.ShardOut(dst, shard)
		if len(p.Names(shard)) == 0 {
			fmt.Fprintf(std.err, "backfill: shard %d of %s has no bucket; nothing to do\n", shard, planFile)
			return nil
		}
		if err := scaleout.Mapped(ctx, src, shard); isOrder(err) {
			return usagef("load: %v", err)
		} else if err != nil {
			return err
		}
		o, err := openOutput(ctx, std, outputFlags{sink: sinkName, pg: pf, createSchema: createSchema})
		if err != nil {
			return err
		}
		defer o.sink.Close()
		if err := scaleout.LoadInto(ctx, src, p.Names(shard), o.sink); err != nil {
			return err
		}
		fmt.Fprintf(std.err, "backfill: loaded %d buckets of %s into %s\n", len(p.Names(shard)), src.Where("."), o.dest)
		return nil
	}
	n, err := scaleout.Load(ctx, p, shard, dst)
	if isOrder(err) {
		return usagef("load: %v", err)
	} else if err != nil {
		return err
	}
	fmt.Fprintf(std.err, "backfill: loaded shard %d: %d buckets into %s\n", shard, n, out)
	return nil
}

// isOrder tells a phase run out of order (exit 2: a Job does not retry it).
func isOrder(err error) bool {
	var oe *scaleout.OrderError
	return errors.As(err, &oe)
}
