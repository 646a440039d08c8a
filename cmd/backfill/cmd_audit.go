package main

import (
	"context"
	"encoding/json"
	"flag"
	"runtime"

	"github.com/backfill-dev/backfill/internal/cli"
	"github.com/backfill-dev/backfill/pipeline/audit"
	"github.com/backfill-dev/backfill/pipeline/collisions"
	"github.com/backfill-dev/backfill/pipeline/ooid"
	"github.com/backfill-dev/backfill/pipeline/sink/pgcopy"
)

// keepPairs is how many pairs per scheme the auditor keeps, so the pairs
// listed are the first by textname whenever there are no more than that.
const keepPairs = 1000

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
	a, err := collisions.NewSchemeAuditor(schemes, max(pairs, keepPairs))
	if err != nil {
		return cli.Usagef("audit: %v", err)
	}
	in.read.Workers = workers
	src := in.source("audit", std.Err)
	au := &audit.Auditor{A: a, Src: src, KeepNames: !audit.AllFiles(inputs), Reread: audit.RereadFiles(inputs)}
	pg, err := in.openPostgres(ctx, std)
	if err != nil {
		return err
	}
	if pg != nil {
		defer cli.CloseAlso(&err, pg) // au.Reread reads it again
	}
	if err := readAudit(ctx, std, pg, au, inputs, workers); err != nil {
		return err
	}
	results := a.Finish()
	names, err := au.Names(results)
	if err != nil {
		return err
	}
	rep := audit.Report{Reports: a.Reports, Measurements: a.Measurements, Rejected: src.Rejected}
	for _, r := range results {
		rep.Results = append(rep.Results, audit.NewResult(r, names, pairs, predict))
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
	if rep.Rejected > 0 {
		return &cli.RejectsError{N: int(rep.Rejected), What: "inputs"}
	}
	return nil
}

// readAudit feeds the auditor every report of the inputs, and of the
// PostgreSQL schema s when there is one.
func readAudit(ctx context.Context, std cli.Stdio, s *pgcopy.Sink, au *audit.Auditor, inputs []string, workers int) error {
	if s != nil {
		files := au.Reread
		au.Reread = func(fn func([]byte)) error {
			if err := s.EachReport(ctx, func(textname []byte, _ uint32) error { fn(textname); return nil }); err != nil {
				return err
			}
			return files(fn)
		}
		if err := au.Src.Postgres(ctx, s, au.Add); err != nil {
			return err
		}
	}
	for _, input := range inputs {
		var err error
		if au.KeepNames {
			err = eachReport(ctx, au.Src, "audit", input, std.In, au.Add)
		} else {
			err = au.ReadManifestFile(input, workers) // parsed and hashed on every worker
		}
		if err != nil {
			return err
		}
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
