package main

import (
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime/debug"
	"strings"
)

// Exit statuses; see the EXIT STATUS section of doc.go.
const (
	exitOK          = 0
	exitFailure     = 1
	exitUsage       = 2
	exitRejects     = 3
	exitInterrupted = 130
)

// version is set with -ldflags "-X main.version=..." by make build.
var version string

type stdio struct {
	in       io.Reader
	out, err io.Writer
}

// usageError is a bad command line; it exits 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// rejectsError reports a command that completed but rejected some inputs,
// each of which it already reported; it exits 3.
type rejectsError struct {
	n    int
	what string
}

func (e *rejectsError) Error() string { return fmt.Sprintf("%d %s rejected", e.n, e.what) }

// errHelp is returned when help was asked for and printed; it exits 0.
var errHelp = flag.ErrHelp

// exitCode maps the error of run to the exit status, printing it once.
func exitCode(err error, stderr io.Writer) int {
	var usage *usageError
	var rejects *rejectsError
	switch {
	case err == nil, errors.Is(err, errHelp):
		return exitOK
	case errors.Is(err, context.Canceled):
		fmt.Fprintln(stderr, "backfill: interrupted")
		return exitInterrupted
	case errors.As(err, &usage):
		fmt.Fprintf(stderr, "backfill: %v\nRun 'backfill help' for usage.\n", err)
		return exitUsage
	case errors.As(err, &rejects):
		fmt.Fprintf(stderr, "backfill: %v\n", err)
		return exitRejects
	default:
		fmt.Fprintf(stderr, "backfill: %v\n", err)
		return exitFailure
	}
}

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
	run  func(ctx context.Context, args []string, std stdio) error
}

func commands() []command {
	return []command{
		{name: "run", help: runHelp, run: runRun},
		{name: "schema", help: schemaHelp, run: runSchema},
		{name: "audit", help: auditHelp, run: runAudit},
		{name: "gen", help: genHelp, run: runGen},
		{name: "ooid", help: ooidHelp, run: runOOID},
		{name: "decode", help: decodeHelp, run: runDecode},
		{name: "granule-id", help: granuleHelp, run: runGranuleID},
		{name: "version", help: versionHelp, run: runVersion},
	}
}

func run(ctx context.Context, args []string, std stdio) error {
	if len(args) == 0 {
		fmt.Fprint(std.err, mainHelp())
		return usagef("no command given")
	}
	name, rest := args[0], args[1:]
	switch name {
	case "-h", "-help", "--help":
		fmt.Fprint(std.err, mainHelp())
		return errHelp
	case "help":
		if len(rest) == 0 {
			fmt.Fprint(std.out, mainHelp())
			return nil
		}
		for _, c := range commands() {
			if c.name == rest[0] {
				fmt.Fprint(std.out, c.help)
				return nil
			}
		}
		return usagef("help: unknown command %q", rest[0])
	case "-version", "--version":
		return runVersion(ctx, rest, std)
	}
	for _, c := range commands() {
		if c.name == name {
			return c.run(ctx, rest, std)
		}
	}
	return usagef("unknown command %q", name)
}

// newFlagSet returns a flag set whose -h prints help to stderr.
func newFlagSet(name, help string, std stdio) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(std.err)
	fs.Usage = func() { fmt.Fprint(std.err, help) }
	return fs
}

// parseFlags parses flags placed before, between or after the arguments,
// as users expect; everything after "--" is an argument. It returns the
// arguments.
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, errHelp
			}
			return nil, &usageError{msg: err.Error()}
		}
		rest := fs.Args()
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

const versionHelp = `Usage: backfill version

Print the version of backfill.

EXIT STATUS

	0    success
`

func runVersion(_ context.Context, args []string, std stdio) error {
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
