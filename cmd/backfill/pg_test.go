package main

import (
	"bytes"
	"context"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/backfill-dev/backfill/internal/cli"
	"github.com/backfill-dev/backfill/internal/pgtest"
	"github.com/backfill-dev/backfill/internal/testutil"
)

// genPG writes a corpus whose buckets take a while to load.
func genPG(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "corpus")
	if code, out := call("gen", "--out", dir, "--seed", "31", "--buckets", "4", "--reports", "150", "--max-measurements", "6000",
		"--corrupt", "all=0.02", "--corrupt", "huge_blob=0.02", "--huge-blob", "2MiB", "--max-blob", "1MiB", "--max-template", "1KiB"); code != 0 {
		t.Fatalf("gen: exit %d\n%s", code, out)
	}
	return dir
}

// checksum is an MD5 over every row of the schema, timestamps aside, in a
// fixed order; it also fails the test on a bucket that is partly loaded or
// a measurement that is not counted in the ledger.
func checksum(t *testing.T, dsn string) string {
	t.Helper()
	c := pgtest.Connect(t, dsn)
	defer c.Close(context.Background()) // a long test (the soak) calls it hundreds of times
	var sum string
	if err := c.QueryRow(context.Background(), `SELECT md5(
		(SELECT coalesce(string_agg(concat_ws(' ', ooid, textname, ndx, bucket_date), E'\n' ORDER BY ooid), '') FROM backfill.measurement_ids) ||
		(SELECT coalesce(string_agg(concat_ws(' ', bucket, seq, textname, ts, ts_source, counter_base, n, span, container, "offset", size, encode(sha1, 'hex'), rejected_by), E'\n' ORDER BY bucket, seq), '') FROM backfill.reports) ||
		(SELECT coalesce(string_agg(concat_ws(' ', bucket, seq, file, textname, "offset", reason, message), E'\n' ORDER BY bucket, seq, textname COLLATE "C"), '') FROM backfill.dead_letters) ||
		(SELECT coalesce(string_agg(concat_ws(' ', bucket, input_fingerprint, counter_bits, sha1_offset, ndx_policy, reports, measurements, dead_letters, dead_letters_by_reason, bytes_in, bytes_out, status), E'\n' ORDER BY bucket), '') FROM backfill.ledger))`).Scan(&sum); err != nil {
		t.Fatal(err)
	}
	var bad int
	if err := c.QueryRow(context.Background(), `SELECT count(*) FROM backfill.ledger l
		FULL JOIN (SELECT bucket, count(*) AS n FROM backfill.measurements GROUP BY bucket) m ON m.bucket = l.bucket
		WHERE coalesce(m.n, 0) <> CASE WHEN l.status = 'committed' THEN l.measurements ELSE 0 END`).Scan(&bad); err != nil {
		t.Fatal(err)
	}
	if bad > 0 {
		t.Fatalf("%d buckets partly loaded or miscounted", bad)
	}
	return sum
}

func pgRun(bin, in, dsn string, extra ...string) *exec.Cmd {
	cmd := exec.Command(bin, append([]string{"run", "--in", in, "--sink", "postgres", "--dsn", dsn, "--create-schema", "--max-blob", "1MiB", "-q", "--workers", "2"}, extra...)...)
	return cmd
}

