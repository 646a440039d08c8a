package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"maps"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/backfill-dev/backfill/gen/corpus"
	"github.com/backfill-dev/backfill/internal/cli"
	"github.com/backfill-dev/backfill/internal/pgtest"
	"github.com/backfill-dev/backfill/internal/s3test"
	"github.com/backfill-dev/backfill/internal/testutil"
)

// hangBound is how long a command may take before a test calls it hung:
// not a speed, a bound on what must never wait forever.
const hangBound = time.Minute

// callWithin is call, failing the test if the command has not returned
// within hangBound.
func callWithin(t *testing.T, args ...string) (int, string) {
	t.Helper()
	type result struct {
		code int
		out  string
	}
	done := make(chan result, 1)
	go func() {
		code, out := callIn("", args...)
		done <- result{code, out}
	}()
	select {
	case r := <-done:
		return r.code, r.out
	case <-time.After(hangBound):
		t.Fatalf("%v: still running after %s", args, hangBound)
		return 0, ""
	}
}

// An absurd --workers is a usage error before anything starts, in every
// command that takes it.
func TestWorkers_Bounded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	genCorpus(t, dir)
	for _, args := range [][]string{
		{"run", "--in", dir, "--out", t.TempDir()},
		{"audit", dir},
		{"keysearch", "--counter-bits", "24", "--out", filepath.Join(t.TempDir(), "s"), dir},
		{"verify", "--in", dir, t.TempDir()},
	} {
		for _, n := range []string{"100000000", "0"} {
			code, out := callWithin(t, append(args[:1:1], append([]string{"--workers", n}, args[1:]...)...)...)
			if code != cli.ExitUsage || !strings.Contains(out, "--workers must be 1 to") {
				t.Errorf("%s --workers %s: exit %d\n%s\nwant 2 and the bound", args[0], n, code, out)
			}
		}
	}
}

// A FIFO where a bucket's index.json.gz should be is an unreadable index
// (read as a missing one), named in its record, in every command that
// reads bucket folders; nothing waits for a writer.
func TestFIFOIndex_NoWait(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	genCorpus(t, in)
	ix := filepath.Join(in, "2017-06-02", "index.json.gz")
	testutil.Check(t, os.Remove(ix))
	testutil.Check(t, syscall.Mkfifo(ix, 0o644))
	out := filepath.Join(dir, "out")
	code, said := callWithin(t, "run", "-q", "--json", "--in", in, "--out", out)
	if code != cli.ExitOK || !strings.Contains(said, `"unreadable":1`) {
		t.Errorf("run: exit %d\n%s\nwant 0 with one unreadable notice", code, said)
	}
	recs := readRecords(t, out)
	found := false
	for _, r := range recs {
		if r.Reason == "unreadable" && strings.Contains(r.Message, "a FIFO") {
			found = true
		}
	}
	if !found {
		t.Errorf("no unreadable record naming the FIFO: %+v", recs)
	}
	for _, args := range [][]string{{"verify", "--in", in, out}, {"audit", in}, {"status", out}} {
		if code, said := callWithin(t, args...); code != cli.ExitOK {
			t.Errorf("%v: exit %d\n%s", args, code, said)
		}
	}
}

