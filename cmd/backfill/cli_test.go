package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/tools/txtar"

	"github.com/backfill-dev/backfill/docs"
	"github.com/backfill-dev/backfill/internal/cli"
	"github.com/backfill-dev/backfill/internal/pgtest"
	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/internal/testutil"
	"github.com/backfill-dev/backfill/pipeline/sink/parquetfile"
)

// TestCLI runs the scenarios of testdata/cli/*.txtar in process. The
// archive comment holds "args: ..." (split at spaces) and "exit: N", and
// any number of "setup: ..." commands run first, each of which must exit 0
// or 3; the files are stdin, stdout (compared exactly), stdout-contains and
// stderr (each of their lines must appear in that output), stderr-lacks
// (none of its lines may appear), fs/PATH, written to $WORK/PATH first,
// and fs-after/PATH, written there right after the first setup command
// that is a gen (into the corpus it made: gen writes only into an empty
// folder). $WORK is a fresh folder and $PGDSN the URL
// of a fresh database on the test server, wherever they appear.
func TestCLI(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("testdata/cli/*.txtar")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			ar, err := txtar.ParseFile(file)
			if err != nil {
				t.Fatal(err)
			}
			work := t.TempDir()
			pgdsn := ""
			expand := func(s string) string {
				if strings.Contains(s, "$PGDSN") && pgdsn == "" {
					pgdsn = pgtest.NewDatabase(t)
				}
				return strings.ReplaceAll(strings.ReplaceAll(s, "$WORK", work), "$PGDSN", pgdsn)
			}
			ar.Comment = []byte(expand(string(ar.Comment)))
			args, wantExit := scenarioHeader(t, ar.Comment)
			parts := map[string][]byte{}
			var after []txtar.File
			write := func(p string, data []byte) {
				path := filepath.Join(work, filepath.FromSlash(p))
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			for _, f := range ar.Files {
				if p, ok := strings.CutPrefix(f.Name, "fs/"); ok {
					write(p, f.Data)
					continue
				}
				if p, ok := strings.CutPrefix(f.Name, "fs-after/"); ok {
					after = append(after, txtar.File{Name: p, Data: f.Data})
					continue
				}
				switch f.Name {
				case "stdin", "stdout", "stdout-contains", "stderr", "stderr-lacks":
				default:
					t.Fatalf("unknown part %q (a typo would test nothing)", f.Name)
				}
				parts[f.Name] = []byte(expand(string(f.Data)))
			}
			for _, line := range strings.Split(string(ar.Comment), "\n") {
				if v, ok := strings.CutPrefix(line, "setup:"); ok {
					if code, out := call(strings.Fields(v)...); code != cli.ExitOK && code != cli.ExitRejects {
						t.Fatalf("setup %s: exit %d\n%s", v, code, out)
					}
					if strings.Fields(v)[0] == "gen" {
						for _, f := range after {
							write(f.Name, f.Data)
						}
						after = nil
					}
				}
			}
			if len(after) > 0 {
				t.Fatal("fs-after/ files, but no setup: gen to write them after")
			}
			var stdout, stderr bytes.Buffer
			err = run(context.Background(), args, cli.Stdio{In: bytes.NewReader(parts["stdin"]), Out: &stdout, Err: &stderr})
			code := exitCode(err, &stderr)
			if code != wantExit {
				t.Errorf("backfill %s: exit %d, want %d\nstderr:\n%s", strings.Join(args, " "), code, wantExit, stderr.String())
			}
			if want, ok := parts["stdout"]; ok && stdout.String() != string(want) {
				t.Errorf("stdout:\n%s\nwant:\n%s", stdout.String(), want)
			}
			containsLines(t, "stdout", stdout.String(), parts["stdout-contains"])
			containsLines(t, "stderr", stderr.String(), parts["stderr"])
			for _, line := range strings.Split(strings.TrimSpace(string(parts["stderr-lacks"])), "\n") {
				if line != "" && strings.Contains(stderr.String(), line) {
					t.Errorf("stderr contains %q:\n%s", line, stderr.String())
				}
			}
		})
	}
}

func containsLines(t *testing.T, name, got string, want []byte) {
	t.Helper()
	for _, line := range strings.Split(strings.TrimSpace(string(want)), "\n") {
		if line != "" && !strings.Contains(got, line) {
			t.Errorf("%s does not contain %q:\n%s", name, line, got)
		}
	}
}

