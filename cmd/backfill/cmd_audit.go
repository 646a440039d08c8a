package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"runtime"
	"sort"
	"strconv"
	"strings"

	"github.com/backfill-dev/backfill/internal/cli"
	"github.com/backfill-dev/backfill/pipeline/audit"
	"github.com/backfill-dev/backfill/pipeline/collisions"
	"github.com/backfill-dev/backfill/pipeline/ooid"
	"github.com/backfill-dev/backfill/pipeline/sink/pgcopy"
)

const auditHelp = `Usage: backfill audit [flags] INPUT...
       backfill audit --sink postgres [--dsn URL] [--pg-schema NAME] [flags]

Count the OOID collisions of a corpus before loading it: for each counter
width and SHA-1 offset asked for, the number of report pairs whose IDs
overlap, the measurements of the reports involved, and the first pairs.
Collisions are found exactly, never estimated.

An INPUT is one of:

	FILE        a report manifest: TEXTNAME<TAB>N lines ("-" for stdin),
	            as backfill gen --profile ooni2018 --manifest-only writes
	DIR         the output folder of backfill run: its report manifests
	            (reports/*.parquet, rejected reports included)
	DIR         a folder of bucket folders (canned or autoclaved), or one
	            bucket folder: the reports are read and their
	            measurements counted as backfill run does; with
	            --from-index, autoclaved buckets are counted from their
	            index alone, which reads no data

With --sink postgres, the report manifests of the committed buckets of a
PostgreSQL schema that backfill run loaded (rejected reports included),
as from a Parquet output folder.

Flags:

	--counter-bits LIST   counter widths: N, N..M or N,M,... in 20..28
	                      (default 28)
	--sha1-offset LIST    SHA-1 hex window offsets: N, N..M, N,M,... in
	                      0..33, or all (default 33); --offsets is the same
	--scheme FILE         audit the scheme of a scheme file (backfill
	                      keysearch writes them) instead of the widths
	                      and offsets above
	--pairs N             pairs to list per result (default 10); the counts
	                      are never cut
	--predict             print beside each result the probability of no
	                      collision that the ooid-hash-prob notebook's model
	                      predicts from the corpus's shared timestamps
	--json                one JSON object on stdout
	--workers N           goroutines hashing a manifest, or containers
	                      read at once for bucket folders (default: the
	                      number of CPUs)
	--sink postgres       read the reports of a PostgreSQL schema
	--dsn URL             PostgreSQL connection string; the PG* environment
	                      variables fill in what it leaves out
	--pg-schema NAME      schema of the tables (default ` + pgcopy.DefaultSchema + `)
	--format F            bucket layout: auto (default), canned or autoclaved
	--from-index          autoclaved buckets: count from the index alone
	--ndx POLICY          blobs (default) or datums, as for backfill run

One scheme is checked with the sharded bitmap backfill run uses; several are
checked in one pass that hashes each textname once. Manifest files and
PostgreSQL are read twice (the second time to name the pairs), so memory
does not hold the textnames; other inputs keep them. A manifest file is
parsed and hashed on every worker.

Examples:

	backfill gen --profile ooni2018 --manifest-only --out corpus.tsv
	backfill audit --predict corpus.tsv
	backfill audit --counter-bits 20..28 --offsets all --json corpus.tsv
	backfill audit out/

EXIT STATUS

	0    audited; every input line or report was taken
	1    failure
	2    usage error
	3    audited, but some inputs were rejected (listed on stderr)
`

type auditResult struct {
	CounterBits  int           `json:"counter_bits"`
	SHA1Offset   int           `json:"sha1_offset"`
	KeyTable     string        `json:"key_table,omitempty"`
	Pairs        int64         `json:"colliding_pairs"`
	Measurements int64         `json:"measurements_involved"`
	First        []auditPair   `json:"pairs"`
	Predicted    *auditPredict `json:"predicted,omitempty"`
}

type auditPair struct {
	A string `json:"a"`
	B string `json:"b"`
}

type auditPredict struct {
	P       float64 `json:"p_no_collision"`
	NegLog2 float64 `json:"neg_log2_p"`
}

type auditOutput struct {
	Reports      int64         `json:"reports"`
	Measurements int64         `json:"measurements"`
	Rejected     int64         `json:"rejected"`
	Results      []auditResult `json:"results"`
}

// keepPairs is how many pairs per scheme the auditor keeps, so the pairs
// listed are the first by textname whenever there are no more than that.
const keepPairs = 1000

func runAudit(ctx context.Context, args []string, std cli.Stdio) error {
	fs := cli.NewFlagSet("audit", auditHelp, std)
	bitsArg, offArg := "28", "33"
	var pairs, workers int
	var predict, asJSON bool
	fs.StringVar(&bitsArg, "counter-bits", bitsArg, "")
	fs.StringVar(&offArg, "sha1-offset", offArg, "")
	fs.StringVar(&offArg, "offsets", offArg, "")
	fs.IntVar(&pairs, "pairs", 10, "")
	fs.BoolVar(&predict, "predict", false, "")
	fs.BoolVar(&asJSON, "json", false, "")
	fs.IntVar(&workers, "workers", runtime.NumCPU(), "")
	var in inputFlags
	in.register(fs)
	var schemePath string
	fs.StringVar(&schemePath, "scheme", "", "")
	inputs, err := cli.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if err := in.check(fs, inputs); err != nil {
		return err
	}
	if pairs < 0 || workers < 1 {
		return cli.Usagef("audit: --pairs must be 0 or more and --workers 1 or more")
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
		defer pg.Close() // au.Reread reads it again
	}
	if err := readAudit(ctx, std, pg, au, inputs, workers); err != nil {
		return err
	}
	results := a.Finish()
	names, err := au.Names(results)
	if err != nil {
		return err
	}
	rep := auditOutput{Reports: a.Reports, Measurements: a.Measurements, Rejected: src.Rejected}
	for _, r := range results {
		rep.Results = append(rep.Results, newAuditResult(r, names, pairs, predict))
	}
	return reportAudit(std, rep, asJSON, predict)
}