// A content-size field of 0 or 2^64-1 is a wrong size like any other: a
// notice (lz4_content_size), the measurements as a clean run gives them.
func TestLZ4ContentSize_EdgeValues(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	clean := filepath.Join(dir, "clean")
	genCorpus(t, clean)
	_, want := runJSON(t, "--in", clean, "--out", filepath.Join(dir, "out-clean"))
	for _, size := range []uint64{0, math.MaxUint64} {
		in := filepath.Join(dir, "claim", strings.ReplaceAll(time.Duration(size).String(), "-", "m"))
		testutil.Check(t, os.CopyFS(in, os.DirFS(clean)))
		tars, _ := filepath.Glob(filepath.Join(in, "2017-06-01", "*.tar.lz4"))
		if len(tars) == 0 {
			t.Fatal("no canned tar container to damage")
		}
		testutil.Check(t, corpus.ClaimContentSize(tars[0], size))
		code, got := runJSON(t, "--in", in, "--out", filepath.Join(in+"-out"))
		if code != cli.ExitOK || got.Rejects != 0 || got.NoticesByReason["lz4_content_size"] != 1 ||
			got.Measurements != want.Measurements || got.Reports != want.Reports {
			t.Errorf("content size %d: exit %d, %+v; want exit 0, one lz4_content_size notice, and the clean run's %d measurements",
				size, code, got, want.Measurements)
		}
		delete(got.NoticesByReason, "lz4_content_size")
		delete(got.NoticesByReason, "size_mismatch")
		delete(got.NoticesByReason, "checksum_mismatch")
		if !maps.Equal(got.NoticesByReason, want.NoticesByReason) {
			t.Errorf("content size %d: notices %v, clean %v", size, got.NoticesByReason, want.NoticesByReason)
		}
	}
}

// A lock file planted as a link (OUT/.lock to a file the run must not
// touch) is refused; the link's target keeps its content.
func TestRun_PlantedLockLink(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	genCorpus(t, in)
	victim := filepath.Join(dir, "victim")
	testutil.Check(t, os.WriteFile(victim, []byte("precious\n"), 0o600))
	out := filepath.Join(dir, "out")
	testutil.Check(t, os.MkdirAll(out, 0o755))
	testutil.Check(t, os.Symlink(victim, filepath.Join(out, ".lock")))
	code, said := callWithin(t, "run", "-q", "--in", in, "--out", out)
	if code == cli.ExitOK || code == cli.ExitRejects || !strings.Contains(said, "link") {
		t.Errorf("run with OUT/.lock a link: exit %d\n%s\nwant a failure that names the link", code, said)
	}
	if b, err := os.ReadFile(victim); err != nil || string(b) != "precious\n" {
		t.Errorf("the lock link's target holds %q (%v)", b, err)
	}
}

// SIGTERM stops a command within a few seconds whatever it is doing, a
// read of a standard input that stays silent included: stamp, which has
// stamped a line and waits for the next, exits 130.
func TestSignal_StopsWhileBlocked(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			stopsWhileBlocked(t, sig)
		})
	}
}

// stopsWhileBlocked is TestSignal_StopsWhileBlocked with sig: SIGHUP (an
// ssh session dropped) stops a command as SIGTERM does.
func stopsWhileBlocked(t *testing.T, sig syscall.Signal) {
	bin := buildBinary(t)
	cmd := exec.Command(bin, "stamp", "--collector-id", "7", "--state", filepath.Join(t.TempDir(), "state"))
	stdin, err := cmd.StdinPipe()
	testutil.Check(t, err)
	stdout, err := cmd.StdoutPipe()
	testutil.Check(t, err)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	testutil.Check(t, cmd.Start())
	defer stdin.Close()
	_, err = io.WriteString(stdin, "{\"a\":1}\n")
	testutil.Check(t, err)
	line := make(chan error, 1)
	go func() {
		_, err := bufio.NewReader(stdout).ReadString('\n')
		line <- err
	}()
	select {
	case err := <-line:
		if err != nil {
			t.Fatalf("no stamped line: %v\n%s", err, stderr.String())
		}
	case <-time.After(hangBound):
		cmd.Process.Kill()
		t.Fatalf("no stamped line within %s of the first line in: the filter holds its output\n%s", hangBound, stderr.String())
	}
	// stamp now waits on a read of its standard input, which stays open.
	testutil.Check(t, cmd.Process.Signal(sig))
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if code := testutil.ExitCode(err); code != cli.ExitInterrupted {
			t.Errorf("exit %d after %s, want %d\n%s", code, sig, cli.ExitInterrupted, stderr.String())
		}
	case <-time.After(hangBound):
		cmd.Process.Kill()
		t.Fatalf("still running %s after %s\n%s", hangBound, sig, stderr.String())
	}
}

