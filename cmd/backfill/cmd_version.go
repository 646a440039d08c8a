package main

import (
	"context"

	"github.com/backfill-dev/backfill/internal/cli"
)

func runVersion(_ context.Context, args []string, std cli.Stdio) error {
	fs := newFlags("version", std)
	asJSON := fs.Bool("json", false, "one JSON object")
	args, err := cli.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(args) > 0 {
		return cli.Usagef("version takes no arguments")
	}
	return cli.ReadBuild(version).Write(std.Out, *asJSON)
}

// buildVersion is the version the outputs record.
func buildVersion() string { return cli.Version(version) }
