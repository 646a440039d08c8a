package main

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/backfill-dev/backfill/gen/corpus"
	"github.com/backfill-dev/backfill/internal/cli"
	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/pipeline/deadletter"
	"github.com/backfill-dev/backfill/pipeline/sink/parquetfile"
)

// runSummary is the part of run --json that these tests read.
type runSummary struct {
	Buckets         int              `json:"buckets"`
	Skipped         int              `json:"skipped"`
	Reports         int64            `json:"reports"`
	Measurements    int64            `json:"measurements"`
	DeadLetters     int64            `json:"dead_letters"`
	Rejects         int64            `json:"rejects"`
	Notices         int64            `json:"notices"`
	RejectsByReason map[string]int64 `json:"rejects_by_reason"`
	NoticesByReason map[string]int64 `json:"notices_by_reason"`
}

func runJSON(t *testing.T, args ...string) (int, runSummary) {
	t.Helper()
	code, out := call(append([]string{"run", "-q", "--json"}, args...)...)
	var s runSummary
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("run %v: exit %d, %v\n%s", args, code, err, out)
	}
	return code, s
}

func genCorpus(t *testing.T, dir string, args ...string) []corpus.Truth {
	t.Helper()
	base := []string{"gen", "-q", "--out", dir, "--buckets", "2", "--reports", "60", "--max-measurements", "300"}
	if code, out := call(append(base, args...)...); code != cli.ExitOK {
		t.Fatalf("gen %v: exit %d\n%s", args, code, out)
	}
	truth, err := corpus.ReadTruth(dir)
	if err != nil {
		t.Fatal(err)
	}
	return truth
}

// truthReasons counts the reasons the ground truth expects.
func truthReasons(truth []corpus.Truth) map[string]int64 {
	out := map[string]int64{}
	for _, tr := range truth {
		for _, r := range tr.Reasons {
			out[r]++
		}
	}
	return out
}

// readRecords reads every dead-letter record of an output folder.
func readRecords(t *testing.T, out string) []deadletter.Record {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(out, "dead-letters", "*.jsonl"))
	var all []deadletter.Record
	for _, f := range files {
		ds, err := parquetfile.ReadDeadLetters(t.Context(), store.Local(filepath.Dir(f)), filepath.Base(f))
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, ds...)
	}
	return all
}