// A closed standard output (| head -c1) is a failure the command
// reports, exit 1, not a SIGPIPE that kills it (status 141).
func TestStdout_Closed(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	in := t.TempDir()
	genCorpus(t, in)
	for _, args := range [][]string{
		{"run", "-q", "--in", in, "--out", t.TempDir()},
		{"stamp", "--collector-id", "7", "--state", filepath.Join(t.TempDir(), "state"), "--count", "10000000"},
	} {
		cmd := exec.Command(bin, args...)
		r, w, err := os.Pipe()
		testutil.Check(t, err)
		r.Close() // the reader is gone before the first write
		cmd.Stdout = w
		var stderr strings.Builder
		cmd.Stderr = &stderr
		err = cmd.Run()
		w.Close()
		if code := testutil.ExitCode(err); code != cli.ExitFailure || !strings.Contains(stderr.String(), "broken pipe") {
			t.Errorf("%s with its stdout closed: exit %d (%v), want 1 saying so\n%s", args[0], code, err, stderr.String())
		}
	}
}

// stamp --listen beyond loopback without a token says so; with a token
// (from a file, or the environment) it says nothing of the kind and asks
// every request for it.
func TestStamp_ListenToken(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	tokenFile := filepath.Join(t.TempDir(), "token")
	testutil.Check(t, os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600))
	for _, tc := range []struct {
		name  string
		extra []string
		env   string
		warn  bool
	}{
		{"no token", nil, "", true},
		{"token file", []string{"--token-file", tokenFile}, "", false},
		{"token env", nil, "BACKFILL_STAMP_TOKEN=s3cret", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"stamp", "--collector-id", "9", "--state", filepath.Join(t.TempDir(), "state"), "--listen", "0.0.0.0:0"}, tc.extra...)
			cmd := exec.Command(bin, args...)
			cmd.Env = os.Environ()
			if tc.env != "" {
				cmd.Env = append(cmd.Env, tc.env)
			}
			stderr, err := cmd.StderrPipe()
			testutil.Check(t, err)
			testutil.Check(t, cmd.Start())
			lines := make(chan string, 16)
			go func() {
				defer close(lines)
				sc := bufio.NewScanner(stderr)
				for sc.Scan() {
					lines <- sc.Text()
				}
			}()
			next := func() string {
				select {
				case l := <-lines:
					return l
				case <-time.After(hangBound):
					cmd.Process.Kill()
					t.Fatal("stamp said nothing")
				}
				return ""
			}
			first := next()
			where, ok := strings.CutPrefix(first, "backfill: stamp: serving IDs on http://")
			if !ok {
				t.Fatalf("stamp said %q", first)
			}
			url := "http://127.0.0.1:" + where[strings.LastIndex(where, ":")+1:] // every interface: this machine's loopback too
			if tc.warn {
				if w := next(); !strings.Contains(w, "warning") || !strings.Contains(w, "no token") {
					t.Errorf("beyond loopback without a token: %q, want a warning", w)
				}
			} else {
				resp, err := http.Get(url)
				testutil.Check(t, err)
				resp.Body.Close()
				if resp.StatusCode != http.StatusUnauthorized {
					t.Errorf("a request without the token: %d, want 401", resp.StatusCode)
				}
				req, _ := http.NewRequest(http.MethodGet, url, nil)
				req.Header.Set("Authorization", "Bearer s3cret")
				resp, err = http.DefaultClient.Do(req)
				testutil.Check(t, err)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Errorf("a request with the token: %d, want 200", resp.StatusCode)
				}
			}
			testutil.Check(t, cmd.Process.Signal(syscall.SIGTERM))
			var rest []string
			for l := range lines {
				rest = append(rest, l)
			}
			cmd.Wait()
			for _, l := range rest {
				if strings.Contains(l, "warning") || strings.Contains(l, "s3cret") {
					t.Errorf("with a token: %q", l)
				}
			}
		})
	}
}

