package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/backfill-dev/backfill/internal/cli"
	"github.com/backfill-dev/backfill/internal/pgtest"
	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/internal/testutil"
	"github.com/backfill-dev/backfill/pipeline/scaleout"
	"github.com/backfill-dev/backfill/pipeline/sink/parquetfile"
	"github.com/backfill-dev/backfill/pipeline/stamped"
)

// Plan a corpus into 3 shards, run each shard on its own (one through
// JOB_COMPLETION_INDEX, in reverse order): together the shards' outputs
// are the one-machine run's, file for file. A shard whose buckets changed
// since planning, a changed plan and a Job of another size are refused.
func TestPlan_ShardsMakeTheRun(t *testing.T) {
	dir := t.TempDir()
	in := dir + "/c"
	if code, out := call("gen", "-q", "--out", in, "--buckets", "5", "--reports", "40", "--max-measurements", "300", "--corrupt", "all=0.03"); code != cli.ExitOK {
		t.Fatalf("gen: exit %d\n%s", code, out)
	}
	if code, _ := runJSON(t, "--in", in, "--out", dir+"/single"); code != cli.ExitRejects {
		t.Fatalf("single run: exit %d", code)
	}
	planFile := dir + "/plan.json"
	if code, out := call("plan", "--in", in, "--shards", "3", "--out", planFile); code != cli.ExitOK {
		t.Fatalf("plan: exit %d\n%s", code, out)
	}
	data, _ := os.ReadFile(planFile)
	p, err := scaleout.ParsePlan(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Buckets) != 5 || p.Shards != 3 {
		t.Fatalf("plan of %d buckets in %d shards", len(p.Buckets), p.Shards)
	}
	for i := p.Shards - 1; i >= 0; i-- {
		out := fmt.Sprintf("%s/job/shards/%d", dir, i)
		args := []string{"run", "-q", "--plan", planFile, "--shard", fmt.Sprint(i), "--out", dir + "/job"}
		if i == 1 {
			t.Setenv("JOB_COMPLETION_INDEX", "1")
			t.Setenv("JOB_COMPLETION_COUNT", "3")
			args = []string{"run", "-q", "--plan", planFile, "--out", dir + "/job"}
		}
		code, msg := callIn("", args...)
		if len(p.Names(i)) == 0 {
			if code != cli.ExitOK || !strings.Contains(msg, "no bucket") {
				t.Fatalf("empty shard %d: exit %d\n%s", i, code, msg)
			}
			continue
		}
		if code != cli.ExitOK || !strings.Contains(msg, "backfill check sums every shard's") {
			t.Fatalf("shard %d: exit %d, want 0 and the count of its records\n%s", i, code, msg)
		}
		for _, b := range p.Names(i) {
			for _, f := range []string{"measurements/" + b + ".parquet", "reports/" + b + ".parquet", "dead-letters/" + b + ".jsonl"} {
				want, err := os.ReadFile(filepath.Join(dir, "single", f))
				if err != nil {
					t.Fatal(err)
				}
				got, err := os.ReadFile(filepath.Join(out, f))
				if err != nil || !bytes.Equal(got, want) {
					t.Errorf("shard %d: %s differs from the one-machine run's (%v)", i, f, err)
				}
			}
		}
		if n, _ := filepath.Glob(filepath.Join(out, "ledger", "*.json")); len(n) != len(p.Names(i)) {
			t.Errorf("shard %d committed %d buckets, its plan has %d", i, len(n), len(p.Names(i)))
		}
	}

	// The Job's size must be the plan's.
	t.Setenv("JOB_COMPLETION_COUNT", "4")
	if code, msg := callIn("", "run", "-q", "--plan", planFile, "--out", dir+"/x"); code != cli.ExitUsage || !strings.Contains(msg, "JOB_COMPLETION_COUNT is 4") {
		t.Errorf("a Job of 4 for a plan of 3: exit %d\n%s", code, msg)
	}
	os.Unsetenv("JOB_COMPLETION_COUNT")
	// A changed plan is refused.
	testutil.Check(t, os.WriteFile(dir+"/bad.json", bytes.Replace(data, []byte(`"shards": 3`), []byte(`"shards": 2`), 1), 0o644))
	if code, msg := callIn("", "run", "-q", "--plan", dir+"/bad.json", "--shard", "0", "--out", dir+"/x"); code != cli.ExitUsage || !strings.Contains(msg, "checksum") {
		t.Errorf("a changed plan: exit %d\n%s", code, msg)
	}
	// A bucket that changed since planning: its shard is refused, before
	// anything is written.
	b := p.Buckets[0]
	f, _ := filepath.Glob(filepath.Join(in, b.Name, "*.lz4"))
	testutil.Check(t, os.WriteFile(f[0], append(testutil.Must(os.ReadFile(f[0])), 0), 0o644))
	code, msg := callIn("", "run", "-q", "--plan", planFile, "--shard", fmt.Sprint(b.Shard), "--out", dir+"/changed")
	if code != cli.ExitUsage || !strings.Contains(msg, "bucket "+b.Name+" of "+in+" changed since the plan was made") {
		t.Errorf("a changed bucket: exit %d\n%s", code, msg)
	}
	if _, err := os.Stat(dir + "/changed"); !os.IsNotExist(err) {
		t.Errorf("the refused shard wrote its output folder: %v", err)
	}
}