func scenarioHeader(t *testing.T, comment []byte) (args []string, exit int) {
	t.Helper()
	exit = -1
	for _, line := range strings.Split(string(comment), "\n") {
		if v, ok := strings.CutPrefix(line, "args:"); ok {
			args = strings.Fields(v)
		}
		if v, ok := strings.CutPrefix(line, "exit:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatalf("bad exit line %q", line)
			}
			exit = n
		}
	}
	if args == nil || exit < 0 {
		t.Fatalf("scenario comment lacks args: or exit: lines:\n%s", comment)
	}
	return args, exit
}

// TestBinary checks what only the real process shows: main's exit statuses
// the help on standard output for -h (so that backfill run -h | less
// works), and the version from the build info.
func TestBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "backfill")
	build := exec.Command("go", "build", "-buildvcs=true", "-ldflags", "-X main.version=v9.9.9-test", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	rev, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatalf("git rev-parse HEAD: %v", err)
	}
	revision := strings.TrimSpace(string(rev))
	for _, tc := range []struct {
		args       []string
		stdin      string
		exit       int
		out, err   string
		outMissing bool
	}{
		{args: []string{"--version"}, exit: 0, out: "backfill v9.9.9-test\nrevision " + revision},
		{args: []string{"version"}, exit: 0, out: "built    with " + runtime.Version() + " for " + runtime.GOOS + "/" + runtime.GOARCH + "\n"},
		{args: []string{"version", "--json"}, exit: 0, out: `{"version":"v9.9.9-test","revision":"` + revision},
		{args: []string{"ooid", "-h"}, exit: 0, out: "Exit status:"},
		{args: []string{"run", "--help"}, exit: 0, out: "Usage: backfill run"},
		{args: []string{"-h"}, exit: 0, out: "Commands:"},
		{args: []string{}, exit: 2, err: "no command given"},
		{args: []string{"ooid", "-"}, stdin: "bad\n", exit: 3, err: "line 1:"},
		{args: []string{"decode", "50bef44df29c69e2"}, exit: 0, out: `"unix":1354691661`},
	} {
		cmd := exec.Command(bin, tc.args...)
		cmd.Stdin = strings.NewReader(tc.stdin)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		code := testutil.ExitCode(cmd.Run())
		if code == -1000 {
			t.Fatalf("backfill %q did not run", tc.args)
		}
		if code != tc.exit || !strings.Contains(stdout.String(), tc.out) || !strings.Contains(stderr.String(), tc.err) {
			t.Errorf("backfill %q: exit %d, stdout %q, stderr %q; want exit %d, stdout with %q, stderr with %q",
				tc.args, code, stdout.String(), stderr.String(), tc.exit, tc.out, tc.err)
		}
	}
	_ = os.Remove(bin)
}

// TestDocsListCommands: every command has a section in docs/cli.md, a line in the
// main help, and exit statuses in its own help.
func TestDocsListCommands(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range commands() {
		if !strings.Contains(string(readme), "### `backfill "+c.name+"`") {
			t.Errorf("docs/cli.md has no section for %s", c.name)
		}
		if !strings.Contains(mainHelp(), "\t"+c.name+" ") {
			t.Errorf("main help does not list %s", c.name)
		}
		if h := docs.Help(c.name); !strings.Contains(h, "\nExit status:\n") || !strings.HasPrefix(h, "Usage: backfill "+c.name) {
			t.Errorf("help of %s lacks its usage line or exit statuses", c.name)
		}
	}
}

// call runs the CLI in process and returns the exit status and stdout.
func call(args ...string) (int, string) {
	var out, errb bytes.Buffer
	code := exitCode(run(context.Background(), args, cli.Stdio{In: strings.NewReader(""), Out: &out, Err: &errb}), &errb)
	return code, out.String()
}

