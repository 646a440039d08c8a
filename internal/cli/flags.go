package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"sync"
)

// flagHelp holds the help text of each flag set NewFlagSet made, which
// ParseFlags prints for -h (and only then: a bad flag gets one line).
var flagHelp sync.Map // *flag.FlagSet → helpOut

type helpOut struct {
	text string
	w    io.Writer
}

// NewFlagSet returns a flag set whose -h prints help to standard output
// (as git, go and restic do: backfill run -h | less), and exits 0. The
// help's flags are listed from the flag set itself, after its line
// "Flags:" (see Help): a flag is described where it is registered, once.
func NewFlagSet(name, help string, std Stdio) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // ParseFlags says what went wrong, once
	fs.Usage = func() {}
	flagHelp.Store(fs, helpOut{help, std.Out})
	return fs
}

// ParseFlags parses flags placed before, between or after the arguments,
// as users expect; everything after "--" is an argument. It returns the
// arguments.
func ParseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
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
					fmt.Fprint(h.(helpOut).w, Help(fs, h.(helpOut).text))
				}
				return nil, ErrHelp
			}
			return nil, &UsageError{Msg: flagError(fs, err), Cmd: fs.Name()}
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

// SetFlags returns the names, as --name, of the flags among names that
// were set on the command line: the one way a command asks whether a flag
// was given.
func SetFlags(fs *flag.FlagSet, names ...string) []string {
	var out []string
	fs.Visit(func(f *flag.Flag) {
		if slices.Contains(names, f.Name) {
			out = append(out, "--"+f.Name)
		}
	})
	return out
}

// Made returns a flag set NewFlagSet made with the name, nil when none:
// the help's tests read the flags a command registers from it.
func Made(name string) *flag.FlagSet {
	var fs *flag.FlagSet
	flagHelp.Range(func(k, _ any) bool {
		if f := k.(*flag.FlagSet); f.Name() == name {
			fs = f
		}
		return true
	})
	return fs
}

// flagsMark is the line of a help text after which Help lists the flags.
const flagsMark = "\nFlags:\n\n"

// Help returns help with the flags of fs listed after its line "Flags:",
// sorted by name, one paragraph each: --name ARG, then the usage wrapped,
// then the default unless the usage says it or it is the zero value. ARG
// is the usage's first `quoted` word; one that opens the usage is left out
// of the text ("`N` buckets at once": --connections N, "buckets at
// once"). A flag whose usage is empty is another name of one listed, which
// that one's usage names.
func Help(fs *flag.FlagSet, help string) string {
	at := strings.Index(help, flagsMark)
	if at < 0 {
		return help
	}
	at += len(flagsMark)
	type entry struct{ name, usage string }
	var list []entry
	col := 0
	fs.VisitAll(func(f *flag.Flag) {
		if f.Usage == "" {
			return
		}
		arg, usage := flag.UnquoteUsage(f)
		if rest, ok := strings.CutPrefix(f.Usage, "`"+arg+"`"); ok {
			usage = strings.TrimLeft(rest, ": ")
		}
		name := "-" + f.Name
		if len(f.Name) > 1 {
			name = "-" + name
		}
		if arg != "" { // a bool flag's is empty
			name += " " + arg
		}
		if d := f.DefValue; d != "" && d != "0" && d != "0s" && d != "false" && !strings.Contains(usage, "(default") {
			usage += " (default\x00" + d + ")" // kept on one line
		}
		list = append(list, entry{name, usage})
		col = max(col, len(name)+2)
	})
	var b strings.Builder
	b.WriteString(help[:at])
	for _, e := range list {
		writeFlag(&b, e.name, e.usage, min(col, 24))
	}
	b.WriteString("\n")
	b.WriteString(help[at:])
	return b.String()
}

// writeFlag writes one flag's paragraph: the name, then the usage wrapped
// in the column col after the tab (below the name when it is too wide).
func writeFlag(b *strings.Builder, name, usage string, col int) {
	const width = 74 // the last column of the usage, after the tab
	b.WriteString("\t" + name)
	pad := col - len(name)
	if pad < 2 {
		b.WriteString("\n\t")
		pad = col
	}
	b.WriteString(strings.Repeat(" ", pad))
	n := col
	for i, w := range strings.Fields(usage) {
		if i > 0 && n+1+len(w) > width {
			b.WriteString("\n\t" + strings.Repeat(" ", col))
			n = col
		} else if i > 0 {
			b.WriteString(" ")
			n++
		}
		b.WriteString(strings.ReplaceAll(w, "\x00", " "))
		n += len(w)
	}
	b.WriteString("\n")
}

// MaxWorkers bounds every --workers: 32 per CPU, and at least 256 (a
// worker waiting on object storage uses no CPU). Each worker holds a
// container's buffers; a count past this is a mistake, and is refused
// before anything starts rather than found by the allocator.
func MaxWorkers() int { return max(256, 32*runtime.NumCPU()) }

// CheckWorkers is the usage error of cmd for a --workers of n outside
// 1..MaxWorkers(), nil inside it.
func CheckWorkers(cmd string, n int) error {
	if n < 1 || n > MaxWorkers() {
		return Usagef("%s: --workers must be 1 to %d (32 per CPU, at least 256), not %d", cmd, MaxWorkers(), n)
	}
	return nil
}