// outputFiles keeps the files of a run's output: its buckets' files and
// ledger entries.
func outputFiles(files map[string][]byte) map[string][]byte {
	out := map[string][]byte{}
	for n, b := range files {
		for _, d := range []string{"measurements/", "reports/", "dead-letters/", "ledger/"} {
			if strings.HasPrefix(n, d) {
				out[n] = b
			}
		}
	}
	return out
}

// genCollidingCorpus generates into in five buckets whose reports share
// timestamps, within and across buckets: they collide under 20 bits.
func genCollidingCorpus(t *testing.T, in string) {
	t.Helper()
	if code, out := call("gen", "-q", "--out", in, "--buckets", "5", "--reports", "90", "--can-size", "256KiB",
		"--min-measurements", "400", "--max-measurements", "5000", "--time-slots", "3", "--max-template", "1KiB"); code != cli.ExitOK {
		t.Fatalf("gen: exit %d\n%s", code, out)
	}
}

// A corpus with collisions across buckets, planned in 1, 3 and 7 shards,
// each shard run on its own in a random order, checked and loaded shard by
// shard in another: the output is the one-machine run's, byte for byte.
func TestPlan_CheckLoadEqualsOneRun(t *testing.T) {
	t.Parallel()
	skipUnderRace(t)
	dir := t.TempDir()
	in := dir + "/c"
	genCollidingCorpus(t, in)
	scheme := []string{"--counter-bits", "20"}
	code, single := runJSON(t, append([]string{"--in", in, "--out", dir + "/single"}, scheme...)...)
	if code != cli.ExitRejects || single.RejectsByReason["collision"] == 0 {
		t.Fatalf("one-machine run: exit %d, %+v: the corpus must collide", code, single.RejectsByReason)
	}
	want := outputFiles(tree(t, dir+"/single"))
	rng := rand.New(rand.NewPCG(5, 5))
	for _, n := range []int{1, 3, 7} {
		job := fmt.Sprintf("%s/job%d", dir, n)
		planFile := job + ".plan.json"
		if code, out := call("plan", "--in", in, "--shards", fmt.Sprint(n), "--out", planFile); code != cli.ExitOK {
			t.Fatalf("plan: exit %d\n%s", code, out)
		}
		for _, i := range rng.Perm(n) {
			// A shard that completed exits 0, rejects and all.
			code, msg := callIn("", append([]string{"run", "-q", "--plan", planFile, "--shard", fmt.Sprint(i), "--out", job}, scheme...)...)
			if code != cli.ExitOK {
				t.Fatalf("%d shards: shard %d: exit %d\n%s", n, i, code, msg)
			}
		}
		// Check meets the rejects: the whole corpus's, as the one run
		// counted them, and exits 3.
		code, out := call("check", "--json", "--plan", planFile, "--out", job)
		var sum scaleout.CheckSummary
		if err := json.Unmarshal([]byte(out), &sum); code != cli.ExitRejects || err != nil {
			t.Fatalf("%d shards: check: exit %d, %v\n%s", n, code, err, out)
		}
		one := stamped.Tally{Reports: single.Reports, Measurements: single.Measurements, Rejects: single.Rejects, Notices: single.Notices,
			RejectsByReason: single.RejectsByReason, NoticesByReason: single.NoticesByReason}
		if !reflect.DeepEqual(sum.Totals, one) {
			t.Errorf("%d shards: check's totals\n%+v\nthe one run's\n%+v", n, sum.Totals, one)
		}
		if (n == 1) != (sum.Changed == 0) {
			t.Errorf("%d shards: check changed %d verdicts", n, sum.Changed)
		}
		// As a Job runs it: the same summary, exit 0.
		if code, again := call("check", "--json", "--rejects-exit", "0", "--plan", planFile, "--out", job); code != cli.ExitOK || again != out {
			t.Errorf("%d shards: check --rejects-exit 0: exit %d\n%s", n, code, again)
		}
		if n > 1 {
			// The verdicts cut to their header: load refuses them.
			vf := filepath.Join(job, scaleout.VerdictsName)
			whole := testutil.Must(os.ReadFile(vf))
			head, _, _ := bytes.Cut(whole, []byte("\n"))
			testutil.Check(t, os.WriteFile(vf, append(head, '\n'), 0o644))
			if code, msg := callIn("", "load", "--plan", planFile, "--shard", "0", "--out", job); code != cli.ExitUsage || !strings.Contains(msg, "is not the file check wrote") {
				t.Errorf("%d shards: load of verdicts cut to their header: exit %d, want 2\n%s", n, code, msg)
			}
			testutil.Check(t, os.WriteFile(vf, whole, 0o644))
		}
		for _, i := range rng.Perm(n) {
			if code, msg := callIn("", "load", "--plan", planFile, "--shard", fmt.Sprint(i), "--out", job); code != cli.ExitOK {
				t.Fatalf("%d shards: load %d: exit %d\n%s", n, i, code, msg)
			}
		}
		sameOutput(t, want, outputFiles(tree(t, job)), false)
		t.Logf("%d shards: %d reports, %d timestamps shared, %d verdicts changed in %v", n, sum.Reports, sum.Groups, sum.Changed, sum.Buckets)
	}
}