// gen then run, in process: a damaged corpus completes with exit 3 and a
// summary on stdout; a clean one exits 0; --resume skips what is done.
func TestGenRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if code, out := call("gen", "--out", dir+"/bad", "--buckets", "2", "--reports", "60", "--can-size", "64KiB",
		"--max-measurements", "2000", "--corrupt", "all=0.05", "--corrupt", "huge_blob=0.05", "--huge-blob", "2MiB", "--max-blob", "1MiB"); code != 0 || !strings.Contains(out, "ground truth") {
		t.Fatalf("gen: exit %d\n%s", code, out)
	}
	code, out := call("run", "--in", dir+"/bad", "--out", dir+"/out", "-q", "--json", "--max-blob", "1MiB")
	var sum struct {
		Buckets      int              `json:"buckets"`
		Measurements int64            `json:"measurements"`
		DeadLetters  int64            `json:"dead_letters"`
		Reasons      map[string]int64 `json:"dead_letters_by_reason"`
	}
	if err := json.Unmarshal([]byte(out), &sum); err != nil || code != cli.ExitRejects || sum.Buckets != 2 || sum.DeadLetters == 0 || sum.Measurements == 0 {
		t.Fatalf("run over a damaged corpus: exit %d, %v\n%s", code, err, out)
	}
	call("gen", "--out", dir+"/good", "--buckets", "1", "--reports", "30", "--max-measurements", "500")
	if code, out := call("run", "--in", dir+"/good", "--out", dir+"/out2", "-q"); code != cli.ExitOK || !strings.Contains(out, "1 committed, 0 skipped") {
		t.Fatalf("run over a clean corpus: exit %d\n%s", code, out)
	}
	if code, out := call("run", "--in", dir+"/good", "--out", dir+"/out2", "-q", "--resume"); code != cli.ExitOK || !strings.Contains(out, "0 committed, 1 skipped") {
		t.Fatalf("resume: exit %d\n%s", code, out)
	}
}

// audit over a colliding corpus's canned data and over the run's report
// manifests finds the same pairs, and the run rejected exactly the reports
// that the policy rejects among those pairs.
func TestAuditRun(t *testing.T) {
	t.Parallel()
	skipUnderRace(t)
	dir := t.TempDir()
	if code, out := call("gen", "--out", dir+"/c", "--buckets", "2", "--reports", "80", "--min-measurements", "400",
		"--max-measurements", "5000", "--time-slots", "3", "--max-template", "1KiB"); code != 0 {
		t.Fatalf("gen: exit %d\n%s", code, out)
	}
	code, out := call("run", "--in", dir+"/c", "--out", dir+"/out", "-q", "--json", "--counter-bits", "20")
	var sum struct {
		Reasons map[string]int64 `json:"dead_letters_by_reason"`
	}
	if err := json.Unmarshal([]byte(out), &sum); err != nil || code != cli.ExitRejects {
		t.Fatalf("run: exit %d, %v\n%s", code, err, out)
	}
	type result struct {
		Reports int64 `json:"reports"`
		Results []struct {
			Pairs int64 `json:"colliding_pairs"`
			First []struct {
				A string `json:"a"`
				B string `json:"b"`
			} `json:"pairs"`
		} `json:"results"`
	}
	audit := func(in string) result {
		code, out := call("audit", "--counter-bits", "20", "--pairs", "1000", "--json", in)
		var r result
		if err := json.Unmarshal([]byte(out), &r); err != nil || code != cli.ExitOK || len(r.Results) != 1 {
			t.Fatalf("audit %s: exit %d, %v\n%s", in, code, err, out)
		}
		return r
	}
	fromData, fromRun := audit(dir+"/c"), audit(dir+"/out")
	if fromData.Reports != fromRun.Reports || fromData.Results[0].Pairs != fromRun.Results[0].Pairs {
		t.Errorf("canned data: %d reports, %d pairs; run output: %d, %d", fromData.Reports, fromData.Results[0].Pairs, fromRun.Reports, fromRun.Results[0].Pairs)
	}
	if fromRun.Results[0].Pairs < 3 {
		t.Fatalf("only %d pairs: the corpus does not collide enough", fromRun.Results[0].Pairs)
	}
	losers := map[string]bool{}
	for _, p := range fromRun.Results[0].First {
		losers[max(p.A, p.B)] = true
	}
	if got := sum.Reasons["collision"]; got != int64(len(losers)) {
		t.Errorf("the run rejected %d reports for collisions; the audit's pairs have %d losers", got, len(losers))
	}
}