// Exit status and summary counts: a corpus whose damage loses nothing
// exits 0 with every record a notice; one bad textname makes it 3; so does
// --strict over notices; and a --resume over the committed output reports
// the same counts and exits the same way.
func TestRun_RejectsAndNotices(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	notices := genCorpus(t, dir+"/notices", "--corrupt", "empty_report=0.05", "--corrupt", "invalid_utf8=0.05",
		"--corrupt", "lz4_content_size=0.3")
	want := truthReasons(notices)
	if len(want) != 3 {
		t.Fatalf("the corpus has reasons %v, want the three notice kinds", want)
	}
	code, s := runJSON(t, "--in", dir+"/notices", "--out", dir+"/out1")
	if code != cli.ExitOK || s.Rejects != 0 || s.Notices != s.DeadLetters || !maps.Equal(s.NoticesByReason, want) {
		t.Errorf("notices only: exit %d, %+v; want exit 0, notices %v", code, s, want)
	}
	for _, d := range readRecords(t, dir+"/out1") {
		if d.Kind != deadletter.Notice {
			t.Errorf("record %+v: kind %q, want notice", d, d.Kind)
		}
	}
	if code, s2 := runJSON(t, "--in", dir+"/notices", "--out", dir+"/out1", "--resume"); code != cli.ExitOK || s2.Skipped != 2 ||
		s2.Notices != s.Notices || s2.Measurements != s.Measurements || s2.Reports != s.Reports || !maps.Equal(s2.NoticesByReason, s.NoticesByReason) {
		t.Errorf("--resume over the committed output: exit %d, %+v; first run %+v", code, s2, s)
	}
	if code, _ := runJSON(t, "--in", dir+"/notices", "--out", dir+"/out2", "--strict"); code != cli.ExitRejects {
		t.Errorf("--strict over notices: exit %d, want 3", code)
	}
	if code, _ := runJSON(t, "--in", dir+"/notices", "--out", dir+"/out2", "--strict", "--resume"); code != cli.ExitRejects {
		t.Errorf("--strict --resume over notices: exit %d, want 3", code)
	}

	// One bad textname: one reject, exit 3, and the same on --resume.
	rejects := genCorpus(t, dir+"/rejects", "--seed", "3", "--buckets", "1", "--reports", "100", "--corrupt", "bad_textname=0.01", "--corrupt", "empty_report=0.02")
	want = truthReasons(rejects)
	if want[deadletter.BadTextname] != 1 {
		t.Fatalf("the corpus has %d bad textnames, want 1 (pick another rate)", want[deadletter.BadTextname])
	}
	code, s = runJSON(t, "--in", dir+"/rejects", "--out", dir+"/out3")
	if code != cli.ExitRejects || s.Rejects != 1 || s.RejectsByReason[deadletter.BadTextname] != 1 || s.Notices != want[deadletter.EmptyReport] {
		t.Errorf("one reject: exit %d, %+v", code, s)
	}
	for _, d := range readRecords(t, dir+"/out3") {
		if wantKind := map[bool]string{true: deadletter.Reject, false: deadletter.Notice}[d.Reason == deadletter.BadTextname]; d.Kind != wantKind {
			t.Errorf("record %+v: kind %q, want %s", d, d.Kind, wantKind)
		}
	}
	code2, s2 := runJSON(t, "--in", dir+"/rejects", "--out", dir+"/out3", "--resume")
	s.Buckets, s.Skipped, s2.Buckets, s2.Skipped = 0, 0, 0, 0
	if code2 != code || !equalSummary(s, s2) {
		t.Errorf("--resume over the committed output: exit %d, %+v; first run exit %d, %+v", code2, s2, code, s)
	}
}

func equalSummary(a, b runSummary) bool {
	return a.Reports == b.Reports && a.Measurements == b.Measurements && a.Rejects == b.Rejects && a.Notices == b.Notices &&
		maps.Equal(a.RejectsByReason, b.RejectsByReason) && maps.Equal(a.NoticesByReason, b.NoticesByReason)
}

// run --in on a bucket folder equals the run on its parent restricted to
// that bucket, file for file (the ledger's times aside).
func TestRun_InBucketFolder(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	genCorpus(t, dir+"/c", "--corrupt", "all=0.03")
	code1, _ := runJSON(t, "--in", dir+"/c/2017-06-02", "--out", dir+"/one")
	code2, _ := runJSON(t, "--in", dir+"/c", "--out", dir+"/parent", "2017-06-02")
	if code1 != code2 {
		t.Errorf("exit %d on the bucket folder, %d on its parent", code1, code2)
	}
	for _, f := range []string{"measurements/2017-06-02.parquet", "reports/2017-06-02.parquet", "dead-letters/2017-06-02.jsonl"} {
		a, err1 := os.ReadFile(filepath.Join(dir, "one", f))
		b, err2 := os.ReadFile(filepath.Join(dir, "parent", f))
		if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
			t.Errorf("%s differs (%v, %v)", f, err1, err2)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "one", "ledger", "2017-06-01.json")); err == nil {
		t.Error("the run on one bucket folder wrote another bucket")
	}
	var l1, l2 parquetfile.Ledger
	for p, l := range map[string]*parquetfile.Ledger{"one": &l1, "parent": &l2} {
		b, err := os.ReadFile(filepath.Join(dir, p, "ledger", "2017-06-02.json"))
		if err != nil || json.Unmarshal(b, l) != nil {
			t.Fatalf("ledger of %s: %v", p, err)
		}
	}
	if l1.Fingerprint != l2.Fingerprint || !maps.Equal(l1.Counts.DeadLetters, l2.Counts.DeadLetters) || l1.Counts.Measurements != l2.Counts.Measurements {
		t.Errorf("ledgers differ: %+v, %+v", l1, l2)
	}
}

