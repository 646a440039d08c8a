package main

import (
	"context"
	"fmt"
	"runtime/debug"
)

const versionHelp = `Usage: backfill version

Print the version of backfill.

EXIT STATUS

	0    success
`

func runVersion(_ context.Context, args []string, std stdio) error {
	args, err := parseFlags(newFlagSet("version", versionHelp, std), args)
	if err != nil {
		return err
	}
	if len(args) > 0 {
		return usagef("version takes no arguments")
	}
	fmt.Fprintf(std.out, "backfill %s\n", buildVersion())
	return nil
}

func buildVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}