// The shards as processes, as Indexed Jobs run them, for plans of 1, 3 and
// 8 shards: the map pods all at once in a random order, each with its
// JOB_COMPLETION_INDEX, one SIGKILLed after its first commit and started
// again (check refuses meanwhile); then check, and the loads at once, into
// Parquet and into an empty PostgreSQL database, every load with
// --create-schema. The Parquet output is the one-machine run's
// byte for byte, the tables the one-machine load's row for row.
func TestPlan_ShardProcesses(t *testing.T) {
	t.Parallel()
	skipUnderRace(t)
	bin := buildBinary(t)
	dir := t.TempDir()
	in := dir + "/c"
	if code, out := call("gen", "-q", "--out", in, "--buckets", "8", "--reports", "100", "--can-size", "256KiB",
		"--min-measurements", "80", "--max-measurements", "600", "--time-slots", "3", "--seed", "11", "--max-template", "1KiB"); code != cli.ExitOK {
		t.Fatalf("gen: exit %d\n%s", code, out)
	}
	flags := []string{"--counter-bits", "20", "--max-blob", "1MiB"}
	if code, _ := runJSON(t, append([]string{"--in", in, "--out", dir + "/single"}, flags...)...); code != cli.ExitRejects {
		t.Fatalf("one-machine run: exit %d", code)
	}
	want := outputFiles(tree(t, dir+"/single"))
	admin := pgtest.AdminURL(t)
	single := pgtest.CreateDatabase(t, admin)
	if out, err := pgRun(bin, in, single, flags[:2]...).CombinedOutput(); testutil.ExitCode(err) != cli.ExitRejects {
		t.Fatalf("one-machine load: %v\n%s", err, out)
	}
	wantRows := checksum(t, single)
	rng := rand.New(rand.NewPCG(8, 8))
	for _, n := range []int{1, 3, 8} {
		job, planFile := fmt.Sprintf("%s/job%d", dir, n), fmt.Sprintf("%s/plan%d.json", dir, n)
		if code, out := call("plan", "--in", in, "--shards", fmt.Sprint(n), "--out", planFile); code != cli.ExitOK {
			t.Fatalf("plan: exit %d\n%s", code, out)
		}
		var stderr lockedBuffer // of every process, for failures
		start := func(i int, args ...string) *exec.Cmd {
			cmd := exec.Command(bin, args...)
			cmd.Stderr = &stderr
			cmd.Env = append(os.Environ(), fmt.Sprintf("JOB_COMPLETION_INDEX=%d", i), fmt.Sprintf("JOB_COMPLETION_COUNT=%d", n))
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			return cmd
		}
		waitAll := func(what string, cmds []*exec.Cmd, killed int) {
			for i, c := range cmds {
				code := testutil.ExitCode(c.Wait())
				if i == killed && code == -int(syscall.SIGKILL) {
					continue
				}
				if code != cli.ExitOK {
					t.Fatalf("%d shards: %s %d: exit %d\n%s", n, what, i, code, stderr.String())
				}
			}
		}
		mapArgs := append([]string{"run", "-q", "--plan", planFile, "--out", job}, flags...)
		cmds := make([]*exec.Cmd, n)
		for _, i := range rng.Perm(n) {
			cmds[i] = start(i, mapArgs...)
		}
		victim := rng.IntN(n)
		if !testutil.Eventually(time.Minute, func() bool {
			m, _ := filepath.Glob(fmt.Sprintf("%s/shards/%d/ledger/*.json", job, victim))
			return len(m) > 0
		}) {
			t.Fatalf("%d shards: shard %d committed no bucket within a minute: nothing to kill", n, victim)
		}
		cmds[victim].Process.Signal(syscall.SIGKILL)
		waitAll("map", cmds, victim)
		if _, err := os.Stat(fmt.Sprintf("%s/shards/%d/manifest.tsv", job, victim)); err != nil {
			if code, out := callIn("", "check", "--plan", planFile, "--out", job); code != cli.ExitUsage || !strings.Contains(out, fmt.Sprintf("shard %d has not completed its map", victim)) {
				t.Fatalf("%d shards: check with shard %d missing: exit %d\n%s", n, victim, code, out)
			}
			waitAll("map again", []*exec.Cmd{start(victim, mapArgs...)}, -1)
		}
		if code, out := call("check", "--plan", planFile, "--out", job); code != cli.ExitRejects {
			t.Fatalf("%d shards: check: exit %d, want 3 (the corpus has rejects)\n%s", n, code, out)
		}
		dsn := pgtest.CreateDatabase(t, admin)
		for i := range n {
			cmds[i] = start(i, "load", "--plan", planFile, "--out", job)
		}
		waitAll("load", cmds, -1)
		// Into an empty database, every load creating the tables: they
		// start at once, and each must succeed.
		for i := range n {
			cmds[i] = start(i, "load", "--plan", planFile, "--out", job, "--sink", "postgres", "--dsn", dsn, "--create-schema")
		}
		waitAll("load into PostgreSQL", cmds, -1)
		sameOutput(t, want, outputFiles(tree(t, job)), false)
		if got := checksum(t, dsn); got != wantRows {
			t.Fatalf("%d shards: the tables loaded from the shards differ from the one-machine load's", n)
		}
	}
}

