package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/backfill-dev/backfill/internal/cli"
	"github.com/backfill-dev/backfill/internal/lines"
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
	out := bufio.NewWriter(std.Out)
	d := &decoder{out: out, std: std, verify: verify, scheme: scheme}
	emit := d.emit
	if len(args) == 1 && args[0] == "-" {
		err := lines.Each(ctx, std.In, func(line []byte, n int, tooLong error) error {
			if tooLong != nil {
				d.bad++
				fmt.Fprintf(std.Err, "backfill: line %d: %v\n", n, tooLong)
				return nil
			}
			emit(line, "line "+strconv.Itoa(n))
			return nil
		})
		if err != nil {
			out.Flush()
			return err
		}
	} else if verify {
		emit([]byte(strings.Join(args, "\t")), "arguments")
	} else {
		for _, a := range args {
			emit([]byte(a), fmt.Sprintf("argument %q", a))
		}
	}
	if err := out.Flush(); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	if d.bad > 0 {
		return &cli.RejectsError{N: d.bad, What: "OOIDs"}
	}
	return nil
}

// decoder decodes (and with verify checks) OOIDs one at a time, writing a
// JSON line for each to out and counting those it could not.
type decoder struct {
	out    *bufio.Writer
	std    cli.Stdio
	verify bool
	scheme ooid.Scheme
	bad    int
	buf    []byte
}

// emit decodes the OOID of text (or, with verify, of the OOID TEXTNAME
// NDX line text); where names it in messages.
func (d *decoder) emit(text []byte, where string) {
	var v verdict
	if d.verify {
		var ok bool
		if text, v, ok = verifyLine(text, d.scheme, where, d.std); !ok {
			d.bad++
			return
		}
	}
	id, err := ooid.ParseAny(text)
	if err != nil {
		d.bad++
		fmt.Fprintf(d.std.Err, "backfill: %s: %v\n", where, err)
		return
	}
	buf := appendDecoded(d.buf[:0], id.Decode())
	if d.verify {
		buf = buf[:len(buf)-2] // "}\n"
		if id == v.want {
			buf = append(buf, `,"verified":true}`+"\n"...)
		} else {
			d.bad++
			fmt.Fprintf(d.std.Err, "backfill: %s: %s is not measurement %d of %s under %s (that is %s)\n", where, id, v.ndx, v.textname, d.scheme, v.want)
			buf = append(buf, `,"verified":false,"expected":"`...)
			buf = v.want.AppendText(buf)
			buf = append(buf, "\"}\n"...)
		}
	}
	d.buf = buf
	d.out.Write(buf)
}

type verdict struct {
	textname string
	ndx      uint32
	want     ooid.ID
}

// verifyLine splits OOID<TAB>TEXTNAME<TAB>NDX and computes the OOID the
// measurement has under the scheme. A line that cannot be checked is
// reported.
func verifyLine(line []byte, scheme ooid.Scheme, where string, std cli.Stdio) ([]byte, verdict, bool) {
	f := bytes.Split(line, []byte{'\t'})
	if len(f) != 3 {
		fmt.Fprintf(std.Err, "backfill: %s: want OOID<TAB>TEXTNAME<TAB>NDX, got %d fields\n", where, len(f))
		return nil, verdict{}, false
	}
	ndx, err := ooidlines.ParseNDX(f[2], scheme)
	if err != nil {
		fmt.Fprintf(std.Err, "backfill: %s: NDX %q: %v\n", where, f[2], err)
		return nil, verdict{}, false
	}
	r, err := scheme.ReportBytes(f[1])
	if err != nil {
		fmt.Fprintf(std.Err, "backfill: %s: %v\n", where, err)
		return nil, verdict{}, false
	}
	return f[0], verdict{textname: string(f[1]), ndx: ndx, want: r.ID(ndx)}, true
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
