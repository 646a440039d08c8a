package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/backfill-dev/backfill/internal/cli"
	"github.com/backfill-dev/backfill/internal/s3test"
	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/internal/store/location"
	"github.com/backfill-dev/backfill/internal/testutil"
	"github.com/backfill-dev/backfill/pipeline/sink/parquetfile"
	"github.com/backfill-dev/backfill/pipeline/stamped"
)

// s3Corpus generates a damaged corpus in both layouts into a local folder
// and into s3://test/c on a test server, and returns both.
func s3Corpus(t *testing.T) (*s3test.Server, string) {
	t.Helper()
	srv := s3test.Start(t, "test")
	dir := t.TempDir() + "/c"
	if code, out := call(append(s3Gen(), "--out", dir)...); code != cli.ExitOK {
		t.Fatalf("gen: exit %d\n%s", code, out)
	}
	dst, err := location.Open(context.Background(), "s3://test/c")
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Upload(t.Context(), dst, dir); err != nil {
		t.Fatal(err)
	}
	return srv, dir
}

// s3Gen is the gen command of s3Corpus, but for its --out.
func s3Gen() []string {
	reports := "60"
	if testutil.RaceEnabled {
		reports = "20" // the detector needs the S3 client's goroutines, not the volume
	}
	return []string{"gen", "-q", "--format", "both", "--buckets", "3", "--reports", reports, "--max-measurements", "300", "--corrupt", "all=0.03"}
}

