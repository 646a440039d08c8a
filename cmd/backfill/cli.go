package main

import (
	"context"
	_ "embed"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/backfill-dev/backfill/cmd/backfill/internal/cumuluscmd"
	"github.com/backfill-dev/backfill/cmd/backfill/internal/idcmd"
	"github.com/backfill-dev/backfill/docs"
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

// newFlags returns the flag set of command name, whose -h prints the
// command's section of the command reference (docs/cli.md) with the flags.
func newFlags(name string, std cli.Stdio) *flag.FlagSet {
	return cli.NewFlagSet(name, docs.Help(name), std)
}

type command struct {
	name string
	run  func(ctx context.Context, args []string, std cli.Stdio) error
}

func commands() []command {
	return []command{
		{name: "run", run: runRun},
		{name: "schema", run: runSchema},
		{name: "status", run: runStatus},
		{name: "audit", run: runAudit},
		{name: "plan", run: runPlan},
		{name: "check", run: runCheck},
		{name: "verify", run: runVerify},
		{name: "census", run: runCensus},
		{name: "load", run: runLoad},
		{name: "keysearch", run: runKeysearch},
		{name: "gen", run: runGen},
		{name: "ooid", run: idcmd.RunOOID},
		{name: "stamp", run: idcmd.RunStamp},
		{name: "decode", run: idcmd.RunDecode},
		{name: "granule-id", run: cumuluscmd.RunGranuleID},
		{name: "cmr-temporal", run: cumuluscmd.RunCMRTemporal},
		{name: "granule-write", run: cumuluscmd.RunGranuleWrite},
		{name: "granule-recover", run: cumuluscmd.RunGranuleRecover},
		{name: "granule-schema", run: cumuluscmd.RunGranuleSchema},
		{name: "version", run: runVersion},
	}
}

func run(ctx context.Context, args []string, std cli.Stdio) error {
	// A command logs from several goroutines (a sink's connections, the
	// workers): one write at a time, whatever the caller's writer is. A
	// file (the process's stderr) takes concurrent writes as it is, and
	// stays a file, which the progress bar asks for.
	if _, file := std.Err.(*os.File); !file {
		std.Err = &lockedWriter{w: std.Err}
	}
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
			if c.name == rest[0] { // the help of -h, with the flags listed
				if err := c.run(ctx, []string{"-h"}, std); err != cli.ErrHelp {
					return err
				}
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

// lockedWriter lets several goroutines write to w, one write at a time.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
