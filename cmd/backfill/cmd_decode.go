package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/backfill-dev/backfill/internal/cli"
	"github.com/backfill-dev/backfill/pipeline/ooid"
	"github.com/backfill-dev/backfill/pipeline/ooidlines"
)

const decodeHelp = `Usage: backfill decode OOID...
       backfill decode -
       backfill decode --verify [--scheme FILE | --counter-bits N --sha1-offset N] OOID TEXTNAME NDX
       backfill decode --verify [--scheme FILE | --counter-bits N --sha1-offset N] -

Decode OOIDs into their fields, one JSON object per line. An OOID is given
as 16 hex digits (50bef44df29c69e2); as 0x and hex digits, leading zeros
left out or not (0x50bef44df29c69e2, as PostgreSQL's to_hex gives it); or
as the decimal that psql and Parquet readers show for the bigint
(5818356384229255650; negative from 2038), or the unsigned decimal of the
same 64 bits. Spaces around it are ignored (psql's aligned output). The
rule: 16 characters that are all hex digits are hex, even when they are
all decimal digits (no real OOID's decimal form has fewer than 19 digits;
a "+" in front makes them a decimal); anything else is a decimal.


	{"ooid":"…","namespace":"backfilled"|"collector","unix":…,
	 "time":"RFC3339 UTC","counter":…}

plus "collector_id" for collector-stamped IDs. A low word whose top nibble
is 0xF is backfilled (28-bit counter); otherwise the top byte of the low
word is the collector id (24-bit counter). The OOID is always a JSON string:
JavaScript numbers lose precision above 2^53.

With "-", read one OOID per line from standard input. A bad OOID is
reported on standard error (with its line number when read from standard
input) and the others are still decoded.

With --verify, each OOID comes with the textname and NDX it should belong
to (three arguments, or "OOID<TAB>TEXTNAME<TAB>NDX" lines, as backfill
ooid - writes them), and the line gets "verified": true when the OOID is
that measurement's under the scheme (--scheme FILE, or --counter-bits and
--sha1-offset, default 28 and 33), else false and "expected": the right
OOID; a mismatch is reported on standard error and counts as rejected.

Flags:

	--verify           check each OOID against its textname and NDX
	--scheme FILE      with --verify: the scheme of a scheme file
	--counter-bits N   with --verify: counter width, 20..28 (default 28)
	--sha1-offset N    with --verify: SHA-1 window offset (default 33)

Examples:

	backfill decode 50bef44df29c69e2 5818356384229255650
	  {"ooid":"50bef44df29c69e2","namespace":"backfilled","unix":1354691661,"time":"2012-12-05T07:14:21Z","counter":43805154}
	  {"ooid":"50bef44df29c69e2","namespace":"backfilled","unix":1354691661,"time":"2012-12-05T07:14:21Z","counter":43805154}
	cut -f1 ooids.tsv | backfill decode -
	backfill ooid --scheme scheme24.txt - < names.tsv | backfill decode --verify --scheme scheme24.txt -

EXIT STATUS

	0    every OOID decoded
	1    failure (e.g. standard output closed)
	2    usage error
	3    some OOIDs were rejected (or, with --verify, did not match)
	130  interrupted
`

func runDecode(ctx context.Context, args []string, std cli.Stdio) error {
	fs := cli.NewFlagSet("decode", decodeHelp, std)
	var verify bool
	fs.BoolVar(&verify, "verify", false, "")
	scheme := ooid.DefaultScheme
	loadScheme := schemeFlags(fs, &scheme)
	args, err := cli.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(args) == 0 {
		return cli.Usagef("decode: no OOID given")
	}
	if err := loadScheme(); err != nil {
		return err
	}
	schemeSet := len(cli.SetFlags(fs, "scheme", "counter-bits", "sha1-offset")) > 0
	switch {
	case schemeSet && !verify:
		return cli.Usagef("decode: --scheme, --counter-bits and --sha1-offset go with --verify")
	case verify && len(args) != 3 && (len(args) != 1 || args[0] != "-"):
		return cli.Usagef("decode: --verify takes OOID TEXTNAME NDX, or - for lines of them")
	}
	d := ooidlines.NewDecoder(std.Out, verify, scheme, func(where, why string) {
		fmt.Fprintf(std.Err, "backfill: %s: %s\n", where, why)
	})

	switch {
	case len(args) == 1 && args[0] == "-":
		err = d.Lines(ctx, std.In)
	case verify:
		err = d.Decode([]byte(strings.Join(args, "\t")), "arguments")
	default:
		for _, a := range args {
			if err = d.Decode([]byte(a), fmt.Sprintf("argument %q", a)); err != nil {
				break
			}
		}
	}
	if ferr := d.Flush(); err == nil && ferr != nil {
		err = fmt.Errorf("write output: %w", ferr)
	}
	if err != nil {
		return err
	}
	if d.Bad > 0 {
		return &cli.RejectsError{N: d.Bad, What: "OOIDs"}
	}
	return nil
}
