package main

import (
	"context"
	_ "embed"
	"fmt"
	"strings"

	"github.com/backfill-dev/backfill/internal/cli"
)

// version is set with -ldflags "-X main.version=..." by make build.
var version string

//go:embed doc.go
var docGo string

// mainHelp is the package comment of doc.go.
func mainHelp() string {
	s := docGo[strings.Index(docGo, "/*")+2 : strings.Index(docGo, "*/")]
	return strings.TrimLeft(s, "\n")
}

type command struct {
	name string
	help string // full help text, with EXIT STATUS
	run  func(ctx context.Context, args []string, std cli.Stdio) error
}

func commands() []command {
	return []command{
		{name: "run", help: runHelp, run: runRun},
		{name: "schema", help: schemaHelp, run: runSchema},
		{name: "status", help: statusHelp, run: runStatus},
		{name: "audit", help: auditHelp, run: runAudit},
		{name: "plan", help: planHelp, run: runPlan},
		{name: "check", help: checkHelp, run: runCheck},
		{name: "verify", help: verifyHelp, run: runVerify},
		{name: "load", help: loadHelp, run: runLoad},
		{name: "keysearch", help: keysearchHelp, run: runKeysearch},
		{name: "gen", help: genHelp, run: runGen},
		{name: "ooid", help: ooidHelp, run: runOOID},
		{name: "stamp", help: stampHelp, run: runStamp},
		{name: "decode", help: decodeHelp, run: runDecode},
		{name: "granule-id", help: granuleHelp, run: runGranuleID},
		{name: "cmr-temporal", help: cmrHelp, run: runCMRTemporal},
		{name: "granule-write", help: granuleWriteHelp, run: runGranuleWrite},
		{name: "granule-recover", help: granuleRecoverHelp, run: runGranuleRecover},
		{name: "granule-schema", help: granuleSchemaHelp, run: runGranuleSchema},
		{name: "version", help: versionHelp, run: runVersion},
	}
}

func run(ctx context.Context, args []string, std cli.Stdio) error {
	if len(args) == 0 {
		fmt.Fprint(std.Err, mainHelp())
		return cli.Usagef("no command given")
	}
	name, rest := args[0], args[1:]
	switch name {
	case "-h", "-help", "--help":
		fmt.Fprint(std.Out, mainHelp())
		return cli.ErrHelp
	case "help":
		if len(rest) == 0 {
			fmt.Fprint(std.Out, mainHelp())
			return nil
		}
		for _, c := range commands() {
			if c.name == rest[0] {
				fmt.Fprint(std.Out, c.help)
				return nil
			}
		}
		return cli.Usagef("help: unknown command %q", rest[0])
	case "-version", "--version":
		return runVersion(ctx, rest, std)
	}
	for _, c := range commands() {
		if c.name == name {
			return c.run(ctx, rest, std)
		}
	}
	return cli.Usagef("unknown command %q", name)
}

// commandNames are the names of the commands, for the usage hint.
func commandNames() []string {
	var names []string
	for _, c := range commands() {
		names = append(names, c.name)
	}
	return names
}
