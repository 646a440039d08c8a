package pgcopy_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/backfill-dev/backfill/gen/corpus"
	"github.com/backfill-dev/backfill/gen/corpus/corpustest"
	"github.com/backfill-dev/backfill/internal/pgtest"
	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/internal/testutil"
	"github.com/backfill-dev/backfill/pipeline/collisions"
	"github.com/backfill-dev/backfill/pipeline/ingest"
	"github.com/backfill-dev/backfill/pipeline/sink/pgcopy"
)

// Buckets committed side by side, over 1, 2 and 4 connections and by two
// sinks of 3 connections at once, end as the Parquet run's verdicts say:
// which bucket takes the verdict lock first changes nothing. Buckets whose
// rows collide with committed ones are settled under the lock.
func TestLoad_Connections(t *testing.T) {
	skipUnderRace(t)
	cfg := colliding(15)
	cfg.Buckets, cfg.Reports = 8, 90
	in := corpustest.Generate(t, cfg)
	want := dumpParquet(t, parquetRun(t, in, narrow))
	across := 0
	for _, r := range want.reports {
		f := strings.Fields(r)
		if w := f[len(f)-1]; w != "-" && w[:10] != f[1][:10] {
			across++
		}
	}
	if across < 3 {
		t.Fatalf("%d reports lose to a report of another bucket: the corpus does not exercise the verdict lock", across)
	}
	admin := pgtest.AdminURL(t)
	const settled = "under the verdict lock"
	for _, n := range []int{1, 2, 4} {
		dsn := pgtest.CreateDatabase(t, admin)
		var logs logBuf
		l := loader{t: t, dsn: dsn, schema: "backfill", scheme: narrow, opt: func(o *pgcopy.Options) { o.Connections, o.Log = n, logs.log }}
		l.load(in)
		sameState(t, fmt.Sprintf("connections=%d", n), want, dumpPostgres(t, dsn, "backfill"))
		if logs.count(settled) == 0 {
			t.Errorf("connections=%d: no bucket settled under the verdict lock (%v)", n, logs.lines)
		}
	}

	buckets, err := ingest.ListBuckets(t.Context(), store.Local(in))
	if err != nil {
		t.Fatal(err)
	}
	reversed := append([]string(nil), buckets...)
	for i, j := 0, len(reversed)-1; i < j; i, j = i+1, j-1 {
		reversed[i], reversed[j] = reversed[j], reversed[i]
	}
	dsn := pgtest.CreateDatabase(t, admin)
	if err := createSchema(dsn, "backfill"); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 2)
	for _, order := range [][]string{buckets, reversed} {
		l := loader{t: t, dsn: dsn, schema: "backfill", scheme: narrow, opt: func(o *pgcopy.Options) { o.Connections = 3 }}
		go func() {
			_, err := l.run(context.Background(), in, 1, order...)
			errs <- err
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	sameState(t, "two sinks of 3 connections", want, dumpPostgres(t, dsn, "backfill"))
}

// A bucket written ahead of the verdict lock meets an ID that another
// transaction holds and then commits, with a report that sorts first: the
// bucket's rows are undone, and it is settled under the lock, its report
// losing its IDs to the other. When the other transaction rolls back
// instead, the bucket loads as it would alone. When it commits the ID
// alone, with no report holding it, the primary key refuses the bucket's
// row under the lock too: the run fails and the bucket is not committed.
func TestLoad_WriteAheadMeetsTakenID(t *testing.T) {
	cfg := large(24)
	cfg.Buckets = 1
	in := corpustest.Generate(t, cfg)
	truth, err := corpus.ReadTruth(in)
	if err != nil {
		t.Fatal(err)
	}
	var victim corpus.Truth
	for _, r := range truth {
		if r.Textname != "" && r.N > 0 && len(r.Reasons) == 0 {
			victim = r
		}
	}
	id, err := narrow.Report(victim.Textname)
	if err != nil {
		t.Fatal(err)
	}
	// The other report: the victim's IDs, in a bucket of its own, named
	// to sort first.
	other := "2000-01-01/" + victim.Textname[strings.IndexByte(victim.Textname, '/')+1:]
	admin := pgtest.AdminURL(t)
	for _, mode := range []string{"commit", "rollback", "bare"} {
		dsn := pgtest.CreateDatabase(t, admin)
		if err := createSchema(dsn, "backfill"); err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		hc := pgtest.Connect(t, dsn)
		tx, err := hc.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rg := collisions.RangeOf(id, uint32(victim.N))
		stmts := []struct {
			sql  string
			args []any
		}{
			{`INSERT INTO backfill.ledger (bucket, input_fingerprint, counter_bits, sha1_offset, ndx_policy, status, started_at, version)
				VALUES ('2000-01-01', 'test', 20, 33, 'blobs', 'committed', now(), 'test')`, nil},
			{`INSERT INTO backfill.reports (bucket, seq, textname, ts, ts_source, counter_base, n, span, container, "offset", size)
				VALUES ('2000-01-01', 0, $1, $2, 'textname', $3, $4, int4multirange(int4range($3::int, $3::int + $4::int)), 'other', 0, 0)`,
				[]any{other, int64(rg.TS), int32(rg.Base), int32(rg.N)}},
			{`INSERT INTO backfill.measurements (ooid, bucket, report, ndx) VALUES ($1, '2000-01-01', 0, 0)`, []any{id.ID(0).Int64()}},
		}
		if mode == "bare" {
			stmts = stmts[2:]
		}
		for _, q := range stmts {
			if _, err := tx.Exec(ctx, q.sql, q.args...); err != nil {
				t.Fatalf("%s: %v", q.sql, err)
			}
		}
		var logs logBuf
		l := loader{t: t, dsn: dsn, schema: "backfill", scheme: narrow, opt: func(o *pgcopy.Options) { o.Log, o.CreateSchema = logs.log, false }}
		bg := l.start(ctx, in)
		if _, ok := copying(t, pgtest.Connect(t, dsn), true, bg.done); !ok {
			t.Fatal("the load ended before it met the held ID")
		}
		if mode == "rollback" {
			err = tx.Rollback(ctx)
		} else {
			err = tx.Commit(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
		<-bg.done
		if mode == "bare" {
			var committed int
			testutil.Check(t, hc.QueryRow(ctx, `SELECT count(*) FROM backfill.ledger WHERE status = 'committed'`).Scan(&committed))
			if bg.err == nil || !strings.Contains(bg.err.Error(), "duplicate key") || committed != 0 || logs.count("held by another report") != 1 {
				t.Errorf("ID taken with no report: run error %v, %d buckets committed; want a duplicate key error, none (%v)", bg.err, committed, logs.lines)
			}
			continue
		}
		if bg.err != nil {
			t.Fatal(bg.err)
		}
		var rejectedBy string
		var rows int
		if err := hc.QueryRow(ctx, `SELECT coalesce(rejected_by, ''), (SELECT count(*) FROM backfill.measurements m WHERE m.bucket = r.bucket AND m.report = r.seq)
			FROM backfill.reports r WHERE textname = $1`, victim.Textname).Scan(&rejectedBy, &rows); err != nil {
			t.Fatal(err)
		}
		taken := logs.count("held by another report")
		if mode == "commit" && (rejectedBy != other || rows != 0 || taken != 1) {
			t.Errorf("held ID committed: %s rejected by %q with %d rows, %d fallbacks logged; want rejected by %s, no rows, 1 (%v)",
				victim.Textname, rejectedBy, rows, taken, other, logs.lines)
		}
		if mode == "rollback" && (rejectedBy != "" || rows != victim.N || taken != 0) {
			t.Errorf("held ID rolled back: %s rejected by %q with %d rows, %d fallbacks logged; want kept with %d rows, 0 (%v)",
				victim.Textname, rejectedBy, rows, taken, victim.N, logs.lines)
		}
		var bad int
		if err := hc.QueryRow(ctx, `SELECT count(*) FROM backfill.ledger l WHERE l.bucket <> '2000-01-01'
			AND measurements <> (SELECT count(*) FROM backfill.measurements m WHERE m.bucket = l.bucket)`).Scan(&bad); err != nil || bad != 0 {
			t.Errorf("%d ledger rows disagree with the measurements (%v)", bad, err)
		}
	}
}
