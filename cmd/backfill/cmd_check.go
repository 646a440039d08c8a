package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/backfill-dev/backfill/internal/cli"
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

func runCheck(ctx context.Context, args []string, std cli.Stdio) error {
	fs := cli.NewFlagSet("check", checkHelp, std)
	var planFile, out string
	var asJSON, strict bool
	fs.StringVar(&planFile, "plan", "", "")
	fs.StringVar(&out, "out", "", "")
	fs.BoolVar(&asJSON, "json", false, "")
	fs.BoolVar(&strict, "strict", false, "")
	rejectsExit := cli.ExitRejects
	fs.IntVar(&rejectsExit, "rejects-exit", cli.ExitRejects, "")
	rest, err := cli.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(rest) > 0:
		return cli.Usagef("check: unexpected argument %q", rest[0])
	case rejectsExit != cli.ExitRejects && rejectsExit != cli.ExitOK:
		return cli.Usagef("check: --rejects-exit must be 3 or 0")
	case planFile == "" || out == "":
		return cli.Usagef("check: --plan and --out are required")
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
		return cli.Usagef("check: %v", err)
	} else if err != nil {
		return err
	}
	write := sum.WriteText
	if asJSON {
		write = sum.WriteJSON
	}
	if err := write(std.Out); err != nil {
		return fmt.Errorf("write the summary: %w", err)
	}
	records := dst.Where("shards") + "/*/dead-letters/"
	if len(p.InputRecords) > 0 {
		records += " and the plan"
	}
	switch t := sum.Totals; {
	case rejectsExit == cli.ExitOK:
		return nil
	case t.Rejects > 0:
		return &cli.RejectsError{N: int(t.Rejects), What: "inputs", Note: "of the corpus; reject records in " + records}
	case strict && t.Notices > 0:
		return &cli.RejectsError{N: int(t.Notices), What: "notices", Note: "of the corpus, --strict; records in " + records, Verb: "recorded"}
	}
	return nil
}

// isOrder tells a phase run out of order (exit 2: a Job does not retry it).
func isOrder(err error) bool {
	var oe *scaleout.OrderError
	return errors.As(err, &oe)
}