// SIGKILL at 10 random points of a load, each time rerun with --resume,
// then SIGINT once: the final database is identical to a clean load, with
// no partial bucket and no duplicate at any point.
//
// Each kill is aimed at a load in progress: it comes a random time after the
// server shows one of the run's COPYs, so it lands however slow the machine
// is. When the resumed runs have loaded every bucket before the tenth kill,
// the schema is dropped and loading starts over.
func TestPostgres_KillAndResume(t *testing.T) {
	t.Parallel()
	bin, in := buildBinary(t), genPG(t)
	admin := pgtest.AdminURL(t)
	clean := pgtest.CreateDatabase(t, admin)
	start := time.Now()
	if out, err := pgRun(bin, in, clean).CombinedOutput(); testutil.ExitCode(err) != 3 {
		t.Fatalf("clean load: %v\n%s", err, out)
	}
	full := time.Since(start)
	want := checksum(t, clean)

	dsn := pgtest.CreateDatabase(t, admin)
	watch := pgtest.Connect(t, admin)
	rng := rand.New(rand.NewPCG(7, 7))
	killed, restarts := 0, 0
	for attempt := 0; killed < 10; attempt++ {
		if attempt == 30 {
			t.Fatalf("only %d of 30 runs were killed during a load", killed)
		}
		cmd := pgRun(bin, in, dsn, "--resume")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		since := time.Now()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		var err error
		if copying(t, watch, dsn, since, exited, &err) {
			time.Sleep(time.Duration(rng.Int64N(int64(full/4) + 1)))
			cmd.Process.Signal(syscall.SIGKILL)
			err = <-exited
		}
		code := testutil.ExitCode(err)
		switch {
		case code == -int(syscall.SIGKILL):
			killed++
			checksum(t, dsn) // no partial bucket
		case code == 3 || code == 0:
			// Every bucket was loaded before the kill: start over.
			if got := checksum(t, dsn); got != want {
				t.Fatalf("after %d kills and a complete run: checksum %s, clean load %s", killed, got, want)
			}
			pgtest.Exec(t, dsn, "DROP SCHEMA backfill CASCADE")
			restarts++
		default:
			t.Fatalf("kill %d: exit %d\n%s", killed, code, stderr.String())
		}
	}
	t.Logf("%d kills, %d times the schema was dropped to start over", killed, restarts)

	// SIGINT while a bucket is being copied: the run must stop (130), not
	// complete.
	cmd := pgRun(bin, in, dsn)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	since := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var werr error
	if !copying(t, watch, dsn, since, exited, &werr) {
		t.Fatalf("the run ended (exit %d) before its first COPY: nothing to interrupt\n%s", testutil.ExitCode(werr), stderr.String())
	}
	cmd.Process.Signal(syscall.SIGINT)
	code := testutil.ExitCode(<-exited)
	if code != 130 {
		t.Fatalf("SIGINT during a COPY: exit %d, want 130\n%s", code, stderr.String())
	}
	// Interrupted, the run says what it committed and how to go on, under
	// the name it was run by.
	if !strings.Contains(stderr.String(), " committed in this run, each whole") ||
		!strings.Contains(stderr.String(), "to finish, run: "+bin+" run --resume --in "+in) {
		t.Errorf("SIGINT: stderr does not say what was committed and how to resume:\n%s", stderr.String())
	}
	checksum(t, dsn)

	out, err := pgRun(bin, in, dsn, "--resume").CombinedOutput()
	if code := testutil.ExitCode(err); code != 3 && code != 0 {
		t.Fatalf("final resume: exit %d\n%s", code, out)
	}
	if got := checksum(t, dsn); got != want {
		t.Fatalf("after %d kills and a resume: checksum %s, clean load %s", killed, got, want)
	}
}

// Two processes at once, the buckets split between them, or both over
// every bucket with --resume: the database is that of one clean load.
func TestPostgres_TwoProcesses(t *testing.T) {
	t.Parallel()
	bin, in := buildBinary(t), genPG(t)
	admin := pgtest.AdminURL(t)
	clean := pgtest.CreateDatabase(t, admin)
	if out, err := pgRun(bin, in, clean).CombinedOutput(); testutil.ExitCode(err) != 3 {
		t.Fatalf("clean load: %v\n%s", err, out)
	}
	want := checksum(t, clean)
	buckets := []string{"2017-06-01", "2017-06-02", "2017-06-03", "2017-06-04"}
	for _, split := range [][2][]string{
		{{"--", buckets[0], buckets[2]}, {"--", buckets[3], buckets[1]}},
		{{"--resume"}, {"--resume"}},
	} {
		dsn := pgtest.CreateDatabase(t, admin)
		if code, out := call("schema", "--dsn", dsn); code != 0 {
			t.Fatalf("schema: exit %d\n%s", code, out)
		}
		var cmds [2]*exec.Cmd
		var errs [2]bytes.Buffer
		for i := range cmds {
			cmds[i] = pgRun(bin, in, dsn, split[i]...)
			cmds[i].Stderr = &errs[i]
			if err := cmds[i].Start(); err != nil {
				t.Fatal(err)
			}
		}
		for i := range cmds {
			if code := testutil.ExitCode(cmds[i].Wait()); code != 3 && code != 0 {
				t.Fatalf("process %d of %v: exit %d\n%s", i, split, code, errs[i].String())
			}
		}
		if got := checksum(t, dsn); got != want {
			t.Errorf("%v: checksum %s, clean load %s\n%s\n%s", split, got, want, errs[0].String(), errs[1].String())
		}
	}
}