// gen --format both, then run and audit each way: the canned form, the
// autoclaved data path and --from-index give the same measurements and
// the same colliding pairs, and their measurement rows are identical.
func TestAutoclavedCLI(t *testing.T) {
	t.Parallel()
	skipUnderRace(t)
	dir := t.TempDir()
	if code, out := call("gen", "--format", "both", "--out", dir+"/c", "--buckets", "2", "--reports", "60", "--min-measurements", "200",
		"--max-measurements", "1500", "--time-slots", "3", "--corrupt", "badblob=0.1", "--max-template", "1KiB"); code != 0 || !strings.Contains(out, "{canned,autoclaved}") {
		t.Fatalf("gen: exit %d\n%s", code, out)
	}
	for _, ndx := range []string{"blobs", "datums"} {
		ways := map[string][]string{
			"canned":     {"--in", dir + "/c/canned"},
			"data":       {"--in", dir + "/c/autoclaved", "--verify"},
			"from-index": {"--in", dir + "/c/autoclaved", "--from-index"},
		}
		var pairs []string
		for name, args := range ways {
			out := dir + "/out-" + ndx + "-" + name
			code, stdout := call(append([]string{"run", "-q", "--json", "--counter-bits", "20", "--ndx", ndx, "--out", out}, args...)...)
			if code != cli.ExitRejects && code != cli.ExitOK {
				t.Fatalf("%s %s: exit %d\n%s", ndx, name, code, stdout)
			}
			auditArgs := []string{"audit", "--counter-bits", "20", "--ndx", ndx, "--json", "--pairs", "1000", args[1]}
			if name == "from-index" {
				auditArgs = append(auditArgs[:len(auditArgs)-1], "--from-index", args[1])
			}
			_, audit := call(auditArgs...)
			i := strings.Index(audit, `"results"`)
			if i < 0 {
				t.Fatalf("audit %s: %s", name, audit)
			}
			pairs = append(pairs, audit[i:])
		}
		if pairs[0] != pairs[1] || pairs[1] != pairs[2] {
			t.Errorf("%s: the audits differ:\n%s", ndx, strings.Join(pairs, "\n"))
		}
		if !strings.Contains(pairs[0], `"colliding_pairs":`) || strings.Contains(pairs[0], `"colliding_pairs":0`) {
			t.Errorf("%s: no colliding pairs: %s", ndx, pairs[0])
		}
		for _, b := range []string{"2017-06-01", "2017-06-02"} {
			var rows []string
			for _, name := range []string{"canned", "data", "from-index"} {
				ms, err := parquetfile.ReadMeasurements(t.Context(), store.Local(dir+"/out-"+ndx+"-"+name), "measurements/"+b+".parquet")
				if err != nil || len(ms) == 0 {
					t.Fatalf("%s: %d rows, %v", name, len(ms), err)
				}
				rows = append(rows, fmt.Sprint(ms))
			}
			if rows[0] != rows[1] || rows[1] != rows[2] {
				t.Errorf("%s %s: the measurement rows differ", ndx, b)
			}
		}
	}
	// The two forms agree with each other, orig_sha1s included.
	code, stdout := call("run", "-q", "--json", "--out", dir+"/out-checked", "--in", dir+"/c/autoclaved", "--from-index", "--canned", dir+"/c/canned")
	if code != cli.ExitRejects && code != cli.ExitOK || !strings.Contains(stdout, `"measurements":`) || strings.Contains(stdout, "canned_mismatch") {
		t.Errorf("--canned: exit %d\n%s", code, stdout)
	}
}

// A failure met by several writers at once (a full disk) is joined from
// their errors; it is printed once.
func TestExitCode_JoinedErrorOnce(t *testing.T) {
	t.Parallel()
	full := errors.New("write out/.tmp/x: no space left on device")
	var stderr bytes.Buffer
	if code := exitCode(errors.Join(full, full, errors.New("other")), &stderr); code != cli.ExitFailure {
		t.Fatalf("exit %d, want %d", code, cli.ExitFailure)
	}
	want := "backfill: " + full.Error() + "\nbackfill: other\n"
	if stderr.String() != want {
		t.Errorf("stderr %q, want %q", stderr.String(), want)
	}
}

// A run whose containers are all gone has no report with IDs, and says
// so: every report its indexes list is a missing_container reject.
func TestRun_EveryContainerMissing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if code, out := call("gen", "-q", "--out", dir+"/c", "--buckets", "2", "--reports", "30", "--max-measurements", "50"); code != cli.ExitOK {
		t.Fatalf("gen: exit %d\n%s", code, out)
	}
	files, _ := filepath.Glob(dir + "/c/*/*.lz4")
	for _, f := range files {
		testutil.Check(t, os.Remove(f))
	}
	code, out := call("run", "-q", "--in", dir+"/c", "--out", dir+"/out")
	if code != cli.ExitRejects || !strings.Contains(out, "reports        0 (that have IDs; a report lost with its file is a reject)") ||
		!strings.Contains(out, "measurements   0 (that have IDs)") || !strings.Contains(out, "  missing_container    60\n") {
		t.Errorf("run: exit %d\n%s", code, out)
	}
}
