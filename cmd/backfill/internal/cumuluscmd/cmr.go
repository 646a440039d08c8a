package cumuluscmd

import (
	"bufio"
	"context"
	"fmt"

	"github.com/backfill-dev/backfill/cumulus/cmr"
	"github.com/backfill-dev/backfill/docs"
	"github.com/backfill-dev/backfill/internal/cli"
	"github.com/backfill-dev/backfill/internal/units"
)

func RunCMRTemporal(ctx context.Context, args []string, std cli.Stdio) error {
	fs := cli.NewFlagSet("cmr-temporal", docs.Help("cmr-temporal"), std)
	var format string
	maxSize := units.Size(cmr.MaxSize)
	fs.StringVar(&format, "format", "", "`F`: echo10, umm-g or iso, for every FILE")
	fs.Var(&maxSize, "max-size", "refuse files over `SIZE`")
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
			fmt.Fprintf(std.Err, "backfill: %s: %s\n", cli.Printable(name), cli.Printable(err.Error()))
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
