package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/backfill-dev/backfill/internal/cli"
	"github.com/backfill-dev/backfill/internal/store/location"
	"github.com/backfill-dev/backfill/pipeline/scaleout"
)

func runCheck(ctx context.Context, args []string, std cli.Stdio) error {
	fs := newFlags("check", std)
	var planFile, out string
	var asJSON, strict bool
	fs.StringVar(&planFile, "plan", "", "the plan `FILE` of backfill plan (a path or an s3:// URL)")
	fs.StringVar(&out, "out", "", "the job's output `OUT`, as given to the shards' runs")
	fs.BoolVar(&asJSON, "json", false, "print the summary as one JSON object")
	fs.BoolVar(&strict, "strict", false, "exit 3 for notices too, not only for rejects")
	rejectsExit := cli.ExitRejects
	fs.IntVar(&rejectsExit, "rejects-exit", cli.ExitRejects, "the exit status `N` when the corpus has rejects: 3, or 0 in a Kubernetes Job, which retries a pod that exits otherwise; the summary says them")
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
		return &cli.RejectsError{N: int(t.Rejects), What: "rejects", Note: "of the corpus: inputs lost, or reports and measurements left without IDs; their records, of kind reject, are in " + records, Verb: "recorded"}
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