// tree reads every file of an output (local folder or s3:// prefix), by
// name, but for the lock and the temporary folder.
func tree(t *testing.T, loc string) map[string][]byte {
	t.Helper()
	st, err := location.Open(context.Background(), loc)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	err = fs.WalkDir(store.FS(t.Context(), st), ".", func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // an S3 prefix with nothing under it
		}
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p == store.TmpDir {
				return fs.SkipDir
			}
			return nil
		}
		if p == parquetfile.LockName || p == parquetfile.CatalogueName {
			return nil // the lock, and the catalogue (a cache of the ledger)
		}
		b, err := store.ReadFile(t.Context(), st, p)
		if err != nil {
			return err
		}
		out[p] = b
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// sameOutput holds two outputs of the same corpus to each other byte for
// byte. The input fingerprint names the input's version (modification times
// on disk, ETags on S3), so with differentFingerprints each bucket's is
// swapped for the other side's before the bytes are compared (the strings
// have one length: the files are otherwise the same bytes); the ledgers'
// start and finish times, and the inputs they name, always differ.
func sameOutput(t *testing.T, want, got map[string][]byte, differentFingerprints bool) {
	t.Helper()
	var names []string
	for n := range want {
		names = append(names, n)
	}
	sort.Strings(names)
	for n := range got {
		if _, ok := want[n]; !ok {
			t.Errorf("%s: not in the reference output", n)
		}
	}
	fingerprint := func(files map[string][]byte, bucket string) string {
		var l parquetfile.Ledger
		if err := json.Unmarshal(files["ledger/"+bucket+".json"], &l); err != nil {
			t.Fatalf("ledger of %s: %v", bucket, err)
		}
		return l.Fingerprint
	}
	for _, n := range names {
		g, ok := got[n]
		if !ok {
			t.Errorf("%s: missing", n)
			continue
		}
		w := want[n]
		bucket := strings.SplitN(filepath.Base(n), ".", 2)[0]
		if strings.HasPrefix(n, "ledger/") {
			var a, b parquetfile.Ledger
			testutil.Check(t, json.Unmarshal(w, &a))
			testutil.Check(t, json.Unmarshal(g, &b))
			a.Started, a.Finished, b.Started, b.Finished = time.Time{}, time.Time{}, time.Time{}, time.Time{}
			// Each names the input it was read from, the outputs' own.
			if a.Source == "" || b.Source == "" {
				t.Errorf("%s: a ledger names no input (%q, %q)", n, a.Source, b.Source)
			}
			a.Source, b.Source = "", ""
			if differentFingerprints {
				a.Fingerprint, b.Fingerprint, a.Listing, b.Listing = "", "", "", ""
				a.Files, b.Files = nil, nil // the Parquet files record the fingerprint
			}
			if a.Bucket == "" || !equalJSON(a, b) {
				t.Errorf("%s differs:\n%s\n%s", n, w, g)
			}
			continue
		}
		if differentFingerprints {
			fw, fg := fingerprint(want, bucket), fingerprint(got, bucket)
			if fw == fg || len(fw) != len(fg) {
				t.Fatalf("%s: fingerprints %q and %q", bucket, fw, fg)
			}
			g = bytes.ReplaceAll(g, []byte(fg), []byte(fw))
		}
		if !bytes.Equal(w, g) {
			t.Errorf("%s: %d bytes differ from the reference's %d", n, len(g), len(w))
		}
	}
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// run --in s3://… --out s3://… writes what the local run writes, for both
// layouts; audit and status read s3:// as they read folders.
func TestS3_RunEqualsLocal(t *testing.T) {
	t.Setenv("BACKFILL_S3_CHUNK", strconv.Itoa(64<<10)) // many ranged GETs per file
	_, dir := s3Corpus(t)
	// gen --out s3:// writes what it writes to a folder.
	if code, out := call(append(s3Gen(), "--out", "s3://test/gen")...); code != cli.ExitOK {
		t.Fatalf("gen to s3: exit %d\n%s", code, out)
	}
	if gen, local := tree(t, "s3://test/gen"), tree(t, dir); len(gen) != len(local) || len(local) < 10 {
		t.Fatalf("gen to s3 wrote %d files, to a folder %d", len(gen), len(local))
	} else {
		for n, b := range local {
			if !bytes.Equal(gen[n], b) {
				t.Fatalf("gen to s3: %s differs", n)
			}
		}
	}
	out := t.TempDir()
	for _, layout := range []string{"canned", "autoclaved"} {
		lcode, lsum := runJSON(t, "--in", dir+"/"+layout, "--out", out+"/"+layout)
		scode, ssum := runJSON(t, "--in", "s3://test/c/"+layout, "--out", "s3://test/out/"+layout)
		if lcode != cli.ExitRejects || scode != lcode || !equalSummary(lsum, ssum) {
			t.Fatalf("%s: local exit %d %+v, s3 exit %d %+v", layout, lcode, lsum, scode, ssum)
		}
		local, remote := tree(t, out+"/"+layout), tree(t, "s3://test/out/"+layout)
		if len(local) != 4*3 {
			t.Fatalf("%s: the local output has %d files", layout, len(local))
		}
		sameOutput(t, local, remote, true)

		// The S3 output read from S3 and from a local copy of it audit alike.
		code, a := call("audit", "--json", "s3://test/out/"+layout)
		code2, b := call("audit", "--json", out+"/"+layout)
		if code != code2 || !strings.Contains(a, `"reports"`) || strings.ReplaceAll(a, "s3://test/out/"+layout, out+"/"+layout) != b {
			t.Errorf("%s: audit of the s3 output: exit %d\n%s\nlocal: exit %d\n%s", layout, code, a, code2, b)
		}
	}
	// status reads the ledger of an s3:// output and the input it came from.
	code, st := call("status", "--json", "--in", "s3://test/c/canned", "s3://test/out/canned")
	if code != cli.ExitOK || !strings.Contains(st, `"output":"Parquet in s3://test/out/canned","committed":3,`) || strings.Contains(st, "changed") {
		t.Errorf("status: exit %d\n%s", code, st)
	}
}

// Resumed after SIGKILL at random moments, an s3:// run ends in the state
// of an uninterrupted one; a ledger entry never names a half bucket; a
// changed object changes its bucket's fingerprint, and only that bucket is
// done again.
func TestS3_KillAndResume(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildBinary(t)
	srv, _ := s3Corpus(t)
	in := "s3://test/c/canned"
	s3run := func(out string, extra ...string) *exec.Cmd {
		cmd := exec.Command(bin, append([]string{"run", "-q", "--json", "--in", in, "--out", out}, extra...)...)
		cmd.Env = os.Environ()
		return cmd
	}
	start := time.Now()
	if out, err := s3run("s3://test/ref").CombinedOutput(); testutil.ExitCode(err) != cli.ExitRejects {
		t.Fatalf("reference run: %v\n%s", err, out)
	}
	full := time.Since(start)
	want := tree(t, "s3://test/ref")

	rng := rand.New(rand.NewPCG(21, 21))
	killed := 0
	var committed []int // ledger entries after each kill
	for range 8 {
		cmd := s3run("s3://test/k", "--resume")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(rng.Int64N(int64(full)*3/2 + 1)))
		cmd.Process.Signal(syscall.SIGKILL)
		if code := testutil.ExitCode(cmd.Wait()); code == -int(syscall.SIGKILL) {
			killed++
		} else if code != cli.ExitRejects {
			t.Fatalf("exit %d", code)
		}
		// Every bucket with a ledger entry has its files, of that commit.
		got := tree(t, "s3://test/k")
		n := 0
		for name := range got {
			if strings.HasPrefix(name, "ledger/") {
				n++
			}
		}
		committed = append(committed, n)
		for n, b := range got {
			bucket, ok := strings.CutSuffix(strings.TrimPrefix(n, "ledger/"), ".json")
			if !strings.HasPrefix(n, "ledger/") || !ok {
				continue
			}
			var l parquetfile.Ledger
			if err := json.Unmarshal(b, &l); err != nil {
				t.Fatalf("%s: %v", n, err)
			}
			for _, f := range []string{"measurements/" + bucket + ".parquet", "reports/" + bucket + ".parquet"} {
				if _, there := got[f]; !there && strings.HasPrefix(f, "measurements/") {
					// Killed between the ledger entry and the measurements,
					// which come back last: the bucket is not committed
					// (State), and the next run writes it again.
					continue
				}
				if !bytes.Contains(got[f], []byte(l.Fingerprint)) {
					t.Fatalf("after a kill, %s is not the file its ledger entry commits", f)
				}
			}
		}
	}
	if killed == 0 {
		t.Fatal("no run was killed before it ended")
	}
	if out, err := s3run("s3://test/k", "--resume").CombinedOutput(); testutil.ExitCode(err) != cli.ExitRejects {
		t.Fatalf("last resume: %v\n%s", err, out)
	}
	sameOutput(t, want, tree(t, "s3://test/k"), false)
	t.Logf("%d of 8 runs killed (buckets committed after each: %v); a clean run takes %v", killed, committed, full)

	// A changed object: its bucket, and only it, is done again.
	src, _ := location.Open(context.Background(), in)
	ents, err := src.ReadDir(t.Context(), "2017-06-02")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".lz4") {
			data, _ := store.ReadFile(t.Context(), src, "2017-06-02/"+e.Name())
			data[len(data)/2] ^= 0xff
			testutil.Check(t, store.WriteFile(t.Context(), src, "2017-06-02/"+e.Name(), data))
			break
		}
	}
	code, sum := runJSON(t, "--in", in, "--out", "s3://test/k", "--resume")
	if code != cli.ExitRejects || sum.Buckets != 1 || sum.Skipped != 2 {
		t.Fatalf("resume after a change: exit %d, %d committed, %d skipped; want 1 and 2", code, sum.Buckets, sum.Skipped)
	}
	_ = srv
}

