package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/backfill-dev/backfill/internal/cli"
	"github.com/backfill-dev/backfill/internal/store/location"
	"github.com/backfill-dev/backfill/pipeline/ooid"
	"github.com/backfill-dev/backfill/pipeline/verify"
)

const verifyHelp = `Usage: backfill verify [--scheme FILE] [--json] [-q] OUT

Prove, from the output OUT of backfill run alone (a Parquet output folder,
a path or s3://bucket/prefix), that its IDs are right, and print a digest
of them that can be published beside the data:

  - every measurement row's ID is the one the scheme the output records
    gives its textname and ndx (a keyed scheme's keys come from its scheme
    file, --scheme);
  - every kept report has one row for each of its measurements 0..n-1 and
    no other; a rejected report has none;
  - every report's verdict is the one the collision rule gives over the
    whole output: a report loses to the first-sorting report whose IDs
    overlap its own, and only then. With the rows checked, no ID is given
    twice: the IDs of every report go into one sharded bitmap of the whole
    output, which finds any two that overlap.

It reads the committed buckets of the ledger, in order, one at a time,
and stops at the first thing wrong, naming the bucket's file, the row
(from 0, in the file's order) or the report, and what is wrong.

The digest of a bucket is the SHA-256 of its IDs written as 16 lowercase
hex digits a line, sorted; the digest of the output is the SHA-256 of the
lines "BUCKET DIGEST" in bucket order. Anyone can recompute them, e.g.
with DuckDB:

	duckdb -noheader -list -c "SELECT printf('%016x', ooid) FROM
	  'OUT/measurements/2017-06-01.parquet' ORDER BY ooid" | sha256sum

It takes no lock: verify an output no run is writing.

Flags:

	--scheme FILE   the scheme file of a keyed scheme (backfill keysearch
	                writes them); the output records the key table's name
	--json          one JSON object: the scheme, each bucket's counts and
	                digest, the totals and the output's digest
	-q              no progress output

EXIT STATUS

	0    verified: the digests are printed
	1    failure: the first row or report that fails is named, or the
	     output cannot be read
	2    usage error
`

func runVerify(ctx context.Context, args []string, std cli.Stdio) error {
	fs := cli.NewFlagSet("verify", verifyHelp, std)
	schemeFile := fs.String("scheme", "", "")
	asJSON := fs.Bool("json", false, "")
	quiet := fs.Bool("q", false, "")
	rest, err := cli.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return cli.Usagef("verify: name one output folder")
	}
	var keyed *ooid.Scheme
	if *schemeFile != "" {
		s, err := ooid.LoadScheme(*schemeFile)
		if err != nil {
			return cli.Usagef("verify: --scheme: %v", err)
		}
		keyed = &s
	}
	st, err := location.Open(ctx, rest[0])
	if err != nil {
		return err
	}
	var done func(verify.Bucket)
	if !*quiet {
		p, n := cli.NewLines(std.Err), 0
		defer p.Finish()
		done = func(b verify.Bucket) {
			n++
			p.Update(fmt.Sprintf("backfill: verify: %d buckets verified, the last %s", n, b.Date))
		}
	}
	res, err := verify.Run(ctx, &verify.Parquet{St: st}, keyed, done)
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	if *asJSON {
		return json.NewEncoder(std.Out).Encode(res)
	}
	for _, b := range res.Buckets {
		fmt.Fprintf(std.Out, "%s  %d reports (%d rejected)  %d measurements  sha256:%s\n", b.Date, b.Reports, b.Rejected, b.Measurements, b.Digest)
	}
	fmt.Fprintf(std.Out, "output      %d buckets, %d reports (%d rejected), %d measurements under %s\ndigest      sha256:%s\n",
		len(res.Buckets), res.Reports, res.Rejected, res.Measurements, res.Scheme, res.Digest)
	return nil
}
