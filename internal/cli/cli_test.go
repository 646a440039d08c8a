package cli

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"
	"time"
)

// One system of units: the periodic progress line says binary units (KiB,
// MiB) and which bytes it counts (the compressed input).
func TestProgressLine_Units(t *testing.T) {
	var w bytes.Buffer
	p := NewProgress(&w)
	p.start = time.Now().Add(-10 * time.Second)
	p.d = Done{Buckets: 1, BucketsTotal: 3, BytesIn: 3 << 20, BytesTotal: 9 << 20, Measurements: 1000}
	p.line()
	want := "backfill: 1/3 buckets, 3.0 MiB of 9.0 MiB compressed input read ("
	if !strings.HasPrefix(w.String(), want) || !strings.Contains(w.String(), " MiB/s)") {
		t.Errorf("progress line %q, want it to start %q and give MiB/s", w.String(), want)
	}
	if strings.Contains(w.String(), " MB") {
		t.Errorf("decimal megabytes in %q", w.String())
	}
}

func TestCount_Plural(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want string
	}{{0, "0 buckets"}, {1, "1 bucket"}, {2, "2 buckets"}} {
		if got := Count(tc.n, "bucket", "buckets"); got != tc.want {
			t.Errorf("Count(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
	if got := (&RejectsError{N: 1, What: "inputs", Note: "records in x"}).Error(); got != "1 input (records in x) rejected" {
		t.Errorf("one reject: %q", got)
	}
}

// TestExitCode: each kind of error has its status, and its text once.
// CloseAlso's error after rejects is a failure.
func TestExitCode(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code int
		text string
	}{
		{nil, ExitOK, ""},
		{ErrHelp, ExitOK, ""},
		{Usagef("run: --in is required"), ExitUsage, "backfill: run: --in is required\nRun 'backfill help run' for usage.\n"},
		{Usagef("nosuch: x"), ExitUsage, "backfill: nosuch: x\nRun 'backfill help' for usage.\n"},
		{&RejectsError{N: 2, What: "lines"}, ExitRejects, "backfill: 2 lines rejected\n"},
		{errors.Join(errors.New("disk full"), errors.New("disk full")), ExitFailure, "backfill: disk full\n"},
		// A failure after the rejects (a Close, say) outranks them, and
		// both are said.
		{errors.Join(&RejectsError{N: 2, What: "lines"}, errors.New("lock not released")), ExitFailure,
			"backfill: 2 lines rejected\nbackfill: lock not released\n"},
		{errors.Join(&RejectsError{N: 1, What: "lines"}), ExitRejects, "backfill: 1 line rejected\n"},
	} {
		var w bytes.Buffer
		if got := ExitCode(tc.err, &w, []string{"run"}); got != tc.code || w.String() != tc.text {
			t.Errorf("ExitCode(%v) = %d, %q; want %d, %q", tc.err, got, w.String(), tc.code, tc.text)
		}
	}
}

type closer struct{ err error }

func (c closer) Close() error { return c.err }

// CloseAlso keeps the command's error and adds the Close's: a failed Close
// after rejects exits 1 and is said; a clean one leaves the rejects as
// they are.
func TestCloseAlso(t *testing.T) {
	rejects := error(&RejectsError{N: 2, What: "lines"})
	for _, tc := range []struct {
		err, close error
		code       int
	}{
		{nil, nil, ExitOK},
		{nil, errors.New("lock not released"), ExitFailure},
		{rejects, nil, ExitRejects},
		{rejects, errors.New("lock not released"), ExitFailure},
	} {
		err := tc.err
		CloseAlso(&err, closer{tc.close})
		var w bytes.Buffer
		if got := ExitCode(err, &w, nil); got != tc.code {
			t.Errorf("%v then Close %v: exit %d, want %d", tc.err, tc.close, got, tc.code)
		}
		if tc.close != nil && !strings.Contains(w.String(), tc.close.Error()) {
			t.Errorf("%v then Close %v: %q does not say the Close failed", tc.err, tc.close, w.String())
		}
	}
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{"": "''", "--in=/data/c": "--in=/data/c", "a b": "'a b'", "it's": `'it'\''s'`} {
		if got := ShellQuote(in); got != want {
			t.Errorf("ShellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}

// TestHelp_FlagList: the flags go after the line "Flags:", sorted, with
// their argument, usage wrapped in one column, and default; a flag with no
// usage (another name of one) is left out, and a help without the line is
// printed as it is.
func TestHelp_FlagList(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.Int("workers", 4, "`N` containers read at once")
	fs.Bool("q", false, "no progress output")
	fs.String("alias", "", "")
	fs.String("out", "", "the output folder `DIR`, a path or s3://bucket/prefix, which is long enough to be wrapped onto a second line")
	fs.Duration("wait", 0, "first wait `D`")
	fs.String("size", "64MiB", "flag measurements over `SIZE` bytes, the whole of it, past which the default must not be cut (x)")
	got := Help(fs, "Usage: x\n\nFlags:\n\nExit status:\n")
	want := "Usage: x\n\nFlags:\n\n" +
		"\t--out DIR    the output folder DIR, a path or s3://bucket/prefix, which is\n" +
		"\t             long enough to be wrapped onto a second line\n" +
		"\t-q           no progress output\n" +
		"\t--size SIZE  flag measurements over SIZE bytes, the whole of it, past\n" +
		"\t             which the default must not be cut (x) (default 64MiB)\n" +
		"\t--wait D     first wait D\n" +
		"\t--workers N  containers read at once (default 4)\n" +
		"\nExit status:\n"
	if got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	if got := Help(fs, "no flags line\n"); got != "no flags line\n" {
		t.Errorf("a help without the line: %q", got)
	}
}