// lockedBuffer is a buffer several processes' output goes to at once.
type lockedBuffer struct {
	mu    sync.Mutex
	b     bytes.Buffer
	watch map[string]chan struct{}
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n, err := l.b.Write(p)
	for s, c := range l.watch {
		if strings.Contains(l.b.String(), s) {
			close(c)
			delete(l.watch, s)
		}
	}
	return n, err
}

// Said returns a channel closed once the buffer holds s.
func (l *lockedBuffer) Said(s string) <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := make(chan struct{})
	if strings.Contains(l.b.String(), s) {
		close(c)
		return c
	}
	if l.watch == nil {
		l.watch = map[string]chan struct{}{}
	}
	l.watch[s] = c
	return c
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// The phases out of order are plan errors (exit 2, which a Job does not
// retry), each naming what to run first; a plan made from a relative path
// holds the absolute one, so a shard runs from any folder.
func TestPlan_PhasesInOrder(t *testing.T) {
	dir := t.TempDir()
	if code, out := call("gen", "-q", "--out", dir+"/c", "--buckets", "4", "--reports", "20", "--max-measurements", "200"); code != cli.ExitOK {
		t.Fatalf("gen: exit %d\n%s", code, out)
	}
	t.Chdir(dir)
	if code, out := call("plan", "--in", "c", "--shards", "2", "--out", "plan.json"); code != cli.ExitOK {
		t.Fatalf("plan: exit %d\n%s", code, out)
	}
	p, err := scaleout.ParsePlan(testutil.Must(os.ReadFile("plan.json")))
	if err != nil || p.Input != filepath.Join(dir, "c") {
		t.Fatalf("the plan's input is %q (%v), want the absolute %s", p.Input, err, filepath.Join(dir, "c"))
	}
	planFile, job := filepath.Join(dir, "plan.json"), filepath.Join(dir, "job")
	t.Chdir(t.TempDir())
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"load", "--plan", planFile, "--shard", "1", "--out", job}, "shard 1 has not completed its map"},
		{[]string{"load", "--plan", planFile, "--shard", "1", "--out", job, "--sink", "postgres", "--dsn", "postgres://nobody@127.0.0.1:1/x"}, "run the map of shard 1 first"},
		{[]string{"check", "--plan", planFile, "--out", job}, "has not completed its map"},
	} {
		if code, out := callIn("", tc.args...); code != cli.ExitUsage || !strings.Contains(out, tc.msg) {
			t.Errorf("%v before the maps: exit %d, want 2 and %q\n%s", tc.args[0], code, tc.msg, out)
		}
	}
	for i := range 2 {
		if code, out := callIn("", "run", "-q", "--plan", planFile, "--shard", fmt.Sprint(i), "--out", job); code != cli.ExitOK {
			t.Fatalf("map %d from another folder: exit %d\n%s", i, code, out)
		}
	}
	if code, out := callIn("", "load", "--plan", planFile, "--shard", "0", "--out", job); code != cli.ExitUsage || !strings.Contains(out, "run backfill check first") {
		t.Errorf("load before check: exit %d\n%s", code, out)
	}
	if code, out := callIn("", "check", "--plan", planFile, "--out", job); code != cli.ExitOK {
		t.Fatalf("check: exit %d\n%s", code, out)
	}
	if code, out := callIn("", "load", "--plan", planFile, "--shard", "0", "--out", job); code != cli.ExitOK {
		t.Errorf("load after check: exit %d\n%s", code, out)
	}

	// The input re-canned, planned and mapped again, check forgotten:
	// the verdicts are the old plan's, and load refuses them.
	if code, out := call("gen", "-q", "--seed", "9", "--out", dir+"/c2", "--buckets", "4", "--reports", "20", "--max-measurements", "200"); code != cli.ExitOK {
		t.Fatalf("gen: exit %d\n%s", code, out)
	}
	plan2 := filepath.Join(dir, "plan2.json")
	if code, out := call("plan", "--in", dir+"/c2", "--shards", "2", "--out", plan2); code != cli.ExitOK {
		t.Fatalf("plan: exit %d\n%s", code, out)
	}
	for i := range 2 {
		if code, out := callIn("", "run", "-q", "--replace", "--plan", plan2, "--shard", fmt.Sprint(i), "--out", job); code != cli.ExitOK {
			t.Fatalf("map %d of the new plan: exit %d\n%s", i, code, out)
		}
	}
	if code, out := callIn("", "load", "--plan", plan2, "--shard", "0", "--out", job); code != cli.ExitUsage || !strings.Contains(out, "made by check for another plan") {
		t.Errorf("load of a new plan with the old verdicts: exit %d, want 2 naming check\n%s", code, out)
	}
	if code, out := callIn("", "check", "--plan", plan2, "--out", job); code != cli.ExitOK {
		t.Fatalf("check: exit %d\n%s", code, out)
	}
	// A shard's manifest changed after check: refused too.
	manifest := filepath.Join(job, "shards", "1", scaleout.ManifestName)
	data := testutil.Must(os.ReadFile(manifest))
	testutil.Check(t, os.WriteFile(manifest, append(data, '\n'), 0o644))
	if code, out := callIn("", "load", "--plan", plan2, "--shard", "0", "--out", job); code != cli.ExitUsage || !strings.Contains(out, "changed since check") {
		t.Errorf("load after a manifest changed: exit %d, want 2\n%s", code, out)
	}
	testutil.Check(t, os.WriteFile(manifest, data, 0o644))
	// The output holds the buckets from the first input: the load of the
	// new one replaces them only with --replace, and names the IDs of
	// the first that it withdraws (exit 3).
	if code, out := callIn("", "load", "--plan", plan2, "--shard", "0", "--out", job); code != cli.ExitFailure || !strings.Contains(out, "--replace") {
		t.Errorf("load of another input over the first: exit %d, want 1 naming --replace\n%s", code, out)
	}
	if code, out := callIn("", "load", "--replace", "--plan", plan2, "--shard", "0", "--out", job); code != cli.ExitRejects || !strings.Contains(out, "published IDs withdrawn") || !strings.Contains(out, "vanished") {
		t.Errorf("load 0 --replace after check: exit %d, want 3 naming the withdrawals\n%s", code, out)
	}
	if code, out := callIn("", "load", "--plan", plan2, "--shard", "1", "--out", job); code != cli.ExitOK {
		t.Errorf("load 1 after check (buckets the output does not hold): exit %d\n%s", code, out)
	}
	if code, out := callIn("", "verify", job); code != cli.ExitOK {
		t.Errorf("verify of the loaded job: exit %d\n%s", code, out)
	}
}

