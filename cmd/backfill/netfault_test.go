package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/backfill-dev/backfill/internal/cli"
	"github.com/backfill-dev/backfill/internal/cumulustest"
	"github.com/backfill-dev/backfill/internal/faultproxy"
	"github.com/backfill-dev/backfill/internal/pgtest"
	"github.com/backfill-dev/backfill/internal/s3test"
	"github.com/backfill-dev/backfill/internal/testutil"
)

// netToxics are the faults of the network between the tool and a server,
// each switched on at a random moment of a run. Those that break the
// connection (a black hole from a random byte, in either direction, with no
// close and no reset; a reset) make a run that meets them for good fail
// within its bound; the others only slow it.
func netToxics(rng *rand.Rand) []struct {
	toxic  faultproxy.Toxic
	breaks bool
} {
	return []struct {
		toxic  faultproxy.Toxic
		breaks bool
	}{
		{faultproxy.Toxic{Name: "latency", Type: "latency", Stream: "downstream", Attributes: map[string]any{"latency": 100, "jitter": 50}}, false},
		{faultproxy.Toxic{Name: "blackhole-down", Type: "blackhole_after", Stream: "downstream", Attributes: map[string]any{"bytes": rng.IntN(4 << 10)}}, true},
		{faultproxy.Toxic{Name: "blackhole-up", Type: "blackhole_after", Stream: "upstream", Attributes: map[string]any{"bytes": rng.IntN(64 << 10)}}, true},
		{faultproxy.Toxic{Name: "reset", Type: "reset_peer", Stream: "downstream", Attributes: map[string]any{"timeout": 0}}, true},
		{faultproxy.Toxic{Name: "bandwidth", Type: "bandwidth", Stream: "upstream", Attributes: map[string]any{"rate": 256}}, false},
		{faultproxy.Toxic{Name: "slicer", Type: "slicer", Stream: "downstream", Attributes: map[string]any{"average_size": 64, "size_variation": 32, "delay": 10}}, false},
	}
}

// pgFaultProxy starts a fault proxy in front of the server of admin, and
// returns it with via, which points a connection string at it.
func pgFaultProxy(t *testing.T, admin string) (*faultproxy.Proxy, func(dsn string) string) {
	t.Helper()
	au, err := url.Parse(admin)
	if err != nil {
		t.Fatal(err)
	}
	proxy := faultproxy.Start(t, au.Host)
	return proxy, func(dsn string) string {
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		u.Host = proxy.Addr()
		return u.String()
	}
}

// cleanLoad loads in into a new database with no fault in the way and
// returns the checksum of its tables: what a faulted load must end as.
func cleanLoad(t *testing.T, in, admin string) string {
	t.Helper()
	clean := pgtest.CreateDatabase(t, admin)
	if code, out := call("run", "-q", "--in", in, "--sink", "postgres", "--dsn", clean, "--create-schema", "--max-blob", "1MiB"); code != cli.ExitRejects {
		t.Fatalf("clean load: exit %d\n%s", code, out)
	}
	return checksum(t, clean)
}

