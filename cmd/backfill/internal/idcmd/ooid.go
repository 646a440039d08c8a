// Package idcmd is backfill's commands over IDs alone, wired from their
// packages: ooid (IDs of textnames and indexes), decode (IDs into their
// fields) and stamp (collector-stamped IDs), and the flags that choose an
// ID scheme, which the OONI commands take too.
package idcmd

import (
	"bufio"
	"context"
	"flag"
	"fmt"

	"github.com/backfill-dev/backfill/docs"
	"github.com/backfill-dev/backfill/internal/cli"
	"github.com/backfill-dev/backfill/pipeline/ooid"
	"github.com/backfill-dev/backfill/pipeline/ooidlines"
)

// SchemeFlags adds --counter-bits, --sha1-offset and --scheme FILE to fs.
// After parsing, the returned function sets *s from them and checks it:
// a scheme file replaces the other two, which may then not be given.
func SchemeFlags(fs *flag.FlagSet, s *ooid.Scheme) func() error {
	fs.IntVar(&s.CounterBits, "counter-bits", ooid.DefaultCounterBits, "counter width `N`, 20..28; with fewer bits the bits between counter and nibble are zero")
	fs.IntVar(&s.SHA1Offset, "sha1-offset", ooid.DefaultSHA1Offset, "first hex digit `N` of the 7-digit SHA-1 window, 0..33 (33: the last 7 digits)")
	var path string
	fs.StringVar(&path, "scheme", "", "the scheme of the scheme `FILE` (backfill keysearch writes them) instead of --counter-bits and --sha1-offset")
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

func RunOOID(ctx context.Context, args []string, std cli.Stdio) error {
	fs := cli.NewFlagSet("ooid", docs.Help("ooid"), std)
	scheme := ooid.DefaultScheme
	loadScheme := SchemeFlags(fs, &scheme)
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
			fmt.Fprintf(std.Err, "backfill: NDX %q: %s\n", s, cli.Printable(err.Error()))
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
	return cli.FilterLines(std, func(bad func(int, string)) (int, error) {
		return ooidlines.Run(ctx, scheme, std.In, std.Out, bad)
	})
}