// settled returns what the Parquet output dir holds of its reports'
// verdicts and IDs, one line a report (bucket, textname, measurements,
// winner) and a line a measurement row (ID, textname, ndx), sorted.
func settled(t *testing.T, dir string) string {
	t.Helper()
	st := store.Local(dir)
	var lines []string
	reports, _ := filepath.Glob(filepath.Join(dir, "reports", "*.parquet"))
	for _, f := range reports {
		rs, err := parquetfile.ReadReports(t.Context(), st, "reports/"+filepath.Base(f))
		testutil.Check(t, err)
		for _, r := range rs {
			lines = append(lines, fmt.Sprintf("report %s %s %d %s", filepath.Base(f), r.Textname, r.N, r.RejectedBy))
		}
		ms, err := parquetfile.ReadMeasurementIDs(t.Context(), st, "measurements/"+filepath.Base(f))
		testutil.Check(t, err)
		for _, m := range ms {
			lines = append(lines, fmt.Sprintf("id %016x %s %d", m.OOID, m.Textname, m.Ndx))
		}
	}
	if len(lines) == 0 {
		t.Fatalf("%s holds no report", dir)
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// publishedIDs returns the measurement each ID of the schema backfill
// names.
func publishedIDs(t *testing.T, dsn string) map[int64]string {
	t.Helper()
	c := pgtest.Connect(t, dsn)
	defer c.Close(t.Context())
	rows, err := c.Query(t.Context(), `SELECT ooid, textname || ' ' || ndx FROM backfill.measurement_ids`)
	testutil.Check(t, err)
	out := map[int64]string{}
	for rows.Next() {
		var id int64
		var m string
		testutil.Check(t, rows.Scan(&id, &m))
		out[id] = m
	}
	testutil.Check(t, rows.Err())
	return out
}

// splitColliding generates the colliding corpus in dir/c, finds the
// bucket first whose reports beat reports of later buckets (under 20-bit
// counters), and copies the other buckets to an input of their own,
// rest.
func splitColliding(t *testing.T, dir string) (in, rest, first string) {
	t.Helper()
	in = dir + "/c"
	genCollidingCorpus(t, in)
	single := dir + "/single"
	if code, _ := runJSON(t, "--in", in, "--out", single, "--counter-bits", "20"); code != cli.ExitRejects {
		t.Fatalf("one-machine run: exit %d", code)
	}
	files, _ := filepath.Glob(filepath.Join(single, "dead-letters", "*.jsonl"))
	for _, f := range files {
		for _, line := range strings.Split(string(readFile(t, f)), "\n") {
			var d struct{ Reason, Textname, Message string }
			if json.Unmarshal([]byte(line), &d) != nil || d.Reason != "collision" {
				continue
			}
			for _, b := range []string{"2017-06-01", "2017-06-02", "2017-06-03"} {
				if strings.Contains(d.Message, b+"/") && !strings.HasPrefix(d.Textname, b) && (first == "" || b < first) {
					first = b
				}
			}
		}
	}
	if first == "" {
		t.Fatal("no report of an early bucket beats one of a later bucket: the corpus proves nothing")
	}
	rest = dir + "/rest"
	ents, err := os.ReadDir(in)
	testutil.Check(t, err)
	for _, e := range ents {
		if e.IsDir() && e.Name() != first {
			testutil.Check(t, os.CopyFS(filepath.Join(rest, e.Name()), os.DirFS(filepath.Join(in, e.Name()))))
		}
	}
	return in, rest, first
}

// A Parquet load settles against what the output holds from outside its
// plan, by the rule of a run: beside a bucket a run committed, whose
// reports beat the plan's, or the other way round, the output ends as the
// one-machine run's, and the outside reports that lose published IDs are
// named (exit 3), or refused with --no-withdraw before anything is
// copied. A shard of another scheme is refused; a plan made again with an
// earlier day added, whose verdicts take IDs back from buckets loaded
// before, names each withdrawal too, into Parquet and into PostgreSQL
// over a run's buckets there.
func TestLoad_SettlesAgainstTheOutput(t *testing.T) {
	t.Parallel()
	skipUnderRace(t)
	dir := t.TempDir()
	in, rest, first := splitColliding(t, dir)
	narrow := []string{"--counter-bits", "20"}
	// Each plan has two shards, but the last, of every bucket, one: its
	// shard's output then holds every bucket (shards are not emptied
	// between plans).
	shards := func(plan string) int {
		if strings.HasSuffix(plan, "all.json") {
			return 1
		}
		return 2
	}
	mapped := func(in, job, plan string, scheme ...string) {
		t.Helper()
		if code, out := call("plan", "--in", in, "--shards", fmt.Sprint(shards(plan)), "--out", plan); code != cli.ExitOK {
			t.Fatalf("plan: exit %d\n%s", code, out)
		}
		for i := range shards(plan) {
			if code, out := callIn("", append([]string{"run", "-q", "--replace", "--plan", plan, "--shard", fmt.Sprint(i), "--out", job}, scheme...)...); code != cli.ExitOK {
				t.Fatalf("map %d: exit %d\n%s", i, code, out)
			}
		}
		if code, out := callIn("", "check", "--rejects-exit", "0", "--plan", plan, "--out", job); code != cli.ExitOK {
			t.Fatalf("check: exit %d\n%s", code, out)
		}
	}
	loadAll := func(job, plan string, args ...string) (codes []int, out string) {
		for i := range shards(plan) {
			code, o := callIn("", append([]string{"load", "--plan", plan, "--shard", fmt.Sprint(i), "--out", job}, args...)...)
			codes, out = append(codes, code), out+o
		}
		return codes, out
	}

	// A run of the first bucket, then the plan of the others: refused
	// while a run holds the output; settled, as one run would, after.
	want := settled(t, dir+"/single")
	asOneRun := func(what, job string) {
		t.Helper()
		if got := settled(t, job); got != want {
			t.Errorf("%s settle otherwise than one run:\n%s\nwant:\n%s", what, got, want)
		}
		if code, out := callIn("", "verify", job); code != cli.ExitOK {
			t.Errorf("%s: verify: exit %d\n%s", what, code, out)
		}
	}
	job := dir + "/job"
	if code, out := callIn("", append([]string{"run", "-q", "--in", in, "--out", job, first}, narrow...)...); code != cli.ExitOK && code != cli.ExitRejects {
		t.Fatalf("run of %s: exit %d\n%s", first, code, out)
	}
	mapped(rest, job, dir+"/rest.json", narrow...)
	lock, err := store.Local(job).Lock(t.Context(), parquetfile.LockName)
	testutil.Check(t, err)
	if codes, out := loadAll(job, dir+"/rest.json", "--lock-wait", "0"); codes[0] != cli.ExitFailure || !strings.Contains(out, "is writing to") {
		t.Errorf("load while a run holds the output, --lock-wait 0: exits %v, want 1\n%s", codes, out)
	}
	// With a wait, the load says so, waits for the run and goes on once
	// the run is done.
	var said lockedBuffer
	waited := make(chan int)
	go func() {
		args := []string{"load", "--plan", dir + "/rest.json", "--shard", "0", "--out", job, "--lock-wait", "5m"}
		waited <- exitCode(run(t.Context(), args, cli.Stdio{In: strings.NewReader(""), Out: &said, Err: &said}), &said)
	}()
	<-said.Said("waiting up to 5m0s")
	testutil.Check(t, lock.Unlock())
	if code := <-waited; code != cli.ExitOK {
		t.Errorf("load waiting for a run, then beside a bucket whose reports beat the plan's: exit %d, want 0 (nothing published is withdrawn)\n%s", code, said.String())
	}
	if code, out := callIn("", "load", "--plan", dir+"/rest.json", "--shard", "1", "--out", job); code != cli.ExitOK {
		t.Errorf("load of shard 1: exit %d\n%s", code, out)
	}
	asOneRun("the run of the first and the load of the others", job)

	// The others run, then the plan of the first: its reports take IDs
	// the output published.
	only := dir + "/first"
	testutil.Check(t, os.CopyFS(filepath.Join(only, first), os.DirFS(filepath.Join(in, first))))
	job = dir + "/job2"
	if code, out := callIn("", append([]string{"run", "-q", "--in", rest, "--out", job}, narrow...)...); code != cli.ExitOK && code != cli.ExitRejects {
		t.Fatalf("run of the others: exit %d\n%s", code, out)
	}
	mapped(only, job, dir+"/first.json", narrow...)
	before := outputFiles(tree(t, job))
	if codes, out := loadAll(job, dir+"/first.json", "--no-withdraw"); !slices.Contains(codes, cli.ExitFailure) || !strings.Contains(out, "--no-withdraw") {
		t.Errorf("load whose reports beat published ones, --no-withdraw: exits %v, want a refusal\n%s", codes, out)
	}
	sameOutput(t, before, outputFiles(tree(t, job)), false)
	// A stray file in the output's folders is named by the load too.
	stray := filepath.Join(job, "measurements", first+".old.parquet")
	testutil.Check(t, os.WriteFile(stray, []byte("PAR1"), 0o644))
	codes, out := loadAll(job, dir+"/first.json")
	if !slices.Contains(codes, cli.ExitRejects) || !strings.Contains(out, "published IDs withdrawn") || !strings.Contains(out, "loses its IDs to "+first) {
		t.Errorf("load whose reports beat published ones: exits %v, want 3 naming the withdrawals\n%s", codes, out)
	}
	// Each withdrawal is named once, by the one load of the two that
	// makes it.
	seen := map[string]int{}
	for _, l := range strings.Split(out, "\n") {
		if name, _, ok := strings.Cut(strings.TrimPrefix(l, "backfill:   "), " of bucket "); ok && strings.Contains(l, "loses its IDs to") {
			seen[name]++
		}
	}
	for name, n := range seen {
		if n != 1 {
			t.Errorf("%s is named withdrawn %d times by the shards' loads", name, n)
		}
	}
	if !strings.Contains(out, "stray file measurements/"+first+".old.parquet") {
		t.Errorf("the loads do not name the stray file %s\n%s", stray, out)
	}
	testutil.Check(t, os.Remove(stray))
	asOneRun("the run of the others and the load of the first", job)

	// A shard of 20 bits into an output of 28: refused, naming both.
	wide := dir + "/wide"
	if code, out := callIn("", "run", "-q", "--in", in, "--out", wide, first); code != cli.ExitOK && code != cli.ExitRejects {
		t.Fatalf("run of %s: exit %d\n%s", first, code, out)
	}
	mapped(rest, wide, dir+"/wide.json", narrow...)
	if codes, out := loadAll(wide, dir+"/wide.json"); codes[0] != cli.ExitFailure || !strings.Contains(out, "one output holds one scheme") {
		t.Errorf("a 20-bit shard into a 28-bit output: exits %v, want 1\n%s", codes, out)
	}

	// The others loaded alone, then a plan of every bucket: the first
	// bucket's reports take IDs back from buckets loaded before.
	replan := dir + "/replan"
	mapped(rest, replan, dir+"/replan-rest.json", narrow...)
	if codes, out := loadAll(replan, dir+"/replan-rest.json"); !slices.Equal(codes, []int{0, 0}) {
		t.Fatalf("load of the others: exits %v\n%s", codes, out)
	}
	before = outputFiles(tree(t, replan))
	mapped(in, replan, dir+"/replan-all.json", narrow...)
	codes, out = loadAll(replan, dir+"/replan-all.json", "--replace", "--no-withdraw")
	if !slices.Contains(codes, cli.ExitFailure) || !strings.Contains(out, "--no-withdraw") {
		t.Errorf("the plan of every bucket, --no-withdraw: exits %v, want a refusal\n%s", codes, out)
	}
	codes, out = loadAll(replan, dir+"/replan-all.json", "--replace")
	if !slices.Contains(codes, cli.ExitRejects) || !strings.Contains(out, "published IDs withdrawn") || !strings.Contains(out, "loses its IDs to") {
		t.Errorf("the plan of every bucket: exits %v, want 3 naming the withdrawals\n%s", codes, out)
	}
	if after := outputFiles(tree(t, replan)); len(after) <= len(before) {
		t.Errorf("the output holds %d files after the load of every bucket, %d before", len(after), len(before))
	}
	if code, out := callIn("", "verify", replan); code != cli.ExitOK {
		t.Errorf("verify: exit %d\n%s", code, out)
	}

	// The same into PostgreSQL: the others run, then the plan of every
	// bucket loaded from the job. --no-withdraw is refused with no
	// published ID changed (buckets that withdraw nothing may commit
	// before the one refused); without it, each withdrawal is named.
	dsn := pgtest.CreateDatabase(t, pgtest.AdminURL(t))
	if code, out := callIn("", append([]string{"run", "-q", "--in", rest, "--sink", "postgres", "--dsn", dsn, "--create-schema"}, narrow...)...); code != cli.ExitOK && code != cli.ExitRejects {
		t.Fatalf("run of the others into PostgreSQL: exit %d\n%s", code, out)
	}
	load := []string{"load", "--plan", dir + "/replan-all.json", "--shard", "0", "--out", replan, "--sink", "postgres", "--dsn", dsn, "--replace"}
	published := publishedIDs(t, dsn)
	if code, out := callIn("", append(load, "--no-withdraw")...); code != cli.ExitFailure || !strings.Contains(out, "--no-withdraw") {
		t.Errorf("load of every bucket into PostgreSQL, --no-withdraw: exit %d, want 1\n%s", code, out)
	}
	now := publishedIDs(t, dsn)
	for id, m := range published {
		if now[id] != m {
			t.Fatalf("the refused load: ID %x names %q, %q before", id, now[id], m)
		}
	}
	if code, out := callIn("", load...); code != cli.ExitRejects || !strings.Contains(out, "published IDs withdrawn") || !strings.Contains(out, "loses its IDs to") {
		t.Errorf("load of every bucket into PostgreSQL: exit %d, want 3 naming the withdrawals\n%s", code, out)
	}
	if code, out := callIn("", "verify", "--sink", "postgres", "--dsn", dsn); code != cli.ExitOK {
		t.Errorf("verify --sink postgres: exit %d\n%s", code, out)
	}
}
