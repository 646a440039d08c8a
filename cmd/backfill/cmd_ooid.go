package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"

	"github.com/backfill-dev/backfill/internal/cli"
	"github.com/backfill-dev/backfill/pipeline/ooid"
	"github.com/backfill-dev/backfill/pipeline/ooidlines"
)

const ooidHelp = `Usage: backfill ooid [--counter-bits N] [--sha1-offset N | --scheme FILE] TEXTNAME [NDX...]
       backfill ooid [--counter-bits N] [--sha1-offset N | --scheme FILE] -

Compute backfilled OOIDs (32 bits ts : 4 bits 0xF : counter) for the
measurements of a report, identified by the report's textname
"YYYY-MM-DD/<basename>" and the 0-based measurement index NDX.

With TEXTNAME, print one OOID per NDX (NDX defaults to 0), one per line.

With "-", read lines "TEXTNAME" or "TEXTNAME<TAB>NDX" from standard input
and write "OOID<TAB>TEXTNAME<TAB>NDX" lines to standard output, in input
order, streaming in constant memory. A bad line (bad textname, bad NDX,
extra fields, longer than 64 KiB) is reported on standard error with its
line number and reason; the other lines are still processed.

The ts comes from the textname: the report_id timestamp when there is one,
else the filename timestamp; textnames outside the ooni-uuid grammar but
inside the canning grammar use the filename timestamp. The counter is
(int(sha1(TEXTNAME).hexdigest()[off:off+7], 16) + NDX) mod 2^bits, or
under a keyed scheme (SipHash-2-4(key of ts, TEXTNAME) + NDX) mod 2^bits.

Flags:

	--counter-bits N   counter width, 20..28 (default 28); with fewer bits
	                   the bits between counter and nibble are zero
	--sha1-offset N    first hex digit of the 7-digit SHA-1 window, 0..33
	                   (default 33, the last 7 digits)
	--scheme FILE      the scheme of a scheme file (backfill keysearch
	                   writes them) instead of the two flags above

Changing either flag gives another ID scheme: record it with the output.
NDX must be below 2^bits: a larger one would repeat another NDX's OOID.

Examples:

	backfill ooid 2012-12-05/20121205T071421Z-MM-AS18399-http_invalid_request_line-no_report_id-0.1.0-probe.yaml 0 1
	  50bef44df29c69e2
	  50bef44df29c69e3
	cut -f1,2 measurements.tsv | backfill ooid - > ooids.tsv

EXIT STATUS

	0    every OOID printed
	1    failure (e.g. standard output closed)
	2    usage error
	3    some textnames, NDX values or lines were rejected
	130  interrupted
`

// schemeFlags adds --counter-bits, --sha1-offset and --scheme FILE to fs.
// After parsing, the returned function sets *s from them and checks it:
// a scheme file replaces the other two, which may then not be given.
func schemeFlags(fs *flag.FlagSet, s *ooid.Scheme) func() error {
	fs.IntVar(&s.CounterBits, "counter-bits", ooid.DefaultCounterBits, "counter width `N`, 20..28")
	fs.IntVar(&s.SHA1Offset, "sha1-offset", ooid.DefaultSHA1Offset, "SHA-1 hex window offset `N`, 0..33")
	var path string
	fs.StringVar(&path, "scheme", "", "scheme file `FILE`, as backfill keysearch writes")
	return func() error {
		if path == "" {
			if err := s.Validate(); err != nil {
				return cli.Usagef("%s: %v", fs.Name(), err)
			}
			return nil
		}
		if len(cli.SetFlags(fs, "counter-bits", "sha1-offset")) > 0 {
			return cli.Usagef("%s: --scheme gives the counter width and hash: drop --counter-bits and --sha1-offset", fs.Name())
		}
		loaded, err := ooid.LoadScheme(path)
		if err != nil {
			return cli.Usagef("%s: --scheme: %v", fs.Name(), err)
		}
		*s = loaded
		return nil
	}
}

func runOOID(ctx context.Context, args []string, std cli.Stdio) error {
	fs := cli.NewFlagSet("ooid", ooidHelp, std)
	scheme := ooid.DefaultScheme
	loadScheme := schemeFlags(fs, &scheme)
	args, err := cli.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if err := loadScheme(); err != nil {
		return err
	}
	if len(args) == 0 {
		return cli.Usagef("ooid: no TEXTNAME given")
	}
	if args[0] == "-" {
		if len(args) > 1 {
			return cli.Usagef("ooid: no arguments allowed after -")
		}
		return ooidStream(ctx, scheme, std)
	}
	return ooidArgs(scheme, args[0], args[1:], std)
}

func ooidArgs(scheme ooid.Scheme, textname string, ndxs []string, std cli.Stdio) error {
	r, err := scheme.Report(textname)
	if err != nil {
		fmt.Fprintf(std.Err, "backfill: %v\n", err)
		return &cli.RejectsError{N: 1, What: "textname"}
	}
	if len(ndxs) == 0 {
		ndxs = []string{"0"}
	}
	w := bufio.NewWriter(std.Out)
	bad := 0
	var buf []byte
	for _, s := range ndxs {
		ndx, err := ooidlines.ParseNDX([]byte(s), scheme)
		if err != nil {
			fmt.Fprintf(std.Err, "backfill: NDX %q: %v\n", s, err)
			bad++
			continue
		}
		buf = append(r.ID(ndx).AppendText(buf[:0]), '\n')
		w.Write(buf)
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	if bad > 0 {
		return &cli.RejectsError{N: bad, What: "NDX values"}
	}
	return nil
}

// ooidStream is "backfill ooid -": package ooidlines, with each bad line
// reported on stderr.
func ooidStream(ctx context.Context, scheme ooid.Scheme, std cli.Stdio) error {
	bad, err := ooidlines.Run(ctx, scheme, std.In, std.Out, func(line int, msg string) {
		fmt.Fprintf(std.Err, "backfill: line %d: %s\n", line, msg)
	})
	if err != nil {
		return err
	}
	if bad > 0 {
		return &cli.RejectsError{N: bad, What: "lines"}
	}
	return nil
}
