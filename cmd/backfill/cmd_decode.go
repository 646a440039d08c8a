package main

import (
	"bufio"
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/backfill-dev/backfill/internal/lines"
	"github.com/backfill-dev/backfill/pipeline/ooid"
)

const decodeHelp = `Usage: backfill decode OOID...
       backfill decode -

Decode OOIDs into their fields, one JSON object per line. An OOID is given
as 16 hex digits (50bef44df29c69e2), or as the signed decimal that psql
and Parquet readers show for the bigint (5818356384229255650; negative
from 2038): 16 characters that are all hex digits are read as hex,
anything else as a decimal.


	{"ooid":"…","namespace":"backfilled"|"collector","unix":…,
	 "time":"RFC3339 UTC","counter":…}

plus "collector_id" for collector-stamped IDs. A low word whose top nibble
is 0xF is backfilled (28-bit counter); otherwise the top byte of the low
word is the collector id (24-bit counter). The OOID is always a JSON string:
JavaScript numbers lose precision above 2^53.

With "-", read one OOID per line from standard input. A bad OOID is
reported on standard error (with its line number when read from standard
input) and the others are still decoded.

Examples:

	backfill decode 50bef44df29c69e2 5818356384229255650
	  {"ooid":"50bef44df29c69e2","namespace":"backfilled","unix":1354691661,"time":"2012-12-05T07:14:21Z","counter":43805154}
	  {"ooid":"50bef44df29c69e2","namespace":"backfilled","unix":1354691661,"time":"2012-12-05T07:14:21Z","counter":43805154}
	cut -f1 ooids.tsv | backfill decode -

EXIT STATUS

	0    every OOID decoded
	1    failure (e.g. standard output closed)
	2    usage error
	3    some OOIDs were rejected
	130  interrupted
`

func runDecode(ctx context.Context, args []string, std stdio) error {
	fs := newFlagSet("decode", decodeHelp, std)
	args, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(args) == 0 {
		return usagef("decode: no OOID given")
	}
	out := bufio.NewWriter(std.out)
	bad := 0
	var buf []byte
	emit := func(text []byte, where string) {
		id, err := ooid.ParseAny(text)
		if err != nil {
			bad++
			fmt.Fprintf(std.err, "backfill: %s: %v\n", where, err)
			return
		}
		buf = appendDecoded(buf[:0], id.Decode())
		out.Write(buf)
	}
	if len(args) == 1 && args[0] == "-" {
		err := lines.Each(ctx, std.in, func(line []byte, n int, tooLong error) error {
			if tooLong != nil {
				bad++
				fmt.Fprintf(std.err, "backfill: line %d: %v\n", n, tooLong)
				return nil
			}
			emit(line, "line "+strconv.Itoa(n))
			return nil
		})
		if err != nil {
			out.Flush()
			return err
		}
	} else {
		for _, a := range args {
			emit([]byte(a), fmt.Sprintf("argument %q", a))
		}
	}
	if err := out.Flush(); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	if bad > 0 {
		return &rejectsError{n: bad, what: "OOIDs"}
	}
	return nil
}

// appendDecoded appends d as one JSON line. Every value is a number or a
// string of hex digits, letters and ASCII punctuation, so none needs escaping.
func appendDecoded(b []byte, d ooid.Decoded) []byte {
	b = append(b, `{"ooid":"`...)
	b = d.ID.AppendText(b)
	b = append(b, `","namespace":"`...)
	b = append(b, d.Namespace.String()...)
	b = append(b, `","unix":`...)
	b = strconv.AppendUint(b, uint64(d.Unix), 10)
	b = append(b, `,"time":"`...)
	b = d.Time().AppendFormat(b, time.RFC3339)
	b = append(b, `","counter":`...)
	b = strconv.AppendUint(b, uint64(d.Counter), 10)
	if d.Namespace == ooid.Collector {
		b = append(b, `,"collector_id":`...)
		b = strconv.AppendUint(b, uint64(d.CollectorID), 10)
	}
	return append(b, "}\n"...)
}
