package pgcopy_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/backfill-dev/backfill/gen/corpus"
	"github.com/backfill-dev/backfill/gen/corpus/corpustest"
	"github.com/backfill-dev/backfill/internal/pgtest"
	"github.com/backfill-dev/backfill/internal/testutil"
	"github.com/backfill-dev/backfill/pipeline/ooid"
	"github.com/backfill-dev/backfill/pipeline/sink/pgcopy"
)

// large is a corpus whose buckets take a while to COPY, so that faults
// land in the middle of one.
func large(seed uint64) corpus.Config {
	cfg := corpus.DefaultConfig()
	cfg.Seed, cfg.Buckets, cfg.Reports, cfg.MaxMeasurements = seed, 4, 150, 6000
	cfg.Corrupt = map[string]float64{}
	return cfg
}

// copying waits until a backfill session runs a COPY into measurements
// (held: one that waits at a row of hold's) and returns its backend pid.
func copying(t testing.TB, c *pgx.Conn, held bool, done <-chan struct{}, skip ...int32) (int32, bool) {
	t.Helper()
	for {
		var pid int32
		// A session just terminated is still listed for a moment: skip
		// names those.
		err := c.QueryRow(context.Background(), `SELECT pid FROM pg_stat_activity WHERE application_name = 'backfill'
			AND datname = current_database() AND state = 'active' AND query LIKE 'COPY %measurements%'
			AND (NOT $1 OR wait_event_type = 'Lock') AND pid <> ALL($2) LIMIT 1`, held, append([]int32{}, skip...)).Scan(&pid)
		if err == nil {
			return pid, true
		}
		if err != pgx.ErrNoRows {
			t.Error(err)
			return 0, false
		}
		select {
		case <-done:
			return 0, false
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// hold makes the COPY of bucket b (0-based, in name order) of the corpus
// in wait in the middle: it inserts, in a transaction it keeps open, the ID
// of one of the bucket's measurements, so the server makes the COPY wait
// at that row until the transaction ends. release rolls it back. A fault
// then lands in a COPY however fast the load is.
func hold(t testing.TB, dsn, in string, b int) (release func()) {
	t.Helper()
	truth, err := corpus.ReadTruth(in)
	if err != nil {
		t.Fatal(err)
	}
	var buckets []string
	var names []string
	for _, r := range truth {
		if len(buckets) == 0 || buckets[len(buckets)-1] != r.Bucket {
			buckets = append(buckets, r.Bucket)
		}
		if len(buckets) == b+1 && r.Bucket == buckets[b] && r.Textname != "" && r.N > 0 && len(r.Reasons) == 0 {
			names = append(names, r.Textname)
		}
	}
	if len(names) == 0 {
		t.Fatalf("bucket %d of the corpus has no clean report", b)
	}
	id, err := ooid.DefaultScheme.Report(names[len(names)/2])
	if err != nil {
		t.Fatal(err)
	}
	c, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tx, err := c.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO backfill.measurements (ooid, bucket, report, ndx) VALUES ($1, $2, -1, -1)`,
		id.ID(0).Int64(), buckets[b]); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			tx.Rollback(ctx)
			c.Close(ctx)
		})
	}
	t.Cleanup(release)
	return release
}

func committedBuckets(t testing.TB, c *pgx.Conn, schema string) int {
	t.Helper()
	var n int
	if err := c.QueryRow(context.Background(), `SELECT count(*) FROM `+pgx.Identifier{schema, "ledger"}.Sanitize()+` WHERE status = 'committed'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// background is a load in a goroutine of its own; err is set once done
// is closed.
type background struct {
	done chan struct{}
	err  error
}

func (l loader) start(ctx context.Context, in string, buckets ...string) *background {
	bg := &background{done: make(chan struct{})}
	go func() {
		defer close(bg.done)
		_, bg.err = l.run(ctx, in, 2, buckets...)
	}()
	return bg
}

type logBuf struct {
	mu    sync.Mutex
	lines []string
}

func (l *logBuf) log(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *logBuf) count(sub string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.lines {
		if strings.Contains(s, sub) {
			n++
		}
	}
	return n
}

// The server ends the session in the middle of a COPY (twice, in two
// buckets): the bucket rolls back, the run reconnects and retries, and
// the database ends as a clean load leaves it.
func TestFault_TerminateBackend(t *testing.T) {
	t.Parallel()
	in := corpustest.Generate(t, large(21))
	admin := pgtest.AdminURL(t)
	clean := pgtest.CreateDatabase(t, admin)
	loader{t: t, dsn: clean, schema: "backfill", scheme: ooid.DefaultScheme}.load(in)
	want := dumpPostgres(t, clean, "backfill")

	dsn := pgtest.CreateDatabase(t, admin)
	var logs logBuf
	l := loader{t: t, dsn: dsn, schema: "backfill", scheme: ooid.DefaultScheme, opt: func(o *pgcopy.Options) { o.Log = logs.log; o.Retries = 5 }}
	if err := createSchema(dsn, "backfill"); err != nil {
		t.Fatal(err)
	}
	// Buckets 1 and 2 each wait mid-COPY at a row held by another
	// transaction: each is terminated there, then its row let go.
	releases := []func(){hold(t, dsn, in, 1), hold(t, dsn, in, 2)}
	bg := l.start(context.Background(), in)
	watch := pgtest.Connect(t, dsn)
	killed := 0
	var pids []int32
	for _, release := range releases {
		pid, ok := copying(t, watch, true, bg.done, pids...)
		if !ok {
			t.Fatal("the load ended before the fault")
		}
		var terminated bool
		if err := watch.QueryRow(context.Background(), `SELECT pg_terminate_backend($1)`, pid).Scan(&terminated); err != nil {
			t.Fatal(err)
		}
		if terminated {
			killed++
		}
		pids = append(pids, pid)
		release()
	}
	<-bg.done
	if bg.err != nil {
		t.Fatalf("the run did not recover: %v", bg.err)
	}
	if killed != 2 || logs.count("retrying") < killed {
		t.Fatalf("%d sessions terminated, %d retries logged: the fault was not exercised (%v)", killed, logs.count("retrying"), logs.lines)
	}
	sameState(t, "after pg_terminate_backend", want, dumpPostgres(t, dsn, "backfill"))
}

// The server stops in the middle of a load. Without retries the run fails
// cleanly: the committed buckets are whole, the others absent, the failed
// one marked in the ledger; a resume completes to the state of a clean
// load. With retries the run waits for the server to come back and
// completes by itself.
func TestFault_ServerRestart(t *testing.T) {
	t.Parallel()
	in := corpustest.Generate(t, large(22))
	clean := pgtest.NewDatabase(t)
	loader{t: t, dsn: clean, schema: "backfill", scheme: ooid.DefaultScheme}.load(in)
	want := dumpPostgres(t, clean, "backfill")

	srv := pgtest.StartServer(t)
	for _, retries := range []int{0, 10} {
		t.Run(fmt.Sprintf("retries=%d", retries), func(t *testing.T) {
			dsn := pgtest.CreateDatabase(t, srv.URL())
			if err := createSchema(dsn, "backfill"); err != nil {
				t.Fatal(err)
			}
			var logs logBuf
			l := loader{t: t, dsn: dsn, schema: "backfill", scheme: ooid.DefaultScheme, opt: func(o *pgcopy.Options) {
				o.Log, o.Retries, o.RetryWait, o.MaxRetryWait = logs.log, retries, 100*time.Millisecond, time.Second
			}}
			hold(t, dsn, in, 1) // let go when the server stops
			bg := l.start(context.Background(), in)
			watch, err := pgx.Connect(context.Background(), dsn)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := copying(t, watch, true, bg.done); !ok {
				t.Fatal("the load ended before the restart")
			}
			// The other connection commits buckets meanwhile: the stop
			// comes once one has.
			for committedBuckets(t, watch, "backfill") == 0 {
				select {
				case <-bg.done:
					t.Fatalf("the load ended before the restart: %v", bg.err)
				case <-time.After(2 * time.Millisecond):
				}
			}
			watch.Close(context.Background())
			srv.Stop()
			if retries > 0 {
				time.Sleep(500 * time.Millisecond)
				srv.Start()
			}
			<-bg.done
			if retries == 0 {
				if bg.err == nil || !strings.Contains(bg.err.Error(), "giving up after 1 attempts") {
					t.Fatalf("run error %v, want a clean failure", bg.err)
				}
				srv.Start()
				checkWhole(t, dsn, "backfill")
				if _, err := l.run(context.Background(), in, 2); err != nil {
					t.Fatal(err)
				}
			} else if bg.err != nil {
				t.Fatalf("the run did not survive the restart: %v (%v)", bg.err, logs.lines)
			} else if logs.count("retrying") == 0 {
				t.Fatal("no retry logged: the restart was not exercised")
			}
			sameState(t, "after a server restart", want, dumpPostgres(t, dsn, "backfill"))
		})
	}
}

// checkWhole checks that every committed bucket has the rows its ledger
// counts and that no other bucket has any. (A bucket that failed is marked
// in the ledger when the server still answers; here it does not.)
func checkWhole(t testing.TB, dsn, schema string) {
	t.Helper()
	c := pgtest.Connect(t, dsn)
	q := func(table string) string { return pgx.Identifier{schema, table}.Sanitize() }
	bad := rows(t, c, `SELECT coalesce(l.bucket, m.bucket)::text || ' ' || coalesce(l.status, 'none') || ' ' || coalesce(l.measurements, -1) || ' ' || coalesce(m.n, 0)
		FROM (SELECT bucket, status, CASE WHEN status = 'committed' THEN measurements ELSE 0 END AS measurements FROM `+q("ledger")+`) l
		FULL JOIN (SELECT bucket, count(*) AS n FROM `+q("measurements")+` GROUP BY bucket) m ON m.bucket = l.bucket
		WHERE l.bucket IS NULL OR l.measurements <> coalesce(m.n, 0)`)
	if len(bad) > 0 {
		t.Errorf("partial or uncounted buckets (bucket, status, ledger count, rows): %v", bad)
	}
	if n := committedBuckets(t, c, schema); n == 0 || n == 4 {
		t.Errorf("%d buckets committed: the stop did not fall in the middle of the load", n)
	}
}

// Cancelling the run (SIGINT) aborts the COPY in flight: the run returns
// at once with context.Canceled, the server session is not left copying,
// and the committed buckets are whole.
func TestCancel_AbortsCopy(t *testing.T) {
	in := corpustest.Generate(t, large(23))
	dsn := pgtest.NewDatabase(t)
	if err := createSchema(dsn, "backfill"); err != nil {
		t.Fatal(err)
	}
	l := loader{t: t, dsn: dsn, schema: "backfill", scheme: ooid.DefaultScheme}
	ctx, cancel := context.WithCancel(context.Background())
	release := hold(t, dsn, in, 1)
	bg := l.start(ctx, in)
	watch := pgtest.Connect(t, dsn)
	if _, ok := copying(t, watch, true, bg.done); !ok {
		t.Fatal("the load ended before the cancel")
	}
	cancel()
	release() // the server reads on, and finds the COPY aborted
	<-bg.done
	if !errors.Is(bg.err, context.Canceled) {
		t.Fatalf("run error %v, want context.Canceled", bg.err)
	}
	var active int
	testutil.Check(t, watch.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity WHERE application_name = 'backfill' AND datname = current_database()
		AND query LIKE 'COPY%' AND state = 'active'`).Scan(&active))
	if active != 0 {
		t.Errorf("%d backfill sessions still copying", active)
	}
	var partial int
	testutil.Check(t, watch.QueryRow(context.Background(), `SELECT count(*) FROM (SELECT bucket FROM backfill.measurements GROUP BY bucket
		EXCEPT SELECT bucket FROM backfill.ledger WHERE status = 'committed') x`).Scan(&partial))
	if partial != 0 {
		t.Errorf("%d buckets with rows and no ledger entry", partial)
	}
}

// Without retries, a session terminated mid-COPY fails the run with a
// clear message; the bucket is marked failed in the ledger, with the
// error, and has no rows; the buckets committed before are whole.
func TestFault_FailsCleanly(t *testing.T) {
	t.Parallel()
	in := corpustest.Generate(t, large(24))
	dsn := pgtest.NewDatabase(t)
	if err := createSchema(dsn, "backfill"); err != nil {
		t.Fatal(err)
	}
	l := loader{t: t, dsn: dsn, schema: "backfill", scheme: ooid.DefaultScheme, opt: func(o *pgcopy.Options) { o.Retries = 0 }}
	release := hold(t, dsn, in, 1)
	bg := l.start(context.Background(), in)
	watch := pgtest.Connect(t, dsn)
	pid, ok := copying(t, watch, true, bg.done)
	if !ok {
		t.Fatal("the load ended first")
	}
	watch.Exec(context.Background(), `SELECT pg_terminate_backend($1)`, pid)
	release()
	<-bg.done
	if bg.err == nil || !strings.Contains(bg.err.Error(), "giving up after 1 attempts") {
		t.Fatalf("run error %v", bg.err)
	}
	failed := rows(t, watch, `SELECT bucket::text || ' ' || error FROM backfill.ledger WHERE status = 'failed'`)
	// The client learns of the terminated session either from the
	// server's message or, when it is writing then, from the socket.
	lost := func(msg string) bool {
		for _, s := range []string{"terminat", "closed network connection", "connection reset", "broken pipe", "unexpected EOF"} {
			if strings.Contains(msg, s) {
				return true
			}
		}
		return false
	}
	if len(failed) != 1 || !lost(failed[0]) {
		t.Fatalf("failed buckets in the ledger: %v", failed)
	}
	var stray int
	testutil.Check(t, watch.QueryRow(context.Background(), `SELECT count(*) FROM backfill.measurements WHERE bucket = $1::date`, failed[0][:10]).Scan(&stray))
	if stray != 0 {
		t.Errorf("the failed bucket has %d rows", stray)
	}
	checkWhole(t, dsn, "backfill")
}

// A bucket whose lock another run holds is waited for, saying so, or
// skipped with --skip-locked (counted as skipped, left as it is).
func TestLock_WaitOrSkip(t *testing.T) {
	in := corpustest.Generate(t, dirty(25))
	dsn := pgtest.NewDatabase(t)
	if err := createSchema(dsn, "backfill"); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	other := pgtest.Connect(t, dsn)
	tx, err := other.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('backfill bucket backfill'), date '2017-06-02' - date '1970-01-01')`); err != nil {
		t.Fatal(err)
	}

	var logs logBuf
	skip := loader{t: t, dsn: dsn, schema: "backfill", scheme: ooid.DefaultScheme, opt: func(o *pgcopy.Options) { o.Log, o.SkipLocked = logs.log, true }}
	sum := skip.load(in)
	if sum.Skipped != 1 || sum.Buckets != 2 || logs.count("2017-06-02: another run is loading it") != 1 {
		t.Fatalf("skip: %d committed, %d skipped; log %v", sum.Buckets, sum.Skipped, logs.lines)
	}
	if got := rows(t, pgtest.Connect(t, dsn), `SELECT bucket::text FROM backfill.ledger ORDER BY 1`); strings.Join(got, " ") != "2017-06-01 2017-06-03" {
		t.Fatalf("ledger %v", got)
	}

	var wlogs logBuf
	wait := loader{t: t, dsn: dsn, schema: "backfill", scheme: ooid.DefaultScheme, opt: func(o *pgcopy.Options) { o.Log = wlogs.log }}
	bg := wait.start(ctx, in, "2017-06-02")
	for wlogs.count("waiting for it to finish") == 0 {
		select {
		case <-bg.done:
			t.Fatalf("the run did not wait: %v %v", bg.err, wlogs.lines)
		case <-time.After(5 * time.Millisecond):
		}
	}
	tx.Rollback(ctx)
	<-bg.done
	if bg.err != nil {
		t.Fatal(bg.err)
	}
	if n := committedBuckets(t, pgtest.Connect(t, dsn), "backfill"); n != 3 {
		t.Fatalf("%d buckets committed after the wait", n)
	}
}