// 503s, dropped connections, stalled and slow bodies during a run are
// retried and the output is the same; when retries run out the run fails
// and nothing of the bucket it was reading is visible.
func TestS3_Faults(t *testing.T) {
	t.Setenv("BACKFILL_S3_CHUNK", strconv.Itoa(64<<10))
	t.Setenv("BACKFILL_S3_STALL", "300ms")
	t.Setenv("BACKFILL_S3_MAX_BACKOFF", "50ms")
	srv, _ := s3Corpus(t)
	in := "s3://test/c/canned"
	if code, _ := runJSON(t, "--in", in, "--out", "s3://test/ref"); code != cli.ExitRejects {
		t.Fatalf("reference run: exit %d", code)
	}
	srv.Inject(
		s3test.Fault{Kind: s3test.Status503, Times: 4},
		s3test.Fault{Kind: s3test.Drop, Ranged: true, After: 5000, Times: 3},
		s3test.Fault{Kind: s3test.Stall, Ranged: true, After: 1000, Times: 2},
		s3test.Fault{Kind: s3test.Drip, Ranged: true, Times: 3},
		s3test.Fault{Kind: s3test.Status503, Method: "PUT", Times: 3},
	)
	code, _ := runJSON(t, "--in", in, "--out", "s3://test/faults")
	if code != cli.ExitRejects {
		t.Fatalf("run with faults: exit %d", code)
	}
	if n := srv.Pending(); n != 0 {
		t.Fatalf("%d injected faults did not happen", n)
	}
	sameOutput(t, tree(t, "s3://test/ref"), tree(t, "s3://test/faults"), false)

	// Retries run out: every read of object bytes breaks.
	srv.Inject(s3test.Fault{Kind: s3test.Drop, Ranged: true, After: 100, Times: 1 << 30})
	var errb bytes.Buffer
	code = exitCode(run(context.Background(), []string{"run", "-q", "--in", in, "--out", "s3://test/broken"},
		cli.Stdio{In: strings.NewReader(""), Out: &bytes.Buffer{}, Err: &errb}), &errb)
	if code != cli.ExitFailure || !strings.Contains(errb.String(), "s3://test/c/canned/2017-06-01/") {
		t.Fatalf("run whose reads all fail: exit %d, %s", code, errb.String())
	}
	if got := tree(t, "s3://test/broken"); len(got) != 0 {
		var names []string
		for n := range got {
			names = append(names, n)
		}
		t.Fatalf("a failed run left files: %v", names)
	}
}

