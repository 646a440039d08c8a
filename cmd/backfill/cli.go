package main

import (
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
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

// usageError is a bad command line; it exits 2. cmd names the command
// whose help to point at; without it, the "cmd: " prefix of the message
// does.
type usageError struct{ msg, cmd string }

func (e *usageError) Error() string { return e.msg }

// helpHint is the line that follows a usage error.
func (e *usageError) helpHint() string {
	cmd := e.cmd
	if cmd == "" {
		if c, _, ok := strings.Cut(e.msg, ":"); ok && !strings.Contains(c, " ") {
			for _, k := range commands() {
				if k.name == c {
					cmd = c
				}
			}
		}
	}
	if cmd == "" {
		return "Run 'backfill help' for usage."
	}
	return "Run 'backfill help " + cmd + "' for usage."
}

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// rejectsError reports a command that completed but rejected some inputs,
// each of which it already reported; it exits 3.
type rejectsError struct {
	n    int
	what string // in the plural ("inputs"); one of them drops the final s
	note string // said after what, in parentheses, when not empty
	verb string // "rejected" when empty
}

func (e *rejectsError) Error() string {
	verb := e.verb
	if verb == "" {
		verb = "rejected"
	}
	what := e.what
	if e.n == 1 {
		what = strings.TrimSuffix(what, "s")
	}
	if e.note != "" {
		what += " (" + e.note + ")"
	}
	return fmt.Sprintf("%d %s %s", e.n, what, verb)
}

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
		fmt.Fprintf(stderr, "backfill: %v\n%s\n", err, usage.helpHint())
		return exitUsage
	case errors.As(err, &rejects):
		fmt.Fprintf(stderr, "backfill: %v\n", err)
		return exitRejects
	default:
		fmt.Fprintf(stderr, "backfill: %s\n", errorText(err))
		return exitFailure
	}
}

// errorText is the text of err with each line once: errors joined from
// several writers that met the same failure (a full disk) repeat it.
func errorText(err error) string {
	var lines []string
	for _, l := range strings.Split(err.Error(), "\n") {
		if l != "" && !slices.Contains(lines, l) {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\nbackfill: ")
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
		{name: "status", help: statusHelp, run: runStatus},
		{name: "audit", help: auditHelp, run: runAudit},
		{name: "plan", help: planHelp, run: runPlan},
		{name: "check", help: checkHelp, run: runCheck},
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

func run(ctx context.Context, args []string, std stdio) error {
	if len(args) == 0 {
		fmt.Fprint(std.err, mainHelp())
		return usagef("no command given")
	}
	name, rest := args[0], args[1:]
	switch name {
	case "-h", "-help", "--help":
		fmt.Fprint(std.out, mainHelp())
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

// flagHelp holds the help text of each flag set newFlagSet made, which
// parseFlags prints for -h (and only then: a bad flag gets one line).
var flagHelp sync.Map // *flag.FlagSet → helpOut

type helpOut struct {
	text string
	w    io.Writer
}

// newFlagSet returns a flag set whose -h prints help to standard output
// (as git, go and restic do: backfill run -h | less), and exits 0.
func newFlagSet(name, help string, std stdio) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // parseFlags says what went wrong, once
	fs.Usage = func() {}
	flagHelp.Store(fs, helpOut{help, std.out})
	return fs
}

// parseFlags parses flags placed before, between or after the arguments,
// as users expect; everything after "--" is an argument. It returns the
// arguments.
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		// A negative number (an OOID as a signed bigint) is an argument:
		// no flag name starts with a digit.
		if len(args) > 0 && len(args[0]) > 1 && args[0][0] == '-' && args[0][1] >= '0' && args[0][1] <= '9' {
			pos = append(pos, args[0])
			args = args[1:]
			continue
		}
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				if h, ok := flagHelp.Load(fs); ok {
					fmt.Fprint(h.(helpOut).w, h.(helpOut).text)
				}
				return nil, errHelp
			}
			return nil, &usageError{msg: flagError(fs, err), cmd: fs.Name()}
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

// flagError rewords the flag package's errors: an unknown flag gets the
// closest defined one as a suggestion.
func flagError(fs *flag.FlagSet, err error) string {
	msg := err.Error()
	name, ok := strings.CutPrefix(msg, "flag provided but not defined: ")
	if !ok {
		if v, ok := strings.CutPrefix(msg, "invalid value "); ok {
			// invalid value "x" for flag -name: why
			if _, rest, ok := strings.Cut(v, " for flag -"); ok {
				if name, why, ok := strings.Cut(rest, ": "); ok {
					sep := ": "
					if strings.HasPrefix(why, "must ") {
						sep = " " // --format must be auto, canned or autoclaved
					}
					return fs.Name() + ": --" + name + sep + why
				}
			}
			return "bad value " + v
		}
		return strings.Replace(msg, "flag needs an argument: -", "flag needs an argument: --", 1)
	}
	name = strings.TrimLeft(name, "-")
	out := "unknown flag --" + name
	best, bestD := "", 3
	fs.VisitAll(func(f *flag.Flag) {
		d := editDistance(name, f.Name)
		if strings.HasPrefix(f.Name, name) && len(name) >= 3 {
			d = min(d, 1)
		}
		if d < bestD || (d == bestD && f.Name < best) {
			best, bestD = f.Name, d
		}
	})
	if best != "" && bestD <= max(1, len(name)/3) {
		out += "; did you mean --" + best + "?"
	}
	return out
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// setFlags returns the names, as --name, of the flags among names that
// were set on the command line: the one way a command asks whether a flag
// was given.
func setFlags(fs *flag.FlagSet, names ...string) []string {
	var out []string
	fs.Visit(func(f *flag.Flag) {
		if slices.Contains(names, f.Name) {
			out = append(out, "--"+f.Name)
		}
	})
	return out
}
