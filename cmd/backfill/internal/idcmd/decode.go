package idcmd

import (
	"context"
	"fmt"
	"strings"

	"github.com/backfill-dev/backfill/docs"
	"github.com/backfill-dev/backfill/internal/cli"
	"github.com/backfill-dev/backfill/pipeline/ooid"
	"github.com/backfill-dev/backfill/pipeline/ooidlines"
)

func RunDecode(ctx context.Context, args []string, std cli.Stdio) error {
	fs := cli.NewFlagSet("decode", docs.Help("decode"), std)
	var verify bool
	fs.BoolVar(&verify, "verify", false, "check each OOID against its textname and NDX, under the scheme of the flags below")
	scheme := ooid.DefaultScheme
	loadScheme := SchemeFlags(fs, &scheme)
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
		fmt.Fprintf(std.Err, "backfill: %s: %s\n", cli.Printable(where), cli.Printable(why))
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