// run --sink postgres through a fault proxy. Each fault comes at a random
// moment of the load. When it clears, the run finishes with the database
// of a clean load. When it persists, a fault that breaks the connection
// fails the run with exit 1 within a few --pg-timeouts per try, in one
// line that names the database and what timed out, the committed buckets
// whole; --resume then finishes it.
func TestNetFaults_Postgres(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("network faults take seconds each")
	}
	in := genPG(t)
	admin := pgtest.AdminURL(t)
	want := cleanLoad(t, in, admin)
	const timeout, tries = 5 * time.Second, 2
	rng := rand.New(rand.NewPCG(35, 35))
	var rngMu sync.Mutex
	for _, tc := range netToxics(rng) {
		t.Run(tc.toxic.Name, func(t *testing.T) {
			t.Parallel() // each case has a proxy and databases of its own
			proxy, via := pgFaultProxy(t, admin)
			load := func(ctx context.Context, dsn string, extra ...string) (int, string, time.Duration) {
				args := append([]string{"run", "-q", "--in", in, "--sink", "postgres", "--dsn", via(dsn), "--create-schema", "--max-blob", "1MiB",
					"--pg-timeout", timeout.String(), "--retries", "1", "--retry-wait", "100ms"}, extra...)
				var errb bytes.Buffer
				start := time.Now()
				code := exitCode(run(ctx, args, cli.Stdio{In: strings.NewReader(""), Out: &bytes.Buffer{}, Err: &errb}), &errb)
				return code, errb.String(), time.Since(start)
			}
			// during waits until k buckets are committed (k random, 0 to 2
			// of the corpus's 4), so that the fault comes while the load is
			// under way. With first, it waits for none: the fault comes as
			// soon as the schema is there. It fails the test, not in
			// silence, if that never comes.
			during := func(dsn string, first bool) {
				c := pgtest.Connect(t, dsn)
				rngMu.Lock()
				k := rng.IntN(3)
				rngMu.Unlock()
				if first {
					k = 0
				}
				if !testutil.Eventually(time.Minute, func() bool {
					var n int
					return c.QueryRow(context.Background(), `SELECT count(*) FROM backfill.ledger WHERE status = 'committed'`).Scan(&n) == nil && n >= k
				}) {
					t.Errorf("during: %d buckets were never committed: the fault came at the minute's end, not during the load", k)
				}
			}

			// The fault clears: the output is a clean load's. The fault
			// must be switched on before the run ends: a run it missed is
			// made again with the fault at once, at most twice more.
			var dsn string
			var code int
			var stderr string
			var took time.Duration
			for try := 0; ; try++ {
				dsn = pgtest.CreateDatabase(t, admin)
				var addedAt time.Time
				done := make(chan struct{})
				go func() {
					defer close(done)
					during(dsn, try > 0)
					proxy.Add(t, tc.toxic)
					addedAt = time.Now()
					time.Sleep(time.Second) // how long the fault lasts
					proxy.Remove(t, tc.toxic.Name)
				}()
				code, stderr, took = load(context.Background(), dsn)
				ended := time.Now()
				<-done
				proxy.Clear()
				if addedAt.Before(ended) {
					break
				}
				if try == 2 {
					t.Fatalf("fault cleared: it came after the run's end in 3 runs, the last with the fault at once: the case tests nothing")
				}
				t.Logf("fault cleared, but came after the run's end (exit %d after %v): again, with the fault at once", code, took.Round(10*time.Millisecond))
			}
			if code != cli.ExitRejects {
				// A break that came after the last try: the run failed
				// within its bound, and --resume finishes it.
				if !tc.breaks || code != cli.ExitFailure {
					t.Fatalf("fault cleared: exit %d after %v\n%s", code, took, stderr)
				}
				if code, stderr, _ = load(context.Background(), dsn, "--resume"); code != cli.ExitRejects {
					t.Fatalf("resume after the fault cleared: exit %d\n%s", code, stderr)
				}
			}
			if got := checksum(t, dsn); got != want {
				t.Errorf("fault cleared: database differs from a clean load's")
			}
			t.Logf("fault for 1 s, then cleared: exit %d, %v", code, took.Round(10*time.Millisecond))

			// The fault persists. A fault that breaks the connection must
			// land before the run's last exchange: a run it missed is made
			// again, the fault at once, at most twice more; never passed.
			var hung bool
			for try := 0; ; try++ {
				db := pgtest.CreateDatabase(t, admin)
				dsn = db
				added := make(chan struct{})
				go func() {
					defer close(added)
					during(db, try > 0)
					proxy.Add(t, tc.toxic)
				}()
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a hang fails the test, not CI
				code, stderr, took = load(ctx, db)
				hung = ctx.Err() != nil
				cancel()
				<-added // a fault added after the run ended must not outlive it
				proxy.Clear()
				if hung || !tc.breaks || code != cli.ExitRejects {
					break
				}
				if try == 2 {
					t.Fatalf("fault persists: it came after the run's last exchange in 3 runs, the last with the fault at once: the case tests nothing")
				}
				t.Logf("fault persists, but came after the run's last exchange (exit 3 after %v): again, with the fault at once", took.Round(10*time.Millisecond))
			}
			switch {
			case hung:
				t.Fatalf("fault persists: the run hung for %v", took)
			case !tc.breaks && code != cli.ExitRejects:
				t.Fatalf("fault persists (it only slows): exit %d\n%s", code, stderr)
			case tc.breaks && code == cli.ExitFailure:
				lines := strings.Split(strings.TrimSpace(stderr), "\n")
				last := lines[len(lines)-1]
				// Each try: a silence, a probe that finds the COPY waiting,
				// a silence more, a probe (docs/postgres.md); its
				// connection's close; the connect.
				bound := tries*(3*timeout+5*time.Second) + 10*time.Second
				if took > bound || !strings.Contains(last, "postgres ") || !strings.Contains(last, "@"+proxy.Addr()+"/") {
					t.Errorf("fault persists: exit 1 after %v (bound %v), last line %q", took, bound, last)
				}
				t.Logf("fault persists: exit 1 after %v: %s", took.Round(10*time.Millisecond), last)
				if schemaExists(t, dsn) {
					checksum(t, dsn) // the committed buckets whole
				}
				if code, stderr, _ := load(context.Background(), dsn, "--resume"); code != cli.ExitRejects {
					t.Fatalf("resume: exit %d\n%s", code, stderr)
				}
			case tc.breaks:
				t.Fatalf("fault persists: exit %d\n%s", code, stderr)
			}
			if got := checksum(t, dsn); got != want {
				t.Errorf("fault persisted, then --resume: database differs from a clean load's")
			}
		})
	}
}