// A message's fields that reach stderr (a collection's name, in the error
// of a missing collection) cannot forge a line or send a terminal escape.
func TestGranuleWrite_FieldsEscaped(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabase(t)
	if code, out := callIn("", "granule-schema", "--dsn", url); code != 0 {
		t.Fatalf("granule-schema: %d %s", code, out)
	}
	in := filepath.Join(t.TempDir(), "m.jsonl")
	granuleMsgs(t, in, "EVIL\nbackfill: forged line\x1b[2J\u202e___1", "g", 1)
	var out, errb bytes.Buffer
	code := exitCode(run(context.Background(), []string{"granule-write", "--dsn", url, "--archive", t.TempDir(), in},
		cli.Stdio{In: strings.NewReader(""), Out: &out, Err: &errb}), &errb)
	if code != cli.ExitRejects {
		t.Fatalf("exit %d\n%s", code, errb.String())
	}
	said := errb.String()
	if !strings.Contains(said, `EVIL\nbackfill: forged line\x1b[2J\u202e`) {
		t.Errorf("the collection's name is not in the message, escaped:\n%q", said)
	}
	for _, l := range strings.Split(said, "\n") {
		if strings.HasPrefix(l, "backfill: forged") || strings.ContainsAny(l, "\x1b\u202e") {
			t.Errorf("a forged line or a terminal escape on stderr: %q", l)
		}
	}
}

// --out inside --in (by its path or through a link) is a usage error: the
// output would be read as input.
func TestRun_OutInsideIn(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	genCorpus(t, in)
	testutil.Check(t, os.Symlink(in, filepath.Join(dir, "link")))
	for _, out := range []string{filepath.Join(in, "out"), filepath.Join(in, "2017-06-01", "out"), filepath.Join(dir, "link", "out")} {
		code, said := callIn("", "run", "-q", "--in", in, "--out", out)
		if code != cli.ExitUsage || !strings.Contains(said, "is inside --in") {
			t.Errorf("--out %s: exit %d\n%s\nwant 2, inside --in", out, code, said)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("--out %s was made", out)
		}
	}
}

// A bucket folder that is a link out of --in is refused by name, whether
// buckets are named or not; never skipped in silence.
func TestRun_BucketLinkOutOfIn(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	genCorpus(t, in)
	other := filepath.Join(dir, "other")
	genCorpus(t, other, "--start", "2017-07-01", "--buckets", "1")
	testutil.Check(t, os.Symlink(filepath.Join(other, "2017-07-01"), filepath.Join(in, "2017-07-01")))
	for _, args := range [][]string{
		{"run", "-q", "--in", in, "--out", filepath.Join(dir, "out1")},
		{"run", "-q", "--in", in, "--out", filepath.Join(dir, "out2"), "2017-07-01"},
	} {
		code, said := callIn("", args...)
		if code != cli.ExitUsage || !strings.Contains(said, "bucket 2017-07-01 is a symbolic link that leads out") {
			t.Errorf("%v: exit %d\n%s\nwant 2 and the link named", args, code, said)
		}
	}
}

// An S3 prefix the caller may not read is said as that (exit 1), not
// called "not a folder" (a usage error).
func TestStatus_S3Forbidden(t *testing.T) {
	srv, dir := s3Corpus(t)
	if code, out := callIn("", "run", "-q", "--in", dir+"/canned", "--out", "s3://test/out"); code != cli.ExitRejects {
		t.Fatalf("run: exit %d\n%s", code, out)
	}
	srv.Inject(s3test.Fault{Kind: s3test.Status403, Times: 1 << 30})
	code, said := callIn("", "status", "s3://test/out")
	if code != cli.ExitFailure || strings.Contains(said, "not a folder") || !strings.Contains(said, "403") {
		t.Errorf("status of a forbidden prefix: exit %d\n%s\nwant 1 and the refusal said", code, said)
	}
}
