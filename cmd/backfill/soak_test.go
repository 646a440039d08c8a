package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/backfill-dev/backfill/internal/cli"
	"github.com/backfill-dev/backfill/internal/faultproxy"
	"github.com/backfill-dev/backfill/internal/pgtest"
	"github.com/backfill-dev/backfill/internal/s3test"
)

// TestSoak_NetFaults runs for BACKFILL_SOAK (make soak: 30m; skipped
// without it): random network faults switch on and off, on the way to
// PostgreSQL and to an S3 server, during runs of a scale-1 corpus made
// again and again into each. Every run that finishes has the output of a
// clean run; every run that fails does so within its bound, and --resume
// (the faults off) then finishes it; no run hangs. It reports the counts.
func TestSoak_NetFaults(t *testing.T) {
	d, err := time.ParseDuration(os.Getenv("BACKFILL_SOAK"))
	if err != nil {
		t.Skip("set BACKFILL_SOAK to a duration (make soak)")
	}
	in := genPG(t)
	admin := pgtest.AdminURL(t)
	wantPG := cleanLoad(t, in, admin)
	srv := s3test.Start(t, "soak")
	if code, out := call("run", "-q", "--in", in, "--out", "s3://soak/ref", "--max-blob", "1MiB"); code != cli.ExitRejects {
		t.Fatalf("clean run: exit %d\n%s", code, out)
	}
	wantS3 := tree(t, "s3://soak/ref")
	au, err := url.Parse(admin)
	if err != nil {
		t.Fatal(err)
	}
	pgProxy := faultproxy.Start(t, au.Host)
	s3Proxy := faultproxy.Start(t, strings.TrimPrefix(srv.URL, "http://"))
	t.Setenv("AWS_ENDPOINT_URL", "http://"+s3Proxy.Addr())
	t.Setenv("BACKFILL_S3_STALL", "2s")
	t.Setenv("AWS_MAX_ATTEMPTS", "3")
	t.Setenv("BACKFILL_S3_MAX_BACKOFF", "200ms")
	const pgTimeout = 5 * time.Second
	bound := 2 * time.Minute // a failing run's: a bucket's tries, and every request's

	rng := rand.New(rand.NewPCG(99, 99))
	var mu sync.Mutex
	faults := 0
	stop := make(chan struct{})
	var chaos sync.WaitGroup
	chaos.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(500+rng.IntN(2500)) * time.Millisecond):
			}
			mu.Lock()
			toxics := netToxics(rng)
			tc := toxics[rng.IntN(len(toxics))]
			p := pgProxy
			if rng.IntN(2) == 0 {
				p = s3Proxy
			}
			p.Clear()
			if rng.IntN(3) > 0 { // a third of the time, no fault
				p.Add(t, tc.toxic)
				faults++
			}
			mu.Unlock()
		}
	})
	quiet := func() {
		mu.Lock()
		pgProxy.Clear()
		s3Proxy.Clear()
	}
	var runs, finished, failed, hangs int
	var slowest time.Duration
	deadline := time.Now().Add(d)
	for i := 0; time.Now().Before(deadline); i++ {
		var args []string
		var dsn string
		if i%2 == 0 {
			dsn = pgtest.CreateDatabase(t, admin)
			u, _ := url.Parse(dsn)
			u.Host = pgProxy.Addr()
			args = []string{"run", "-q", "--in", in, "--sink", "postgres", "--dsn", u.String(), "--create-schema", "--max-blob", "1MiB",
				"--pg-timeout", pgTimeout.String(), "--retries", "2", "--retry-wait", "100ms"}
		} else {
			args = []string{"run", "-q", "--in", in, "--out", fmt.Sprintf("s3://soak/run%d", i), "--max-blob", "1MiB"}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*bound)
		var errb bytes.Buffer
		start := time.Now()
		code := exitCode(run(ctx, args, cli.Stdio{In: strings.NewReader(""), Out: &bytes.Buffer{}, Err: &errb}), &errb)
		took := time.Since(start)
		hung := ctx.Err() != nil
		cancel()
		runs++
		slowest = max(slowest, took)
		switch {
		case hung:
			hangs++
			t.Errorf("run %d hung (%v)", i, took)
		case code == cli.ExitFailure:
			failed++
			if took > bound {
				t.Errorf("run %d failed after %v, past its bound %v:\n%s", i, took, bound, errb.String())
			}
			quiet()
			rcode := exitCode(run(context.Background(), append(args, "--resume"), cli.Stdio{In: strings.NewReader(""), Out: &bytes.Buffer{}, Err: &errb}), &errb)
			mu.Unlock()
			if rcode != cli.ExitRejects {
				t.Fatalf("run %d: --resume with the faults off: exit %d\n%s", i, rcode, errb.String())
			}
		case code != cli.ExitRejects:
			t.Fatalf("run %d: exit %d\n%s", i, code, errb.String())
		default:
			finished++
		}
		quiet() // the output is read back with the faults off
		if i%2 == 0 {
			if got := checksum(t, dsn); got != wantPG {
				t.Errorf("run %d: the database differs from a clean load's", i)
			}
		} else {
			sameOutput(t, wantS3, tree(t, fmt.Sprintf("s3://soak/run%d", i)), false)
		}
		mu.Unlock()
	}
	close(stop)
	chaos.Wait()
	t.Logf("soak of %v: %d runs, %d faults switched on, %d finished identical to a clean run, %d failed within the bound (then resumed), %d hung; slowest run %v",
		d, runs, faults, finished, failed, hangs, slowest.Round(time.Millisecond))
}