// reportAudit prints the report, as JSON or as text, and says how many
// inputs were rejected.
func reportAudit(std cli.Stdio, rep auditOutput, asJSON, predict bool) error {
	if asJSON {
		enc := json.NewEncoder(std.Out)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		printAudit(std.Out, rep, predict)
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

// newAuditResult is one scheme's result as audit prints it: its first
// pairs by name, in order, at most pairs of them.
func newAuditResult(r collisions.Result, names map[uint32]string, pairs int, predict bool) auditResult {
	ar := auditResult{CounterBits: r.Scheme.CounterBits, SHA1Offset: r.Scheme.SHA1Offset, KeyTable: r.Scheme.Table,
		Pairs: r.Pairs, Measurements: r.Measurements, First: []auditPair{}}
	for _, p := range r.First {
		x, y := names[p.A], names[p.B]
		if y < x {
			x, y = y, x
		}
		ar.First = append(ar.First, auditPair{x, y})
	}
	sort.Slice(ar.First, func(i, j int) bool {
		if ar.First[i].A != ar.First[j].A {
			return ar.First[i].A < ar.First[j].A
		}
		return ar.First[i].B < ar.First[j].B
	})
	ar.First = ar.First[:min(len(ar.First), pairs)]
	if predict {
		l := collisions.Predict(r.Groups, r.Scheme.CounterBits)
		ar.Predicted = &auditPredict{P: math.Exp2(l), NegLog2: -l}
	}
	return ar
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
	bits, err := intList(bitsArg, ooid.MinCounterBits, ooid.MaxCounterBits)
	if err != nil {
		return nil, cli.Usagef("audit: --counter-bits: %v", err)
	}
	offsets, err := intList(offArg, 0, ooid.MaxSHA1Offset)
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

// intList parses N, N..M or N,M,... (or "all": lo..hi).
func intList(s string, lo, hi int) ([]int, error) {
	if s == "all" {
		s = fmt.Sprintf("%d..%d", lo, hi)
	}
	var out []int
	for _, part := range strings.Split(s, ",") {
		a, b, isRange := strings.Cut(part, "..")
		x, err := strconv.Atoi(a)
		if err != nil {
			return nil, fmt.Errorf("%q is not a number", a)
		}
		y := x
		if isRange {
			if y, err = strconv.Atoi(b); err != nil {
				return nil, fmt.Errorf("%q is not a number", b)
			}
		}
		if x < lo || y > hi || x > y {
			return nil, fmt.Errorf("%q: want values in %d..%d", part, lo, hi)
		}
		for v := x; v <= y; v++ {
			out = append(out, v)
		}
	}
	return out, nil
}

// offset is the offset column: the SHA-1 window's offset, or "keyed".
func (r auditResult) offset() string {
	if r.KeyTable != "" {
		return "keyed"
	}
	return strconv.Itoa(r.SHA1Offset)
}

func (r auditResult) name() string {
	if r.KeyTable != "" {
		return "key table " + r.KeyTable
	}
	return fmt.Sprintf("offset %d", r.SHA1Offset)
}

func printAudit(w io.Writer, rep auditOutput, predict bool) {
	fmt.Fprintf(w, "reports        %d\nmeasurements   %d\n", rep.Reports, rep.Measurements)
	if rep.Rejected > 0 {
		fmt.Fprintf(w, "rejected       %d (listed on stderr)\n", rep.Rejected)
	}
	fmt.Fprintln(w)
	header := "bits  offset  colliding pairs  measurements involved"
	if predict {
		header += "  predicted P(no collision)  -log2 P"
	}
	fmt.Fprintln(w, header)
	for _, r := range rep.Results {
		fmt.Fprintf(w, "%4d  %6s  %15d  %21d", r.CounterBits, r.offset(), r.Pairs, r.Measurements)
		if r.Predicted != nil {
			fmt.Fprintf(w, "  %25.3g  %7.2f", r.Predicted.P, r.Predicted.NegLog2)
		}
		fmt.Fprintln(w)
	}
	for _, r := range rep.Results {
		if len(r.First) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%d bits, %s: %s", r.CounterBits, r.name(), cli.Count(r.Pairs, "colliding pair", "colliding pairs"))
		if int64(len(r.First)) < r.Pairs {
			fmt.Fprintf(w, " (the first %d)", len(r.First))
		}
		fmt.Fprintln(w)
		for i, p := range r.First {
			if i > 0 {
				fmt.Fprintln(w)
			}
			fmt.Fprintf(w, "  %s\n  %s\n", p.A, p.B)
		}
	}
}