func schemaExists(t *testing.T, dsn string) bool {
	t.Helper()
	var ok bool
	c := pgtest.Connect(t, dsn)
	defer c.Close(context.Background())
	if err := c.QueryRow(context.Background(), `SELECT to_regclass('backfill.measurement_ids') IS NOT NULL`).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok
}

// run to an s3:// output through a fault proxy, as for PostgreSQL: a fault
// that clears costs time only, and the output is a clean run's; one that
// breaks the connection and persists fails the run with exit 1 within the
// stall bound times the SDK's attempts, in one line naming the endpoint's
// failure, the committed buckets whole; --resume finishes it.
func TestNetFaults_S3(t *testing.T) {
	if testing.Short() {
		t.Skip("network faults take seconds each")
	}
	srv := s3test.Start(t, "test")
	in := filepath.Join(t.TempDir(), "c")
	genCorpus(t, in, "--buckets", "4", "--reports", "60", "--max-measurements", "3000", "--corrupt", "all=0.02")
	if code, out := call("run", "-q", "--in", in, "--out", "s3://test/ref"); code != cli.ExitRejects {
		t.Fatalf("clean run: exit %d\n%s", code, out)
	}
	want := tree(t, "s3://test/ref")
	proxy := faultproxy.Start(t, strings.TrimPrefix(srv.URL, "http://"))
	t.Setenv("AWS_ENDPOINT_URL", "http://"+proxy.Addr())
	const stall, attempts = time.Second, 3
	t.Setenv("BACKFILL_S3_STALL", stall.String())
	t.Setenv("AWS_MAX_ATTEMPTS", strconv.Itoa(attempts))
	t.Setenv("BACKFILL_S3_MAX_BACKOFF", "100ms")
	rng := rand.New(rand.NewPCG(36, 36))
	var mu sync.Mutex
	var adds sync.WaitGroup
	var trigger func(path string)
	srv.OnPut(func(p s3test.Put) {
		mu.Lock()
		defer mu.Unlock()
		if trigger != nil {
			trigger(p.Path)
		}
	})
	// during switches the fault on once k ledger entries (k random, 0 to 2
	// of the corpus's 4) are under out; with first, at once. addedAt is
	// when it did, to tell whether the fault landed in the run.
	var addedAt time.Time
	during := func(out string, tx faultproxy.Toxic, first bool) {
		k := rng.IntN(3)
		if first {
			k = 0
		}
		n := 0
		on := func() {
			adds.Go(func() {
				proxy.Add(t, tx)
				mu.Lock()
				addedAt = time.Now()
				mu.Unlock()
			})
		}
		mu.Lock()
		defer mu.Unlock()
		addedAt = time.Time{}
		if k == 0 {
			on()
			return
		}
		trigger = func(path string) {
			if strings.Contains(path, "/"+out+"/ledger/") {
				if n++; n == k {
					on()
					trigger = nil
				}
			}
		}
	}
	// landed tells whether the fault was switched on before ended.
	landed := func(ended time.Time) bool {
		mu.Lock()
		defer mu.Unlock()
		return !addedAt.IsZero() && addedAt.Before(ended)
	}
	load := func(out string, extra ...string) (int, string, time.Duration) {
		var errb bytes.Buffer
		start := time.Now()
		code := exitCode(run(context.Background(), append([]string{"run", "-q", "--in", in, "--out", "s3://test/" + out}, extra...),
			cli.Stdio{In: strings.NewReader(""), Out: &bytes.Buffer{}, Err: &errb}), &errb)
		return code, errb.String(), time.Since(start)
	}
	for i, tc := range netToxics(rng) {
		t.Run(tc.toxic.Name, func(t *testing.T) {
			// disarm stops the trigger and waits for a fault it switched on.
			disarm := func() {
				mu.Lock()
				trigger = nil
				mu.Unlock()
				adds.Wait()
			}
			// A run the fault missed (it came after the run's end) is
			// made again with the fault at once, at most twice more.
			var out, stderr string
			var code int
			var took time.Duration
			for try := 0; ; try++ {
				out = fmt.Sprintf("cleared%d-%d", i, try)
				during(out, tc.toxic, try > 0)
				cleared := make(chan struct{})
				go func() {
					// Cleared 1.5 s into the run, whatever it is doing then.
					defer close(cleared)
					time.Sleep(1500 * time.Millisecond) // how long the fault lasts
					disarm()
					proxy.Clear()
				}()
				code, stderr, took = load(out)
				ended := time.Now()
				<-cleared
				if landed(ended) {
					break
				}
				if try == 2 {
					t.Fatalf("fault cleared: it came after the run's end in 3 runs, the last with the fault at once: the case tests nothing")
				}
			}
			if code != cli.ExitRejects {
				if !tc.breaks || code != cli.ExitFailure {
					t.Fatalf("fault cleared: exit %d after %v\n%s", code, took, stderr)
				}
				if code, stderr, _ = load(out, "--resume"); code != cli.ExitRejects {
					t.Fatalf("resume after the fault cleared: exit %d\n%s", code, stderr)
				}
			}
			sameOutput(t, want, tree(t, "s3://test/"+out), false)
			t.Logf("fault cleared: exit %d, %v", code, took.Round(10*time.Millisecond))

			// The fault persists.
			for try := 0; ; try++ {
				out = fmt.Sprintf("persists%d-%d", i, try)
				during(out, tc.toxic, try > 0)
				code, stderr, took = load(out)
				ended := time.Now()
				disarm()
				proxy.Clear()
				if landed(ended) {
					break
				}
				if try == 2 {
					t.Fatalf("fault persists: it came after the run's end in 3 runs, the last with the fault at once: the case tests nothing")
				}
			}
			switch {
			case !tc.breaks && code != cli.ExitRejects:
				t.Fatalf("fault persists (it only slows): exit %d\n%s", code, stderr)
			case tc.breaks && code == cli.ExitFailure:
				lines := strings.Split(strings.TrimSpace(stderr), "\n")
				last := lines[len(lines)-1]
				// A hang bound, generous: a stall per attempt, a few times
				// over (docs/object-storage.md); a hang is the failure.
				bound := 10*attempts*stall + 10*time.Second
				if took > bound || !strings.Contains(last, "S3 endpoint") {
					t.Errorf("fault persists: exit 1 after %v (bound %v), last line %q", took, bound, last)
				}
				t.Logf("fault persists: exit 1 after %v: %s", took.Round(10*time.Millisecond), last)
				if code, stderr, _ := load(out, "--resume"); code != cli.ExitRejects {
					t.Fatalf("resume: exit %d\n%s", code, stderr)
				}
			case tc.breaks && code == cli.ExitRejects:
				// The fault came during the run; each new connection passes
				// the black hole's first bytes, and the retries got through.
				t.Logf("fault persists, and the run's retries got through it: exit 3 after %v", took.Round(10*time.Millisecond))
			case tc.breaks:
				t.Fatalf("fault persists: exit %d\n%s", code, stderr)
			}
			sameOutput(t, want, tree(t, "s3://test/"+out), false)
		})
	}
}