// A second writer on one output folder is refused at once, naming the
// holder's PID, in process and as a separate process; the output is then
// that of a single run, and no .tmp folder is left behind.
func TestRun_OneWriterPerOutput(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	dir := t.TempDir()
	genCorpus(t, dir+"/c", "--corrupt", "all=0.03")
	if code, _ := runJSON(t, "--in", dir+"/c", "--out", dir+"/single"); code != cli.ExitRejects {
		t.Fatalf("single run: exit %d", code)
	}
	holder, err := parquetfile.Open(t.Context(), store.Local(dir+"/out")) // the first writer
	if err != nil {
		t.Fatal(err)
	}
	pid := strconv.Itoa(os.Getpid())
	var errb bytes.Buffer
	code := exitCode(run(context.Background(), []string{"run", "-q", "--in", dir + "/c", "--out", dir + "/out"},
		cli.Stdio{In: strings.NewReader(""), Out: &bytes.Buffer{}, Err: &errb}), &errb)
	if code != cli.ExitFailure || !strings.Contains(errb.String(), "another run (pid "+pid+") is writing to "+dir+"/out") {
		t.Errorf("second writer in process: exit %d, %q", code, errb.String())
	}
	bin := buildBinary(t)
	cmd := exec.Command(bin, "run", "-q", "--in", dir+"/c", "--out", dir+"/out")
	out, _ := cmd.CombinedOutput()
	if cmd.ProcessState.ExitCode() != cli.ExitFailure || !strings.Contains(string(out), "(pid "+pid+")") {
		t.Errorf("second writer as a process: exit %d, %q", cmd.ProcessState.ExitCode(), out)
	}
	if p, locked := parquetfile.Holder(t.Context(), store.Local(dir+"/out")); !locked || p != os.Getpid() {
		t.Errorf("Holder = %d, %v; want %d, true", p, locked, os.Getpid())
	}
	holder.Close()
	if _, locked := parquetfile.Holder(t.Context(), store.Local(dir+"/out")); locked {
		t.Error("the lock is still held after Close")
	}
	cmd = exec.Command(bin, "run", "-q", "--in", dir+"/c", "--out", dir+"/out")
	if out, _ := cmd.CombinedOutput(); cmd.ProcessState.ExitCode() != cli.ExitRejects {
		t.Fatalf("run after the lock is released: exit %d\n%s", cmd.ProcessState.ExitCode(), out)
	}
	for _, sub := range []string{"measurements", "reports", "dead-letters"} {
		files, _ := filepath.Glob(filepath.Join(dir, "single", sub, "*"))
		for _, f := range files {
			a, _ := os.ReadFile(f)
			b, err := os.ReadFile(filepath.Join(dir, "out", sub, filepath.Base(f)))
			if err != nil || !bytes.Equal(a, b) {
				t.Errorf("%s/%s differs from the single run's (%v)", sub, filepath.Base(f), err)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "out", ".tmp")); !os.IsNotExist(err) {
		t.Errorf(".tmp left behind: %v", err)
	}
}

// An interrupted run says what it committed and prints the command that
// resumes it, its arguments quoted for the shell.
func TestRun_InterruptMessage(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "with space")
	genCorpus(t, dir+"/c")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var errb bytes.Buffer
	args := []string{"run", "--in", dir + "/c", "--out", dir + "/out", "--workers", "1"}
	code := exitCode(run(ctx, args, cli.Stdio{In: strings.NewReader(""), Out: &bytes.Buffer{}, Err: &errb}), &errb)
	want := "backfill: to finish, run: backfill run --resume --in '" + dir + "/c' --out '" + dir + "/out' --workers 1"
	if code != cli.ExitInterrupted || !strings.Contains(errb.String(), "0 buckets committed in this run, each whole") || !strings.Contains(errb.String(), want) {
		t.Errorf("exit %d, stderr:\n%s\nwant a line %q", code, errb.String(), want)
	}
}

