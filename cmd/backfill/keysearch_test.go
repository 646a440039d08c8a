package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/backfill-dev/backfill/internal/cli"
	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/internal/testutil"
	"github.com/backfill-dev/backfill/pipeline/keysearch"
	"github.com/backfill-dev/backfill/pipeline/ooid"
	"github.com/backfill-dev/backfill/pipeline/sink/parquetfile"
)

// keysearch over a corpus that collides at 20 bits under the SHA-1
// window: the scheme file it writes is the same for any number of
// workers, audit with it finds no pair (over the data and over the run's
// output), the run rejects nothing, and ooid and decode --verify agree
// with the run's IDs.
func TestKeysearchRun(t *testing.T) {
	t.Parallel()
	skipUnderRace(t)
	dir := t.TempDir()
	if code, out := call("gen", "--out", dir+"/c", "--buckets", "2", "--reports", "80", "--min-measurements", "400",
		"--max-measurements", "5000", "--time-slots", "3", "--max-template", "1KiB"); code != 0 {
		t.Fatalf("gen: exit %d\n%s", code, out)
	}
	pairs := func(args ...string) int64 {
		t.Helper()
		code, out := call(append([]string{"audit", "--json"}, args...)...)
		var r struct {
			Results []struct {
				Pairs    int64  `json:"colliding_pairs"`
				KeyTable string `json:"key_table"`
			} `json:"results"`
		}
		if err := json.Unmarshal([]byte(out), &r); err != nil || code != cli.ExitOK || len(r.Results) != 1 {
			t.Fatalf("audit %v: exit %d, %v\n%s", args, code, err, out)
		}
		return r.Results[0].Pairs
	}
	if n := pairs("--counter-bits", "20", dir+"/c"); n < 3 {
		t.Fatalf("%d pairs under the SHA-1 window at 20 bits: the corpus does not collide enough", n)
	}
	scheme := filepath.Join(dir, "s20.txt")
	code, out := call("keysearch", "--counter-bits", "20", "--seed", "cli", "--out", scheme, "-q", "--json", dir+"/c")
	var res keysearch.Report
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != cli.ExitOK {
		t.Fatalf("keysearch: exit %d, %v\n%s", code, err, out)
	}
	if res.Reports != 160 || res.SharedReports == 0 || res.Trials == 0 || res.Seed != "cli" || res.CounterBits != 20 {
		t.Errorf("keysearch summary: %+v", res)
	}
	first, err := os.ReadFile(scheme)
	if err != nil {
		t.Fatal(err)
	}
	if code, _ := call("keysearch", "--counter-bits", "20", "--seed", "cli", "--workers", "1", "--out", scheme+".1", "-q", dir+"/c"); code != cli.ExitOK {
		t.Fatalf("keysearch --workers 1: exit %d", code)
	}
	if again, _ := os.ReadFile(scheme + ".1"); !bytes.Equal(first, again) {
		t.Errorf("one worker wrote another scheme file:\n%s\n%s", first, again)
	}
	s, err := ooid.LoadScheme(scheme)
	if err != nil || s.String() != res.Scheme {
		t.Fatalf("the scheme file holds %v (%v), keysearch said %s", s, err, res.Scheme)
	}
	if n := pairs("--scheme", scheme, dir+"/c"); n != 0 {
		t.Errorf("audit --scheme over the data: %d pairs", n)
	}
	code, out = call("run", "--in", dir+"/c", "--out", dir+"/out", "-q", "--json", "--scheme", scheme)
	if code != cli.ExitOK || strings.Contains(out, `"collision"`) {
		t.Fatalf("run --scheme: exit %d\n%s", code, out)
	}
	if n := pairs("--scheme", scheme, dir+"/out"); n != 0 {
		t.Errorf("audit --scheme over the run: %d pairs", n)
	}
	// ooid --scheme gives the run's IDs, and decode --verify accepts them
	// under the scheme and not under the SHA-1 window.
	lines := measurementLines(t, dir+"/out")
	var stdout, stderr bytes.Buffer
	err = run(context.Background(), []string{"ooid", "--scheme", scheme, "-"}, cli.Stdio{In: strings.NewReader(lines.names), Out: &stdout, Err: &stderr})
	if err != nil || stdout.String() != lines.want {
		t.Fatalf("ooid --scheme: %v %s\ngot a different output than the run's IDs", err, stderr.String())
	}
	stdout.Reset()
	if err := run(context.Background(), []string{"decode", "--verify", "--scheme", scheme, "-"}, cli.Stdio{In: strings.NewReader(lines.want), Out: &stdout, Err: &stderr}); err != nil {
		t.Fatalf("decode --verify --scheme: %v\n%s", err, stderr.String())
	}
	if n := strings.Count(stdout.String(), `"verified":true`); n != lines.n {
		t.Errorf("decode --verify: %d verified of %d", n, lines.n)
	}
	if code, _ := callIn(lines.want, "decode", "--verify", "-"); code != cli.ExitRejects {
		t.Errorf("decode --verify under the SHA-1 window: exit %d, want %d", code, cli.ExitRejects)
	}
}

