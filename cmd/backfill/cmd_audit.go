package main

import (
	"context"
	"encoding/json"
	"flag"
	"runtime"

	"github.com/backfill-dev/backfill/internal/cli"
	"github.com/backfill-dev/backfill/internal/store/location"
	"github.com/backfill-dev/backfill/pipeline/audit"
	"github.com/backfill-dev/backfill/pipeline/ooid"
)

func runAudit(ctx context.Context, args []string, std cli.Stdio) (err error) {
	fs := newFlags("audit", std)
	bitsArg, offArg := "28", "33"
	var pairs, workers int
	var predict, asJSON bool
	fs.StringVar(&bitsArg, "counter-bits", bitsArg, "counter widths `LIST`: N, N..M or N,M,... in 20..28")
	fs.StringVar(&offArg, "sha1-offset", offArg, "SHA-1 hex window offsets `LIST`: N, N..M, N,M,... in 0..33, or all (--offsets is the same flag)")
	fs.StringVar(&offArg, "offsets", offArg, "")
	fs.IntVar(&pairs, "pairs", 10, "`N` pairs to list per result; the counts are never cut")
	fs.BoolVar(&predict, "predict", false, "print beside each result the probability of no collision that the ooid-hash-prob notebook's model predicts from the corpus's shared timestamps")
	fs.BoolVar(&asJSON, "json", false, "one JSON object on stdout")
	fs.Bool("q", false, "no progress output (audit writes none: taken as every command takes it)")
	fs.IntVar(&workers, "workers", runtime.NumCPU(), "`N` goroutines hashing a manifest, or containers read at once for bucket folders (default: the number of CPUs)")
	var in inputFlags
	in.register(fs)
	var schemePath string
	fs.StringVar(&schemePath, "scheme", "", "audit the scheme of the scheme `FILE` (backfill keysearch writes them) instead of widths and offsets")
	inputs, err := cli.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if err := in.check(fs, inputs); err != nil {
		return err
	}
	if err := cli.CheckWorkers("audit", workers); err != nil {
		return err
	}
	if pairs < 0 {
		return cli.Usagef("audit: --pairs must be 0 or more")
	}
	schemes, err := auditSchemes(fs, bitsArg, offArg, schemePath)
	if err != nil {
		return err
	}
	in.read.Workers = workers
	pg, err := in.openPostgres(ctx, std)
	if err != nil {
		return err
	}
	if pg != nil {
		defer cli.CloseAlso(&err, pg) // the audit reads it again to name pairs
	}
	a, err := audit.New(audit.Job{Schemes: schemes, Pairs: pairs, Predict: predict, Workers: workers,
		Src: in.source("audit", std.Err), In: audit.Inputs{Names: inputs, Stdin: std.In, Open: location.Open, PG: pg}})
	if err != nil {
		return cli.Usagef("audit: %v", err)
	}
	rep, err := a.Run(ctx)
	if err != nil {
		return inputUsage("audit", err)
	}
	return reportAudit(std, rep, asJSON, predict)
}

// reportAudit prints the report, as JSON or as text, and says how many
// inputs were rejected.
func reportAudit(std cli.Stdio, rep audit.Report, asJSON, predict bool) error {
	if asJSON {
		enc := json.NewEncoder(std.Out)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		rep.WriteText(std.Out, predict)
	}
	if rep.Rejects > 0 {
		return &cli.RejectsError{N: int(rep.Rejects), What: "rejects", Note: "inputs lost, listed above", Verb: "found"}
	}
	return nil
}

// auditSchemes returns the schemes to audit: every combination of the
// widths and offsets, or the one of a scheme file.
func auditSchemes(fs *flag.FlagSet, bitsArg, offArg, schemePath string) ([]ooid.Scheme, error) {
	if schemePath != "" {
		if len(cli.SetFlags(fs, "counter-bits", "sha1-offset", "offsets")) > 0 {
			return nil, cli.Usagef("audit: --scheme names one scheme: drop --counter-bits and --sha1-offset")
		}
		s, err := ooid.LoadScheme(schemePath)
		if err != nil {
			return nil, cli.Usagef("audit: --scheme: %v", err)
		}
		return []ooid.Scheme{s}, nil
	}
	bits, err := audit.IntList(bitsArg, ooid.MinCounterBits, ooid.MaxCounterBits)
	if err != nil {
		return nil, cli.Usagef("audit: --counter-bits: %v", err)
	}
	offsets, err := audit.IntList(offArg, 0, ooid.MaxSHA1Offset)
	if err != nil {
		return nil, cli.Usagef("audit: --sha1-offset: %v", err)
	}
	var out []ooid.Scheme
	for _, b := range bits {
		for _, o := range offsets {
			out = append(out, ooid.Scheme{CounterBits: b, SHA1Offset: o})
		}
	}
	return out, nil
}