// The command that finishes an interrupted run never holds the password
// of --dsn, in any form of connection string, and says it left it out.
func TestResumeCommand_NoPassword(t *testing.T) {
	t.Parallel()
	const pw = "s3cretPW"
	for _, tc := range []struct {
		args []string
		want string // in the command
	}{
		{[]string{"--in", "c", "--sink", "postgres", "--dsn", "postgres://me:" + pw + "@db:5432/ooni"}, "--dsn postgres://me@db:5432/ooni"},
		{[]string{"--dsn=postgresql://me:" + pw + "@db/ooni?sslmode=require", "--in", "c"}, "--dsn=postgresql://me@db/ooni?sslmode=require"},
		{[]string{"--dsn", "postgres://me@db/ooni?password=" + pw}, "--dsn postgres://me@db/ooni"},
		{[]string{"--dsn", "host=db user=me password=" + pw + " dbname=ooni"}, "'host=db user=me  dbname=ooni'"},
		{[]string{"--dsn", "host=db password='" + pw + " x' dbname=ooni"}, "'host=db  dbname=ooni'"},
	} {
		got := resumeCommand(tc.args)
		if strings.Contains(got, pw) || !strings.Contains(got, tc.want) || !strings.Contains(got, "password is left out") {
			t.Errorf("resumeCommand(%q) =\n%s\nwant it to hold %s and no password", tc.args, got, tc.want)
		}
	}
	if got := resumeCommand([]string{"--dsn", "postgres://me@db/ooni", "--in", "c"}); got != "backfill run --resume --dsn postgres://me@db/ooni --in c" {
		t.Errorf("without a password: %q", got)
	}
}

// A run that dies (killed, or interrupted twice) leaves its unfinished
// files in OUT/.tmp; the next run removes them, says so, and its output is
// that of a clean run.
func TestRun_LeftoversOfADeadRun(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildBinary(t)
	dir := t.TempDir()
	genCorpus(t, dir+"/c", "--buckets", "4", "--reports", "300", "--max-measurements", "20000")
	if code, _ := runJSON(t, "--in", dir+"/c", "--out", dir+"/clean"); code != cli.ExitOK {
		t.Fatalf("clean run: exit %d", code)
	}
	cmd := exec.Command(bin, "run", "-q", "--workers", "1", "--in", dir+"/c", "--out", dir+"/out")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, "out", ".tmp")
	deadline := time.Now().Add(time.Minute)
	for {
		if ents, _ := os.ReadDir(tmp); len(ents) > 0 {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("the run wrote nothing into .tmp")
		}
		runtime.Gosched()
	}
	cmd.Process.Kill()
	cmd.Wait()
	left, _ := os.ReadDir(tmp)
	if len(left) == 0 {
		t.Fatal("the killed run left nothing in .tmp: nothing to test")
	}
	var errb bytes.Buffer
	code := exitCode(run(context.Background(), []string{"run", "-q", "--resume", "--in", dir + "/c", "--out", dir + "/out"},
		cli.Stdio{In: strings.NewReader(""), Out: &bytes.Buffer{}, Err: &errb}), &errb)
	if code != cli.ExitOK {
		t.Fatalf("next run: exit %d\n%s", code, errb.String())
	}
	if !strings.Contains(errb.String(), "that a run that died left in "+tmp) {
		t.Errorf("the next run does not say it removed the leftovers:\n%s", errb.String())
	}
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Errorf(".tmp still there: %v", err)
	}
	for _, sub := range []string{"measurements", "reports", "dead-letters"} {
		files, _ := filepath.Glob(filepath.Join(dir, "clean", sub, "*"))
		for _, f := range files {
			a, _ := os.ReadFile(f)
			b, err := os.ReadFile(filepath.Join(dir, "out", sub, filepath.Base(f)))
			if err != nil || !bytes.Equal(a, b) {
				t.Errorf("%s/%s differs from the clean run's (%v)", sub, filepath.Base(f), err)
			}
		}
	}
}
