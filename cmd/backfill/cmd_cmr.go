package main

import (
	"bufio"
	"context"
	"fmt"

	"github.com/backfill-dev/backfill/cumulus/cmr"
	"github.com/backfill-dev/backfill/internal/cli"
	"github.com/backfill-dev/backfill/internal/units"
)

const cmrHelp = `Usage: backfill cmr-temporal [--format F] [--max-size SIZE] FILE...

Print the temporal values of NASA Cumulus CMR metadata files, one JSON
object per file, as Cumulus v21's granule write reads and stores them:

	{"file":"…","format":"echo10"|"umm-g"|"iso",
	 "beginningDateTime":…,"endingDateTime":…,"productionDateTime":…,
	 "lastUpdateDateTime":…,"raw":{…}}

Each value is what the write stores (new Date(v).toISOString():
milliseconds and Z; null for null or ""; left out when the file has none);
"raw" holds the values as found in the file. The format is told by the
name, as Cumulus tells it: *cmr_iso.xml (ISO 19115), *cmr.xml (ECHO10),
*cmr.json (UMM-G); --format sets it for other names.

The rules are Cumulus's, quirks included: ISO reads the first
gmd:identificationInfo for the time extent and needs several of them;
UMM-G's last update is the first ProviderDates entry of type Update, else
Insert, else Create, in array order; ECHO10's is LastUpdate, else
InsertTime; without a range begin, the single date-time is both begin and
end. A file Cumulus's code fails on, or whose value is not a date, is
reported on standard error with the reason. XML is streamed; files over
--max-size, nested deeper than 256 elements or with entities are refused.

Flags:

	--format F         echo10, umm-g or iso, for every FILE
	--max-size SIZE    refuse files over SIZE (default 16MiB)

Examples:

	backfill cmr-temporal MOD09GQ.A2016358.h13v04.006.2016360104606.cmr.xml
	backfill cmr-temporal --format iso granule.xml

EXIT STATUS

	0    every file read
	1    failure (e.g. standard output closed)
	2    usage error
	3    some files were rejected (unreadable, malformed, or not a date)
	130  interrupted
`

func runCMRTemporal(ctx context.Context, args []string, std cli.Stdio) error {
	fs := cli.NewFlagSet("cmr-temporal", cmrHelp, std)
	var format string
	maxSize := units.Size(cmr.MaxSize)
	fs.StringVar(&format, "format", "", "")
	fs.Var(&maxSize, "max-size", "")
	files, err := cli.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(files) == 0:
		return cli.Usagef("cmr-temporal: no file given")
	case format != "" && format != string(cmr.ECHO10) && format != string(cmr.UMMG) && format != string(cmr.ISO):
		return cli.Usagef("cmr-temporal: --format must be echo10, umm-g or iso")
	case maxSize <= 0:
		return cli.Usagef("cmr-temporal: --max-size must be positive")
	}
	w := bufio.NewWriter(std.Out)
	bad := 0
	for _, name := range files {
		if ctx.Err() != nil {
			_ = w.Flush() // the lines so far, as far as they go
			return ctx.Err()
		}
		line, err := cmr.FileLine(name, cmr.Format(format), int64(maxSize))
		if err != nil {
			bad++
			fmt.Fprintf(std.Err, "backfill: %s: %v\n", name, err)
			continue
		}
		w.Write(append(line, '\n'))
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	if bad > 0 {
		return &cli.RejectsError{N: bad, What: "files"}
	}
	return nil
}