// stamp --listen behind a fault proxy: clients meet each network fault for
// a while, then it clears. The server goes on serving a direct client
// within its --http-timeout throughout (a faulty connection cannot hold
// it), the clients get IDs again once the fault clears, and every ID
// handed out is unique.
func TestNetFaults_Stamp(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("network faults take seconds each")
	}
	direct := serveStamp(t, "7", "1s")
	proxy := faultproxy.Start(t, strings.TrimSuffix(strings.TrimPrefix(direct, "http://"), "/ids"))
	via := "http://" + proxy.Addr() + "/ids"
	var mu sync.Mutex
	seen := map[string]bool{}
	fetch := func(url string, timeout time.Duration) (int, error) {
		c := &http.Client{Timeout: timeout}
		resp, err := c.Get(url + "?n=50")
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		var body struct{ IDs []string }
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			return 0, err
		}
		mu.Lock()
		defer mu.Unlock()
		for _, id := range body.IDs {
			if seen[id] {
				t.Errorf("ID %s handed out twice", id)
			}
			seen[id] = true
		}
		return len(body.IDs), nil
	}
	rng := rand.New(rand.NewPCG(37, 37))
	for _, tc := range netToxics(rng) {
		t.Run(tc.toxic.Name, func(t *testing.T) {
			proxy.Add(t, tc.toxic)
			stop := make(chan struct{})
			var clients sync.WaitGroup
			for range 4 {
				clients.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
						}
						fetch(via, 3*time.Second) // fails or not, as the fault has it
					}
				})
			}
			for range 5 {
				start := time.Now()
				if _, err := fetch(direct, 5*time.Second); err != nil || time.Since(start) > 2*time.Second {
					t.Errorf("a direct client during the fault: %v after %v", err, time.Since(start))
				}
				time.Sleep(200 * time.Millisecond)
			}
			close(stop)
			clients.Wait()
			proxy.Clear()
			if n, err := fetch(via, 5*time.Second); err != nil || n != 50 {
				t.Errorf("through the proxy once the fault cleared: %d IDs, %v", n, err)
			}
		})
	}
	t.Logf("%d unique IDs handed out", len(seen))
}