// The password of --dsn appears nowhere in the output of a failed run.
func TestPostgres_PasswordNotShown(t *testing.T) {
	t.Parallel()
	const secret = "n0t-F0r-y0ur-eyes"
	dir := filepath.Join(t.TempDir(), "2017-06-01") // a bucket folder: the input is fine
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"run", "--in", dir, "--sink", "postgres", "--dsn", "postgres://postgres:" + secret + "@127.0.0.1:1/x?connect_timeout=2"},
		{"schema", "--dsn", "postgres://postgres:" + secret + "@127.0.0.1:1/x%zz"},
	} {
		var out, errb bytes.Buffer
		code := exitCode(run(context.Background(), args, cli.Stdio{In: strings.NewReader(""), Out: &out, Err: &errb}), &errb)
		if code != 1 || strings.Contains(out.String()+errb.String(), secret) || errb.Len() == 0 {
			t.Errorf("%s: exit %d, output %q %q", args[0], code, out.String(), errb.String())
		}
	}
}

// copying waits until the server shows a COPY into the database of dsn
// from a session started since (the run's, not that of a run killed
// before it, which the server may not have ended yet), and reports true,
// or until the run ends first, and reports false with the run's error in
// *err.
func copying(t *testing.T, watch *pgx.Conn, dsn string, since time.Time, exited <-chan error, err *error) bool {
	t.Helper()
	u, perr := url.Parse(dsn)
	if perr != nil {
		t.Fatal(perr)
	}
	db := strings.TrimPrefix(u.Path, "/")
	for {
		select {
		case *err = <-exited:
			return false
		default:
		}
		var n int
		if qerr := watch.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = $1 AND state = 'active' AND query ILIKE 'copy %' AND backend_start >= $2`, db, since).Scan(&n); qerr != nil {
			t.Fatal(qerr)
		}
		if n > 0 {
			return true
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// --connections must be 1 or more, and is for the PostgreSQL sink only;
// --build-workers and --build-memory are for --bulk, and checked.
func TestPostgres_ConnectionsUsage(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "2017-06-01")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		err  string
	}{
		{[]string{"run", "--in", dir, "--sink", "postgres", "--connections", "0"}, "--connections must be 1 to 256"},
		{[]string{"run", "--in", dir, "--out", t.TempDir(), "--connections", "2"}, "--connections"},
		{[]string{"load", "--plan", "p.json", "--out", t.TempDir(), "--sink", "postgres", "--connections", "0"}, "--connections must be 1 to 256"},
		{[]string{"load", "--plan", "p.json", "--out", t.TempDir(), "--connections", "2"}, "--connections is for --sink postgres"},
		{[]string{"run", "--in", dir, "--sink", "postgres", "--build-workers", "0"}, "--build-workers says how --bulk builds the indexes at the end; add --bulk"},
		{[]string{"run", "--in", dir, "--sink", "postgres", "--bulk", "--build-workers", "-2"}, "--build-workers must be -1 (the server's setting) or 0 to 64"},
		{[]string{"run", "--in", dir, "--sink", "postgres", "--bulk", "--build-memory", "64k"}, "PostgreSQL takes at least 1MiB"},
		{[]string{"run", "--in", dir, "--sink", "postgres", "--bulk", "--build-memory", "lots"}, "auto, server or a size"},
		{[]string{"run", "--in", dir, "--out", t.TempDir(), "--build-memory", "auto"}, "--build-memory is for --sink postgres"},
	} {
		var out, errb bytes.Buffer
		code := exitCode(run(context.Background(), c.args, cli.Stdio{In: strings.NewReader(""), Out: &out, Err: &errb}), &errb)
		if code != 2 || !strings.Contains(errb.String(), c.err) {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", c.args, code, errb.String(), c.err)
		}
	}
}
