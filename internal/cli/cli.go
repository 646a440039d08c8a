// Package cli is the command-line toolkit of the backfill command: the
// standard streams a command is given, its flag sets (flags anywhere among
// the arguments, -h on standard output, a mistyped flag answered with the
// closest one), the errors that choose the exit status, the units and
// words its messages use, and the progress lines. It knows nothing of what
// the commands do.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Exit statuses; each command's help lists the ones it uses.
const (
	ExitOK          = 0
	ExitFailure     = 1
	ExitUsage       = 2
	ExitRejects     = 3
	ExitInterrupted = 130
)

// Stdio are the standard streams of a command.
type Stdio struct {
	In       io.Reader
	Out, Err io.Writer
}

// UsageError is a bad command line; it exits 2. Cmd names the command
// whose help to point at; without it, the "cmd: " prefix of the message
// does.
type UsageError struct{ Msg, Cmd string }

func (e *UsageError) Error() string { return e.Msg }

// helpHint is the line that follows a usage error; commands are the
// names a "cmd: " prefix may be.
func (e *UsageError) helpHint(commands []string) string {
	cmd := e.Cmd
	if cmd == "" {
		if c, _, ok := strings.Cut(e.Msg, ":"); ok && !strings.Contains(c, " ") && slices.Contains(commands, c) {
			cmd = c
		}
	}
	if cmd == "" {
		return "Run 'backfill help' for usage."
	}
	return "Run 'backfill help " + cmd + "' for usage."
}

// Usagef is a usage error of the formatted message.
func Usagef(format string, args ...any) error {
	return &UsageError{Msg: fmt.Sprintf(format, args...)}
}

// RejectsError reports a command that completed but rejected some inputs,
// each of which it already reported; it exits 3.
type RejectsError struct {
	N    int
	What string // in the plural ("inputs"); one of them drops the final s
	Note string // said after What, in parentheses, when not empty
	Verb string // "rejected" when empty
}

func (e *RejectsError) Error() string {
	verb := e.Verb
	if verb == "" {
		verb = "rejected"
	}
	what := e.What
	if e.N == 1 {
		what = strings.TrimSuffix(what, "s")
	}
	if e.Note != "" {
		what += " (" + e.Note + ")"
	}
	return fmt.Sprintf("%d %s %s", e.N, what, verb)
}

// FilterLines runs a command that filters the lines of its standard
// input: run is handed the function that says a bad line on std.Err
// (its number and why, printable) and returns how many it said. Bad lines
// make a *RejectsError, exit 3; run's own error wins over them.
func FilterLines(std Stdio, run func(bad func(line int, why string)) (int, error)) error {
	n, err := run(func(line int, why string) {
		fmt.Fprintf(std.Err, "backfill: line %d: %s\n", line, Printable(why))
	})
	if err != nil {
		return err
	}
	if n > 0 {
		return &RejectsError{N: n, What: "lines"}
	}
	return nil
}

// ErrHelp is returned when help was asked for and printed; it exits 0.
var ErrHelp = flag.ErrHelp

// ExitCode maps the error of a command to the exit status, printing it
// once on stderr; commands are the command names, for the usage hint.
func ExitCode(err error, stderr io.Writer, commands []string) int {
	var usage *UsageError
	var rejects *RejectsError
	switch {
	case err == nil, errors.Is(err, ErrHelp):
		return ExitOK
	case errors.Is(err, context.Canceled):
		fmt.Fprintln(stderr, "backfill: interrupted")
		return ExitInterrupted
	case errors.As(err, &usage):
		fmt.Fprintf(stderr, "backfill: %s\n%s\n", ErrorText(err), usage.helpHint(commands))
		return ExitUsage
	case errors.As(err, &rejects) && !failedToo(err):
		fmt.Fprintf(stderr, "backfill: %s\n", ErrorText(err))
		return ExitRejects
	default:
		fmt.Fprintf(stderr, "backfill: %s\n", ErrorText(err))
		return ExitFailure
	}
}

// failedToo reports whether err joins a failure to a RejectsError (a Close
// that failed after the rejects, say): the failure outranks them.
func failedToo(err error) bool {
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return false
	}
	for _, e := range j.Unwrap() {
		var rejects *RejectsError
		if !errors.As(e, &rejects) || failedToo(e) {
			return true
		}
	}
	return false
}

// ErrorText is the text of err with each line once (errors joined from
// several writers that met the same failure, a full disk, repeat it), and
// each line Printable: an error may quote a name from an input.
func ErrorText(err error) string {
	var lines []string
	for _, l := range strings.Split(err.Error(), "\n") {
		if l = Printable(l); l != "" && !slices.Contains(lines, l) {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\nbackfill: ")
}

// CloseAlso closes c and joins its error to *err: for a deferred Close
// whose failure (a lock not released, a connection not ended cleanly) the
// command must report, even after rejects (it then exits 1, not 3).
func CloseAlso(err *error, c interface{ Close() error }) {
	if cerr := c.Close(); cerr != nil {
		*err = errors.Join(*err, cerr)
	}
}