// granule-recover with the database behind the fault proxy: each message
// of the archive is, at every moment, written or still archived, never
// lost; a fault that persists fails the command with exit 1 within
// --pg-timeout times its tries, and running it again finishes the job.
func TestNetFaults_GranuleRecover(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("network faults take seconds each")
	}
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(38, 38))
	const n = 300
	for i, tc := range netToxics(rng) {
		if !tc.breaks {
			continue // a slow database only slows the replay
		}
		k := rng.IntN(2 * n / 3) // the fault comes once k messages are written
		t.Run(tc.toxic.Name, func(t *testing.T) {
			t.Parallel() // each case has a proxy, a database and an archive of its own
			// A run the fault missed (it came after the last batch) is
			// made again with the fault at once, at most twice more.
			for try := 0; ; try++ {
				if try > 0 {
					k = 0
				}
				db := pgtest.NewDatabase(t)
				if code, out := call("granule-schema", "--dsn", db); code != cli.ExitOK {
					t.Fatalf("granule-schema: exit %d\n%s", code, out)
				}
				cumulustest.Seed(t, db)
				in := filepath.Join(dir, fmt.Sprintf("m%d-%d.jsonl", i, try))
				arch := filepath.Join(dir, fmt.Sprintf("a%d-%d", i, try))
				granuleMsgs(t, in, "LATER___1", "g", n)
				if code, _ := call("granule-write", "--dsn", db, "--archive", arch, in); code != cli.ExitRejects {
					t.Fatalf("granule-write: exit %d", code)
				}
				pool := cumulustest.Pool(t, db)
				cumulustest.AddCollection(t, pool, "LATER___1")
				u, err := url.Parse(db)
				if err != nil {
					t.Fatal(err)
				}
				proxy := faultproxy.Start(t, u.Host)
				u.Host = proxy.Addr()
				// Every granule is written or archived, and once at most
				// in the database.
				whole := func() int {
					t.Helper()
					written := cumulustest.Lines(t, pool, `SELECT granule_id FROM granules ORDER BY 1`)
					archived := countFiles(t, filepath.Join(arch, "dead-letter-archive", "sqs"))
					if len(written)+archived < n {
						t.Fatalf("%d written and %d archived of %d messages: some lost", len(written), archived, n)
					}
					return len(written)
				}
				added := make(chan struct{})
				go func() {
					defer close(added)
					if !testutil.Eventually(time.Minute, func() bool {
						return len(cumulustest.Lines(t, pool, `SELECT granule_id FROM granules`)) >= k
					}) {
						t.Errorf("%d messages were never written: the fault came at the minute's end, not during the replay", k)
					}
					proxy.Add(t, tc.toxic)
				}()
				var errb bytes.Buffer
				start := time.Now()
				code := exitCode(run(context.Background(), []string{"granule-recover", "--dsn", u.String(), "--archive", arch,
					"--batch", "20", "--concurrency", "2", "--pg-timeout", "2s"}, cli.Stdio{In: strings.NewReader(""), Out: &bytes.Buffer{}, Err: &errb}), &errb)
				took := time.Since(start)
				<-added
				proxy.Clear()
				if code == cli.ExitOK {
					if try == 2 {
						t.Fatalf("the fault came after the last batch in 3 runs, the last with the fault at once: the case tests nothing")
					}
					t.Logf("the fault came after the last batch (%d of %d written before it): again, with the fault at once", k, n)
					continue
				}
				// A hang bound, generous: each try waits out --pg-timeout a
				// few times (docs/postgres.md), and a hang is the failure.
				if code != cli.ExitFailure || took > 2*5*(2*time.Second+5*time.Second) {
					t.Errorf("fault persists: exit %d after %v\n%.2000s", code, took, errb.String())
				}
				t.Logf("fault persists: exit %d after %v, %d of %d written", code, took.Round(10*time.Millisecond), whole(), n)
				if code, out := call("granule-recover", "--dsn", u.String(), "--archive", arch); code != cli.ExitOK {
					t.Fatalf("granule-recover once the fault cleared: exit %d\n%s", code, out)
				}
				if got := whole(); got != n || countFiles(t, filepath.Join(arch, "dead-letter-archive", "sqs")) != 0 {
					t.Errorf("after recovery: %d written of %d, archive not empty", got, n)
				}
				return
			}
		})
	}
}
