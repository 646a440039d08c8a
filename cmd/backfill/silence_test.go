package main

import (
	"bytes"
	"context"
	"os"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/backfill-dev/backfill/internal/cli"
	"github.com/backfill-dev/backfill/internal/faultproxy"
	"github.com/backfill-dev/backfill/internal/pgtest"
	"github.com/backfill-dev/backfill/internal/testutil"
)

// The bound on a server's silence (--pg-timeout): a load is never cut
// while its bytes move, however slow the network, nor while the server
// is at work on it (here, waiting on a lock for several silences); a
// server that goes silent for good (packets dropped, no reset) ends the
// run with exit 1 and a line that says so; --resume then finishes it.
func TestSilence_Postgres(t *testing.T) {
	t.Parallel()
	in := genPG(t)
	admin := pgtest.AdminURL(t)
	want := cleanLoad(t, in, admin)
	proxy, via := pgFaultProxy(t, admin)
	const silence = time.Second
	load := func(dsn string, extra ...string) (int, string, time.Duration) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*hangBound)
		defer cancel()
		args := append([]string{"run", "-q", "--in", in, "--sink", "postgres", "--dsn", via(dsn), "--create-schema", "--max-blob", "1MiB",
			"--pg-timeout", silence.String(), "--retries", "1", "--retry-wait", "100ms", "--connections", "1"}, extra...)
		var errb bytes.Buffer
		start := time.Now()
		code := exitCode(run(ctx, args, cli.Stdio{In: strings.NewReader(""), Out: &bytes.Buffer{}, Err: &errb}), &errb)
		if ctx.Err() != nil {
			pprof.Lookup("goroutine").WriteTo(os.Stderr, 1) // where it waits
			t.Fatalf("the run hung for %s\n%s", time.Since(start), errb.String())
		}
		return code, errb.String(), time.Since(start)
	}

	t.Run("slow but at work", func(t *testing.T) {
		dsn := pgtest.CreateDatabase(t, admin)
		// The client's rows reach the server at 128 KiB/s: the load lasts
		// many silences, its bytes always on the move; a slow network is
		// not a silent one. (The probe's verdict on a server at work is
		// the next case's.)
		proxy.Add(t, faultproxy.Toxic{Name: "slow", Type: "bandwidth", Stream: "upstream", Attributes: map[string]any{"rate": 128}})
		defer proxy.Clear()
		code, stderr, took := load(dsn)
		if took < 4*silence {
			t.Fatalf("the load took %s, not several silences: the toxic did not slow it, and the test proves nothing", took)
		}
		if code != cli.ExitRejects || strings.Contains(stderr, "no answer") {
			t.Fatalf("a slow load was cut: exit %d after %s\n%s", code, took, stderr)
		}
		if got := checksum(t, dsn); got != want {
			t.Errorf("the slow load's database differs from a clean load's")
		}
	})

	t.Run("at work on a lock", func(t *testing.T) {
		dsn := pgtest.CreateDatabase(t, admin)
		if code, out := call("schema", "--dsn", dsn); code != 0 {
			t.Fatalf("schema: exit %d\n%s", code, out)
		}
		// Another session holds the measurements' table: the run's COPY
		// waits on the lock, silent, its session active, for several
		// silences; then the lock goes, and the load must finish.
		c := pgtest.Connect(t, dsn)
		defer c.Close(context.Background())
		tx, err := c.Begin(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(context.Background(), `LOCK TABLE backfill.measurements IN ACCESS EXCLUSIVE MODE`); err != nil {
			t.Fatal(err)
		}
		waited := make(chan struct{})
		go func() {
			defer close(waited)
			w := pgtest.Connect(t, dsn)
			defer w.Close(context.Background())
			if !testutil.Eventually(time.Minute, func() bool {
				var n int
				return w.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
					WHERE application_name = 'backfill' AND wait_event_type = 'Lock'`).Scan(&n) == nil && n > 0
			}) {
				t.Errorf("the run never waited on the lock within a minute")
			}
			// The fault itself: the lock is held this long after the run
			// met it, three silences and more.
			time.Sleep(4 * silence)
			_ = tx.Commit(context.Background())
		}()
		code, stderr, _ := load(dsn)
		select {
		case <-waited:
		default:
			_ = tx.Rollback(context.Background())
			t.Fatalf("the run ended (exit %d) without waiting on the lock: the test proves nothing\n%s", code, stderr)
		}
		if code != cli.ExitRejects || strings.Contains(stderr, "no answer") {
			t.Fatalf("a run waiting on a lock was cut: exit %d\n%s", code, stderr)
		}
		if got := checksum(t, dsn); got != want {
			t.Errorf("after the wait, the database differs from a clean load's")
		}
	})

	t.Run("silent for good", func(t *testing.T) {
		dsn := pgtest.CreateDatabase(t, admin)
		// Once a bucket is committed, the server's answers are dropped for
		// good: the connection stays open, no reset, nothing comes back.
		go func() {
			c := pgtest.Connect(t, dsn)
			defer c.Close(context.Background())
			if !testutil.Eventually(time.Minute, func() bool {
				var n int
				return c.QueryRow(context.Background(), `SELECT count(*) FROM backfill.ledger WHERE status = 'committed'`).Scan(&n) == nil && n >= 1
			}) {
				t.Errorf("no bucket was committed within a minute: the fault came late")
			}
			proxy.Add(t, faultproxy.Toxic{Name: "silent", Type: "timeout", Stream: "downstream", Attributes: map[string]any{"timeout": 0}})
		}()
		code, stderr, took := load(dsn)
		proxy.Clear()
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		last := lines[len(lines)-1]
		if code != cli.ExitFailure || !strings.Contains(stderr, "no answer from the server for 1s") {
			t.Fatalf("silent for good: exit %d after %s\n%s\nwant 1 and the silence named", code, took, stderr)
		}
		t.Logf("silent for good: exit 1 after %s: %s", took.Round(10*time.Millisecond), last)
		if code, stderr, _ := load(dsn, "--resume"); code != cli.ExitRejects {
			t.Fatalf("resume: exit %d\n%s", code, stderr)
		}
		if got := checksum(t, dsn); got != want {
			t.Errorf("after the silence and --resume, the database differs from a clean load's")
		}
	})
}