// Two runs on one s3:// output: the second is refused by the lock object
// while the first holds it, and runs once it is gone.
func TestS3_OneWriterPerOutput(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildBinary(t)
	srv, _ := s3Corpus(t)
	// The first run is stopped the moment its lock object is stored.
	locked := make(chan struct{})
	started := make(chan *os.Process, 1) // the first run, once started
	var once sync.Once
	srv.OnPut(func(p s3test.Put) {
		if p.Path == "/test/out/"+parquetfile.LockName {
			once.Do(func() {
				proc := <-started
				proc.Signal(syscall.SIGSTOP) // it holds the lock, alive
				close(locked)
			})
		}
	})
	first := exec.Command(bin, "run", "-q", "--in", "s3://test/c/canned", "--out", "s3://test/out")
	first.Env = os.Environ()
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	started <- first.Process
	select {
	case <-locked:
	case <-time.After(time.Minute):
		t.Fatal("the first run took no lock object within a minute")
	}
	srv.OnPut(nil)
	second := exec.Command(bin, "run", "-q", "--in", "s3://test/c/canned", "--out", "s3://test/out")
	second.Env = os.Environ()
	msg, _ := second.CombinedOutput()
	first.Process.Signal(syscall.SIGCONT)
	want := "another run (pid " + strconv.Itoa(first.Process.Pid)
	if second.ProcessState.ExitCode() != cli.ExitFailure || !strings.Contains(string(msg), want) || !strings.Contains(string(msg), "s3://test/out") {
		t.Errorf("second writer: exit %d, %q; want %q", second.ProcessState.ExitCode(), msg, want)
	}
	if code := testutil.ExitCode(first.Wait()); code != cli.ExitRejects {
		t.Fatalf("first run: exit %d", code)
	}
	out, _ := location.Open(context.Background(), "s3://test/out")
	if _, err := out.Stat(t.Context(), parquetfile.LockName); err == nil {
		t.Fatal("the lock object is left after the run")
	}
	again := exec.Command(bin, "run", "-q", "--in", "s3://test/c/canned", "--out", "s3://test/out", "--resume")
	again.Env = os.Environ()
	if msg, _ := again.CombinedOutput(); again.ProcessState.ExitCode() != cli.ExitRejects {
		t.Fatalf("a run after the first: exit %d\n%s", again.ProcessState.ExitCode(), msg)
	}
}