type idLines struct {
	names, want string
	n           int
}

// measurementLines returns TEXTNAME<TAB>NDX lines for the first
// measurements of the run's output, and the OOID<TAB>TEXTNAME<TAB>NDX
// lines its rows give.
func measurementLines(t *testing.T, out string) idLines {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(out, "measurements", "*.parquet"))
	code, dump := call("status", "--json", out)
	if code != cli.ExitOK || !strings.Contains(dump, `"key_table"`) {
		t.Fatalf("status: exit %d, no key table\n%s", code, dump)
	}
	var names, want strings.Builder
	n := 0
	for _, f := range files {
		rows := readMeasurements(t, f)
		for _, m := range rows[:min(len(rows), 500)] {
			line := m.Textname + "\t" + strconv.Itoa(int(m.Ndx))
			names.WriteString(line + "\n")
			want.WriteString(ooid.FromInt64(m.OOID).String() + "\t" + line + "\n")
			n++
		}
	}
	return idLines{names.String(), want.String(), n}
}

func callIn(stdin string, args ...string) (int, string) {
	var out, errb bytes.Buffer
	code := exitCode(run(context.Background(), args, cli.Stdio{In: strings.NewReader(stdin), Out: &out, Err: &errb}), &errb)
	return code, out.String() + errb.String()
}

func TestKeysearch_Refused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "s.txt")
	s := ooid.DefaultScheme
	b, _ := ooid.MarshalScheme(s)
	testutil.Check(t, os.WriteFile(good, b, 0o644))
	bad := filepath.Join(dir, "bad.txt")
	testutil.Check(t, os.WriteFile(bad, bytes.Replace(b, []byte("counter_bits 28"), []byte("counter_bits 24"), 1), 0o644))
	manifest := filepath.Join(dir, "m.tsv")
	testutil.Check(t, os.WriteFile(manifest, []byte("2012-12-05/20121205T071421Z-MM-AS18399-http_invalid_request_line-no_report_id-0.1.0-probe.yaml\t3\n"), 0o644))
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"keysearch", manifest}, cli.ExitUsage, "--out FILE is required"},
		{[]string{"keysearch", "--out", dir + "/x", "-"}, cli.ExitUsage, "name a file"},
		{[]string{"keysearch", "--out", dir + "/x", "--seed", "a b", manifest}, cli.ExitUsage, "--seed"},
		{[]string{"keysearch", "--out", dir + "/x", "--from", "5", "--to", "5", manifest}, cli.ExitUsage, "--to"},
		{[]string{"keysearch", "--out", dir + "/x", "--table", "maybe", manifest}, cli.ExitUsage, "--table"},
		{[]string{"audit", "--scheme", bad, manifest}, cli.ExitUsage, "checksum mismatch"},
		{[]string{"audit", "--scheme", good, "--counter-bits", "24", manifest}, cli.ExitUsage, "drop --counter-bits"},
		{[]string{"run", "--scheme", bad, "--in", dir, "--out", dir + "/o"}, cli.ExitUsage, "checksum mismatch"},
		{[]string{"ooid", "--scheme", good, "--sha1-offset", "3", "x"}, cli.ExitUsage, "drop --counter-bits"},
		{[]string{"decode", "--scheme", good, "50bef44df29c69e2"}, cli.ExitUsage, "go with --verify"},
		{[]string{"decode", "--verify", "50bef44df29c69e2"}, cli.ExitUsage, "OOID TEXTNAME NDX"},
	} {
		code, out := callIn("", c.args...)
		if code != c.code || !strings.Contains(out, c.msg) {
			t.Errorf("backfill %s: exit %d, want %d with %q\n%s", strings.Join(c.args, " "), code, c.code, c.msg, out)
		}
	}
	// A width too narrow for one timestamp's measurements is a failure
	// that names the smallest width that can work.
	testutil.Check(t, os.WriteFile(manifest, []byte("2012-12-05/20121205T071421Z-MM-AS18399-http_invalid_request_line-no_report_id-0.1.0-probe.yaml\t1500000\n"), 0o644))
	if code, out := callIn("", "keysearch", "--out", dir+"/x", "--counter-bits", "20", manifest); code != cli.ExitFailure || !strings.Contains(out, "below 21 counter bits") {
		t.Errorf("too narrow: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(dir + "/x"); err == nil {
		t.Error("a failed search wrote its scheme file")
	}
}

func readMeasurements(t *testing.T, path string) []parquetfile.Measurement {
	t.Helper()
	rows, err := parquetfile.ReadMeasurements(t.Context(), store.Local(filepath.Dir(path)), filepath.Base(path))
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// skipUnderRace skips the tests that run whole colliding corpora through
// audit, keysearch and run in process: their work is the single-goroutine
// collision logic, which the race detector slows to minutes a test; the
// plain test run covers them, and the pipeline's concurrency is raced by
// the packages' own tests.
func skipUnderRace(t *testing.T) {
	t.Helper()
	testutil.SkipUnderRace(t, "colliding corpora through the CLI, single-goroutine logic")
}