// The SDK's own log lines never reach the user, and an S3 endpoint that
// cannot be reached is the environment failing (exit 1), said in one line
// by run, plan and status alike.
func TestS3_OneLineFailures(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildBinary(t)
	s3Corpus(t)
	backfill := func(env []string, args ...string) (int, string) {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), env...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		return testutil.ExitCode(err), stderr.String()
	}
	code, stderr := backfill(nil, "run", "-q", "--in", "s3://test/c/canned", "--out", "s3://test/out")
	if code != cli.ExitRejects || strings.Contains(stderr, "SDK ") || strings.Contains(stderr, "WARN") {
		t.Errorf("run over S3: exit %d, stderr:\n%s", code, stderr)
	}
	for _, tc := range []struct{ endpoint, says string }{
		{"http://127.0.0.1:1", "cannot connect to the S3 endpoint 127.0.0.1:1: connection refused"},
		{"http://no-such-host.invalid:9000", "the S3 endpoint's host no-such-host.invalid"},
	} {
		env := []string{"AWS_ENDPOINT_URL=" + tc.endpoint, "AWS_MAX_ATTEMPTS=1"}
		for _, args := range [][]string{
			{"run", "-q", "--in", "s3://test/c/canned", "--out", t.TempDir()},
			{"plan", "--in", "s3://test/c/canned", "--shards", "2"},
			{"status", t.TempDir(), "--in", "s3://test/c/canned"},
		} {
			code, stderr := backfill(env, args...)
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			if code != cli.ExitFailure || len(lines) != 1 || !strings.Contains(stderr, tc.says) || strings.Contains(stderr, "operation error") {
				t.Errorf("%s with %s: exit %d, stderr:\n%s\nwant exit 1 and one line saying %q", args[0], tc.endpoint, code, stderr, tc.says)
			}
		}
	}
}

// A one-bucket run into an s3:// output that holds many committed buckets
// costs its own bucket's requests, those of the buckets its reports can
// reach (the ledger's zones say which), and a few listing pages: not a
// request for any other bucket's files or ledger entry, whatever the
// output holds.
func TestS3_OneBucketCostsItsOwnWork(t *testing.T) {
	srv := s3test.Start(t, "test")
	dir := t.TempDir() + "/c"
	if code, out := call("gen", "-q", "--out", dir, "--buckets", "12", "--reports", "8", "--max-measurements", "50"); code != cli.ExitOK {
		t.Fatalf("gen: exit %d\n%s", code, out)
	}
	var earlier []string
	for d := 1; d <= 11; d++ {
		earlier = append(earlier, fmt.Sprintf("2017-06-%02d", d))
	}
	if code, out := call(append([]string{"run", "-q", "--in", dir, "--out", "s3://test/out"}, earlier...)...); code != cli.ExitOK {
		t.Fatalf("run of 11 buckets: exit %d\n%s", code, out)
	}
	_, from := srv.Served(0)
	if code, out := call("run", "-q", "--in", dir, "--out", "s3://test/out", "2017-06-12"); code != cli.ExitOK {
		t.Fatalf("run of the twelfth: exit %d\n%s", code, out)
	}
	served, _ := srv.Served(from)
	// The buckets the twelfth can reach: those whose zone meets its own.
	reach := map[string]bool{}
	zones := map[string]*stamped.Zone{}
	st, err := location.Open(t.Context(), "s3://test/out")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range append(earlier, "2017-06-12") {
		data, err := store.ReadFile(t.Context(), st, "ledger/"+b+".json")
		if err != nil {
			t.Fatal(err)
		}
		var l parquetfile.Ledger
		if err := json.Unmarshal(data, &l); err != nil || l.Zone == nil {
			t.Fatalf("ledger of %s: %v, zone %v", b, err, l.Zone)
		}
		zones[b] = l.Zone
	}
	for _, b := range earlier {
		if zones[b].Meets(*zones["2017-06-12"]) {
			reach[b] = true
		}
	}
	if len(reach) == 0 || len(reach) > 2 {
		t.Fatalf("the twelfth bucket reaches %v: the corpus does not have the shape this test needs", reach)
	}
	lists, objects := 0, 0
	for _, r := range served {
		if r.List {
			lists++
			continue
		}
		objects++
		for _, b := range earlier {
			if strings.Contains(r.Path, b) && !reach[b] {
				t.Errorf("%s %s: a bucket the run cannot reach", r.Method, r.Path)
			}
		}
	}
	// The ledger and the three bucket folders listed when the run starts
	// (State) and when it counts its summary, the ledger for the zones,
	// the temporary folder when the output is opened and closed: a page
	// each for up to 1,000 buckets.
	if lists > 12 {
		t.Errorf("%d listings:", lists)
		for _, r := range served {
			t.Log(r)
		}
	}
	t.Logf("the run of one bucket: %d listings, %d requests of objects", lists, objects)
}
