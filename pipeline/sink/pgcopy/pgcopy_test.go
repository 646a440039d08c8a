package pgcopy_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/backfill-dev/backfill/gen/corpus"
	"github.com/backfill-dev/backfill/gen/corpus/corpustest"
	"github.com/backfill-dev/backfill/internal/pgnet"
	"github.com/backfill-dev/backfill/internal/pgtest"
	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/internal/testutil"
	"github.com/backfill-dev/backfill/pipeline/ingest"
	"github.com/backfill-dev/backfill/pipeline/job"
	"github.com/backfill-dev/backfill/pipeline/ooid"
	"github.com/backfill-dev/backfill/pipeline/sink"
	"github.com/backfill-dev/backfill/pipeline/sink/parquetfile"
	"github.com/backfill-dev/backfill/pipeline/sink/pgcopy"
	"github.com/backfill-dev/backfill/pipeline/sink/pgcopy/pgschema"
	"github.com/backfill-dev/backfill/pipeline/stamped"
)

const maxBlob = 1 << 20

// dirty is a small corpus with every kind of bad input.
func dirty(seed uint64) corpus.Config {
	cfg := corpus.DefaultConfig()
	cfg.Seed, cfg.Buckets, cfg.Reports, cfg.CanSize, cfg.MaxMeasurements = seed, 3, 150, 64<<10, 3000
	cfg.HugeBlob, cfg.MaxBlob = maxBlob+100, maxBlob
	cfg.Corrupt = map[string]float64{}
	for _, k := range corpus.ReportKinds {
		cfg.Corrupt[k] = 0.03
	}
	for _, k := range corpus.ContainerKinds {
		cfg.Corrupt[k] = 0.12
	}
	return cfg
}

// colliding is a corpus whose reports collide often under narrow, within
// buckets and across them.
func colliding(seed uint64) corpus.Config {
	cfg := corpus.DefaultConfig()
	// Twice the reports on each of three timestamps (one shared with the
	// next bucket), of a few hundred measurements each, from the small real
	// samples: with 20-bit counters, about as many colliding pairs as 90
	// reports of up to 5,000, in half the rows and a tenth of the bytes.
	cfg.Seed, cfg.Buckets, cfg.Reports, cfg.CanSize = seed, 4, 180, 256<<10
	cfg.MinMeasurements, cfg.MaxMeasurements, cfg.TimeSlots, cfg.MaxTemplate = 100, 1000, 3, 1024
	cfg.Corrupt = map[string]float64{}
	return cfg
}

var narrow = ooid.Scheme{CounterBits: 20, SHA1Offset: 33}

// skipUnderRace skips the tests that load the colliding corpus many
// times: their Go side is the writer goroutine alone (the concurrency they
// test is between server sessions), the fault and cancel tests race the
// sink's two connections, and raced they would take many minutes.
func skipUnderRace(t *testing.T) {
	testutil.SkipUnderRace(t, "many loads of a colliding corpus, single-goroutine on the Go side")
}

type loader struct {
	t      testing.TB
	dsn    string
	schema string
	scheme ooid.Scheme
	opt    func(*pgcopy.Options)
}

func (l loader) options() pgcopy.Options {
	o := pgcopy.Options{DSN: l.dsn, Schema: l.schema, CreateSchema: true, Retries: 3, RetryWait: 20e6}
	if l.opt != nil {
		l.opt(&o)
	}
	return o
}

func (l loader) run(ctx context.Context, in string, workers int, buckets ...string) (job.Summary, error) {
	l.t.Helper()
	s, err := pgcopy.Open(ctx, l.options())
	if err != nil {
		return job.Summary{}, err
	}
	defer s.Close()
	return job.Run(ctx, job.Config{In: store.Local(in), Buckets: buckets, Workers: workers, Scheme: l.scheme, MaxBlob: maxBlob, Version: "test"}, s)
}

func (l loader) load(in string, buckets ...string) job.Summary {
	l.t.Helper()
	sum, err := l.run(context.Background(), in, 2, buckets...)
	if err != nil {
		l.t.Fatal(err)
	}
	return sum
}

func parquetRun(t testing.TB, in string, scheme ooid.Scheme) string {
	t.Helper()
	out := t.TempDir()
	s, err := parquetfile.Open(t.Context(), store.Local(out))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := job.Run(context.Background(), job.Config{In: store.Local(in), Workers: 2, Scheme: scheme, MaxBlob: maxBlob, Version: "test"}, s); err != nil {
		t.Fatal(err)
	}
	return out
}

// state is the content of a sink's output as comparable lines, in the
// order the output holds it.
type state struct {
	measurements, reports, dead, ledger []string
}

func countsLine(bucket string, reports, measurements int64, dead, rejects map[string]int64, in, out int64) string {
	list := func(m map[string]int64) string {
		keys := make([]string, 0, len(m))
		for k, v := range m {
			if v != 0 {
				keys = append(keys, fmt.Sprintf("%s=%d", k, v))
			}
		}
		sort.Strings(keys)
		return strings.Join(keys, ",")
	}
	return fmt.Sprintf("%s reports=%d measurements=%d dead=%s rejects=%s in=%d out=%d", bucket, reports, measurements, list(dead), list(rejects), in, out)
}

func rows(t testing.TB, c *pgx.Conn, sql string) []string {
	t.Helper()
	rs, err := c.Query(context.Background(), sql)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	out, err := pgx.CollectRows(rs, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return out
}

// dumpPostgres reads every table of schema, in the order of the Parquet
// output; it also checks that the view lists the same measurements.
func dumpPostgres(t testing.TB, dsn, schema string) state {
	t.Helper()
	c := pgtest.Connect(t, dsn)
	q := func(table string) string { return pgx.Identifier{schema, table}.Sanitize() }
	var st state
	st.measurements = rows(t, c, `SELECT concat_ws(' ', m.bucket, r.textname, m.ndx, lpad(to_hex(m.ooid), 16, '0'))
		FROM `+q("measurements")+` m JOIN `+q("reports")+` r ON r.bucket = m.bucket AND r.seq = m.report ORDER BY m.bucket, m.report, m.ndx`)
	view := rows(t, c, `SELECT concat_ws(' ', bucket_date, textname, ndx, lpad(to_hex(ooid), 16, '0')) FROM `+q("measurement_ids")+
		` ORDER BY bucket_date, textname COLLATE "C", ndx`)
	sorted := append([]string(nil), st.measurements...)
	sort.Strings(sorted)
	sort.Strings(view)
	if strings.Join(sorted, "\n") != strings.Join(view, "\n") {
		t.Errorf("the view measurement_ids lists %d rows, the tables %d, not the same", len(view), len(sorted))
	}
	st.reports = rows(t, c, `SELECT concat_ws(' ', bucket, textname, ts, ts_source, counter_base, n, container, "offset", size,
		coalesce(encode(sha1, 'hex'), '-'), coalesce(rejected_by, '-')) FROM `+q("reports")+` ORDER BY bucket, seq`)
	st.dead = rows(t, c, `SELECT concat_ws(' | ', bucket, file, textname, "offset", reason, kind, message) FROM `+q("dead_letters")+
		` ORDER BY bucket, seq NULLS LAST, textname COLLATE "C"`)
	lr, err := c.Query(context.Background(), `SELECT bucket::text, reports, measurements, dead_letters_by_reason, rejects_by_reason,
		bytes_in, bytes_out, dead_letters, rejects, notices, status
		FROM `+q("ledger")+` ORDER BY bucket`)
	if err != nil {
		t.Fatal(err)
	}
	for lr.Next() {
		var b, status string
		var r, m, in, out, total, rejects, notices int64
		var dead, rej map[string]int64
		if err := lr.Scan(&b, &r, &m, &dead, &rej, &in, &out, &total, &rejects, &notices, &status); err != nil {
			t.Fatal(err)
		}
		var sum, rsum int64
		for _, v := range dead {
			sum += v
		}
		for _, v := range rej {
			rsum += v
		}
		if sum != total || rsum != rejects || rejects+notices != total || status != "committed" {
			t.Errorf("ledger %s: %d dead letters (%d rejects, %d notices), by reason %v, rejects by reason %v; status %s", b, total, rejects, notices, dead, rej, status)
		}
		st.ledger = append(st.ledger, countsLine(b, r, m, dead, rej, in, out))
	}
	return st
}

func dumpParquet(t testing.TB, out string) state {
	t.Helper()
	var st state
	ledgers, _ := filepath.Glob(filepath.Join(out, "ledger", "*.json"))
	ps, err := parquetfile.Open(t.Context(), store.Local(out))
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close()
	for _, lf := range ledgers {
		b := strings.TrimSuffix(filepath.Base(lf), ".json")
		l, err := ps.ReadLedger(t.Context(), b)
		if err != nil {
			t.Fatal(err)
		}
		st.ledger = append(st.ledger, countsLine(b, l.Counts.Reports, l.Counts.Measurements, l.Counts.DeadLetters, l.Counts.Rejects, l.Counts.BytesIn, l.Counts.BytesOut))
		ms, err := parquetfile.ReadMeasurements(t.Context(), store.Local(out), "measurements/"+b+".parquet")
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			st.measurements = append(st.measurements, fmt.Sprintf("%s %s %d %016x", b, m.Textname, m.Ndx, uint64(m.OOID)))
		}
		rs, err := parquetfile.ReadReports(t.Context(), store.Local(out), "reports/"+b+".parquet")
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			sha, rej := r.SHA1, r.RejectedBy
			if sha == "" {
				sha = "-"
			}
			if rej == "" {
				rej = "-"
			}
			st.reports = append(st.reports, fmt.Sprintf("%s %s %d %s %d %d %s %d %d %s %s", b, r.Textname, r.TS, r.TSSource, r.CounterBase, r.N,
				r.Container, r.Offset, r.Size, sha, rej))
		}
		ds, err := parquetfile.ReadDeadLetters(t.Context(), store.Local(out), "dead-letters/"+b+".jsonl")
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			st.dead = append(st.dead, strings.Join([]string{b, d.File, d.Textname, fmt.Sprint(d.Offset), d.Reason, d.Kind, d.Message}, " | "))
		}
	}
	return st
}

func sameState(t testing.TB, what string, want, got state) {
	t.Helper()
	for _, p := range []struct {
		name   string
		ws, gs []string
	}{{"measurements", want.measurements, got.measurements}, {"reports", want.reports, got.reports}, {"dead letters", want.dead, got.dead}, {"ledger", want.ledger, got.ledger}} {
		if len(p.ws) != len(p.gs) {
			t.Errorf("%s: %d %s, want %d", what, len(p.gs), p.name, len(p.ws))
			continue
		}
		for i := range p.ws {
			if p.ws[i] != p.gs[i] {
				t.Errorf("%s: %s row %d:\n got %s\nwant %s", what, p.name, i, p.gs[i], p.ws[i])
				break
			}
		}
	}
}

// A generated corpus loaded into Postgres equals its ground truth (every
// OOID as pipeline/ooid computes it, once; every dead letter) and the
// Parquet output of the same run, row for row.
func TestLoad_GroundTruthAndParquet(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	in := corpustest.Generate(t, dirty(5))
	l := loader{t: t, dsn: dsn, schema: "backfill", scheme: ooid.DefaultScheme}
	sum := l.load(in)
	st := dumpPostgres(t, dsn, "backfill")
	sameState(t, "postgres vs parquet", dumpParquet(t, parquetRun(t, in, ooid.DefaultScheme)), st)

	truth, err := corpus.ReadTruth(in)
	if err != nil {
		t.Fatal(err)
	}
	wantN := map[string]int{}
	wantReasons := map[string][]string{}
	var wantMeas, wantDead int64
	for _, tr := range truth {
		if tr.Textname != "" {
			wantN[tr.Textname] += tr.N
			wantMeas += int64(tr.N)
		}
		k := tr.File + " " + tr.Textname
		wantReasons[k] = append(wantReasons[k], tr.Reasons...)
		wantDead += int64(len(tr.Reasons))
	}
	c := pgtest.Connect(t, dsn)
	ids, err := c.Query(context.Background(), `SELECT ooid, textname, ndx, bucket_date::text FROM backfill.measurement_ids`)
	if err != nil {
		t.Fatal(err)
	}
	gotN := map[string]int{}
	seen := map[int64]bool{}
	reports := map[string]ooid.ReportIDs{}
	for ids.Next() {
		var id int64
		var name, bucket string
		var ndx int32
		if err := ids.Scan(&id, &name, &ndx, &bucket); err != nil {
			t.Fatal(err)
		}
		if seen[id] {
			t.Fatalf("ooid %016x twice", uint64(id))
		}
		seen[id] = true
		gotN[name]++
		r, ok := reports[name]
		if !ok {
			if r, err = ooid.DefaultScheme.Report(name); err != nil {
				t.Fatal(err)
			}
			reports[name] = r
		}
		if want := r.ID(uint32(ndx)).Int64(); id != want || bucket != name[:10] {
			t.Fatalf("%s #%d in %s: ooid %016x, want %016x", name, ndx, bucket, uint64(id), uint64(want))
		}
	}
	for name, n := range wantN {
		if gotN[name] != n {
			t.Errorf("%s: %d measurements, truth %d", name, gotN[name], n)
		}
	}
	if int64(len(seen)) != wantMeas || sum.Measurements != wantMeas {
		t.Errorf("%d rows, summary %d, truth %d", len(seen), sum.Measurements, wantMeas)
	}
	gotReasons := map[string][]string{}
	for _, d := range rows(t, c, `SELECT concat_ws(' ', file, textname, reason) FROM backfill.dead_letters`) {
		i := strings.LastIndexByte(d, ' ')
		gotReasons[d[:i]] = append(gotReasons[d[:i]], d[i+1:])
	}
	for k, want := range wantReasons {
		got := gotReasons[k]
		sort.Strings(got)
		sort.Strings(want)
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s: dead letters %v, truth %v", k, got, want)
		}
	}
	if sum.DeadLetters != wantDead || wantDead == 0 {
		t.Errorf("summary %d dead letters, truth %d", sum.DeadLetters, wantDead)
	}
}

// Loading the same buckets twice, in another order, one at a time, or
// from two sinks at once gives the same database; with colliding reports,
// it equals the Parquet output, whose verdicts are held to brute force.
func TestLoad_OrderAndConcurrency(t *testing.T) {
	skipUnderRace(t)
	in := corpustest.Generate(t, colliding(12))
	want := dumpParquet(t, parquetRun(t, in, narrow))
	rejected := 0
	for _, r := range want.reports {
		if !strings.HasSuffix(r, " -") {
			rejected++
		}
	}
	if rejected < 5 {
		t.Fatalf("only %d rejected reports: the corpus does not exercise the collision policy", rejected)
	}
	buckets, err := ingest.ListBuckets(t.Context(), store.Local(in))
	if err != nil {
		t.Fatal(err)
	}
	admin := pgtest.AdminURL(t)
	for _, v := range []struct {
		name string
		runs [][]string
	}{
		{"all at once, then all again", [][]string{nil, nil}},
		{"one at a time, newest first", [][]string{{buckets[3]}, {buckets[2]}, {buckets[1]}, {buckets[0]}}},
		{"interleaved, then parts again", [][]string{{buckets[1], buckets[3]}, {buckets[0]}, {buckets[2]}, {buckets[3]}, {buckets[0], buckets[1]}}},
	} {
		dsn := pgtest.CreateDatabase(t, admin)
		l := loader{t: t, dsn: dsn, schema: "backfill", scheme: narrow}
		for _, bs := range v.runs {
			l.load(in, bs...)
		}
		sameState(t, v.name, want, dumpPostgres(t, dsn, "backfill"))
	}

	// Two sinks at once, each over every bucket in its own order: the
	// bucket locks and the verdict lock keep them apart.
	dsn := pgtest.CreateDatabase(t, admin)
	l := loader{t: t, dsn: dsn, schema: "backfill", scheme: narrow}
	l.load(in, buckets[0]) // the schema exists before both start
	errs := make(chan error, 2)
	for _, order := range [][]string{{buckets[3], buckets[1], buckets[2]}, {buckets[2], buckets[1], buckets[0], buckets[3]}} {
		go func() {
			var err error
			for _, b := range order {
				if _, err = l.run(context.Background(), in, 1, b); err != nil {
					break
				}
			}
			errs <- err
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	sameState(t, "two sinks at once", want, dumpPostgres(t, dsn, "backfill"))
}

// The bulk load (no indexes until the end) ends in the state of the
// per-bucket path.
func TestLoad_BulkSameEndState(t *testing.T) {
	skipUnderRace(t)
	in := corpustest.Generate(t, colliding(13))
	want := dumpParquet(t, parquetRun(t, in, narrow))
	dsn := pgtest.NewDatabase(t)
	l := loader{t: t, dsn: dsn, schema: "bulk", scheme: narrow}
	opt := l.options()
	bs, err := pgcopy.OpenBulk(context.Background(), opt)
	if err != nil {
		t.Fatal(err)
	}
	buckets, _ := ingest.ListBuckets(t.Context(), store.Local(in))
	if _, err := job.Run(context.Background(), job.Config{In: store.Local(in), Buckets: buckets[:2], Workers: 2, Scheme: narrow, MaxBlob: maxBlob, Version: "test"}, bs); err != nil {
		t.Fatal(err)
	}
	bs.Close()
	// Interrupted before its indexes: a second bulk run resumes it.
	if bs, err = pgcopy.OpenBulk(context.Background(), opt); err != nil {
		t.Fatal(err)
	}
	defer bs.Close()
	if _, err := job.Run(context.Background(), job.Config{In: store.Local(in), Workers: 2, Scheme: narrow, MaxBlob: maxBlob, Version: "test", Resume: true}, bs); err != nil {
		t.Fatal(err)
	}
	if err := bs.Finish(context.Background()); err != nil {
		t.Fatal(err)
	}
	sameState(t, "bulk", want, dumpPostgres(t, dsn, "bulk"))
	// The indexes and constraints are those of the per-bucket path.
	c := pgtest.Connect(t, dsn)
	// The statistics the tool's statements are planned with are there;
	// the reports' texts are left to autovacuum's full ANALYZE.
	analyzed := strings.Join(rows(t, c, `SELECT tablename || '.' || attname FROM pg_stats
		WHERE schemaname = 'bulk' AND tablename IN ('measurements', 'reports') ORDER BY 1`), " ")
	if want := "measurements.bucket measurements.ndx measurements.ooid measurements.report " +
		"reports.bucket reports.n reports.rejected_by reports.seq reports.ts"; analyzed != want {
		t.Errorf("columns analyzed after the bulk load: %s, want %s", analyzed, want)
	}
	idx := func(schema string) string {
		return strings.Join(rows(t, c, `SELECT replace(indexdef, `+"'"+schema+".'"+`, '') FROM pg_indexes WHERE schemaname = '`+schema+`' ORDER BY indexname`), "\n")
	}
	l2 := loader{t: t, dsn: dsn, schema: "perbucket", scheme: narrow}
	l2.load(in, buckets[0])
	if a, b := idx("bulk"), idx("perbucket"); a != b {
		t.Errorf("bulk indexes:\n%s\nper-bucket indexes:\n%s", a, b)
	}
	// A bulk load refuses a schema that holds indexed buckets.
	if _, err := pgcopy.OpenBulk(context.Background(), l2.options()); err == nil || !strings.Contains(err.Error(), "empty schema") {
		t.Errorf("bulk load into a loaded schema: %v", err)
	}
	// Into an empty schema made beforehand (backfill schema, then run
	// --bulk): the measurements' key is dropped for the load too, and
	// built at the end like the others.
	if err := pgschema.Create(t.Context(), c, "made"); err != nil {
		t.Fatal(err)
	}
	l3 := loader{t: t, dsn: dsn, schema: "made", scheme: narrow}
	bs3, err := pgcopy.OpenBulk(context.Background(), l3.options())
	if err != nil {
		t.Fatal(err)
	}
	defer bs3.Close()
	if got := idx("made"); strings.Contains(got, "measurements_pkey") {
		t.Errorf("a bulk load keeps the measurements' key up:\n%s", got)
	}
	if _, err := job.Run(context.Background(), job.Config{In: store.Local(in), Workers: 2, Scheme: narrow, MaxBlob: maxBlob, Version: "test"}, bs3); err != nil {
		t.Fatal(err)
	}
	if err := bs3.Finish(context.Background()); err != nil {
		t.Fatal(err)
	}
	sameState(t, "bulk into a schema made beforehand", want, dumpPostgres(t, dsn, "made"))
	if a, b := idx("made"), idx("perbucket"); a != b {
		t.Errorf("bulk indexes (schema made beforehand):\n%s\nper-bucket indexes:\n%s", a, b)
	}
}

// Two colliding reports in different buckets, loaded in either order: the
// textname that sorts first keeps its IDs, and the other bucket is
// rewritten in the same transaction when it loses.
func TestLoad_CrossBucketCollisionEitherOrder(t *testing.T) {
	skipUnderRace(t)
	in := corpustest.Generate(t, colliding(14))
	want := dumpParquet(t, parquetRun(t, in, narrow))
	var pairs [][2]string // loser, winner, in different buckets
	for _, r := range want.reports {
		f := strings.Fields(r)
		if w := f[len(f)-1]; w != "-" && w[:10] != f[1][:10] {
			pairs = append(pairs, [2]string{f[1], w})
		}
	}
	if len(pairs) == 0 {
		t.Fatal("no collision across buckets in the corpus")
	}
	loser, winner := pairs[0][0], pairs[0][1]
	admin := pgtest.AdminURL(t)
	for _, order := range [][]string{{winner[:10], loser[:10]}, {loser[:10], winner[:10]}} {
		dsn := pgtest.CreateDatabase(t, admin)
		l := loader{t: t, dsn: dsn, schema: "backfill", scheme: narrow}
		withdraws := order[0] == loser[:10]
		if withdraws {
			// Forbidden, the bucket that would take the loser's IDs back
			// is refused and nothing changes.
			l.load(in, order[0])
			forbid := l
			forbid.opt = func(o *pgcopy.Options) { o.NoWithdraw = true }
			_, err := forbid.run(context.Background(), in, 2, order[1])
			var we *sink.WithdrawError
			if !errors.As(err, &we) || !slices.ContainsFunc(we.Withdrawals, func(w sink.Withdrawal) bool { return w.Textname == loser }) {
				t.Fatalf("--no-withdraw: %v, want the refusal to withdraw %s", err, loser)
			}
			var kept bool
			testutil.Check(t, pgtest.Connect(t, dsn).QueryRow(context.Background(), `SELECT rejected_by IS NULL FROM backfill.reports WHERE textname = $1`, loser).Scan(&kept))
			if !kept {
				t.Errorf("--no-withdraw: %s lost its IDs", loser)
			}
			order = order[1:]
		}
		for _, b := range order {
			sum := l.load(in, b)
			if !withdraws {
				continue
			}
			named := slices.ContainsFunc(sum.Withdrawn, func(w sink.Withdrawal) bool { return w.Textname == loser && w.Winner == winner })
			if !named || sum.Rejects < int64(len(sum.Withdrawn)) {
				t.Errorf("the load that takes %s's IDs back: withdrawn %+v, rejects %d", loser, sum.Withdrawn, sum.Rejects)
			}
		}
		c := pgtest.Connect(t, dsn)
		var rejectedBy string
		var rows int
		if err := c.QueryRow(context.Background(), `SELECT coalesce(rejected_by, ''), (SELECT count(*) FROM backfill.measurement_ids m WHERE m.textname = r.textname)
			FROM backfill.reports r WHERE textname = $1`, loser).Scan(&rejectedBy, &rows); err != nil {
			t.Fatal(err)
		}
		if rejectedBy != winner || rows != 0 {
			t.Errorf("order %v: %s rejected by %q with %d rows; want rejected by %s, no rows", order, loser, rejectedBy, rows, winner)
		}
		var dl int
		testutil.Check(t, c.QueryRow(context.Background(), `SELECT count(*) FROM backfill.dead_letters WHERE textname = $1 AND reason = 'collision' AND message LIKE '%' || $2 || '%'`,
			loser, winner).Scan(&dl))
		if dl != 1 {
			t.Errorf("order %v: %d collision dead letters of %s naming %s", order, dl, loser, winner)
		}
	}
}

// The database itself refuses two measurements with one ID (the primary
// key), and the collision lookups need no extension: reports sharing a
// timestamp are found with a btree. A schema made with the GiST index and
// exclusion constraint of earlier versions loses both when upgraded.
func TestSchema_RefusesDuplicateID(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	c := pgtest.Connect(t, dsn)
	ctx := context.Background()
	if _, err := c.Exec(ctx, `CREATE EXTENSION btree_gist; CREATE SCHEMA backfill;
		CREATE TABLE backfill.reports (bucket date NOT NULL, seq integer NOT NULL, textname text NOT NULL, ts bigint NOT NULL,
			ts_source text NOT NULL, counter_base integer NOT NULL, n integer NOT NULL, span int4multirange NOT NULL,
			container text NOT NULL, "offset" bigint NOT NULL, size bigint NOT NULL, sha1 bytea, rejected_by text);
		ALTER TABLE backfill.reports ADD CONSTRAINT reports_kept_ids_disjoint
			EXCLUDE USING gist (ts WITH =, span WITH &&) WHERE (rejected_by IS NULL);
		CREATE INDEX reports_ids ON backfill.reports USING gist (ts, span)`); err != nil {
		t.Fatal(err)
	}
	if err := createSchema(dsn, "backfill"); err != nil {
		t.Fatal(err)
	}
	var indexes []string
	rows, err := c.Query(ctx, `SELECT indexname || ': ' || indexdef FROM pg_indexes WHERE schemaname = 'backfill' AND tablename = 'reports' ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		testutil.Check(t, rows.Scan(&s))
		indexes = append(indexes, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(indexes, "\n")
	if len(indexes) != 3 || !strings.Contains(got, "reports_pkey") || !strings.Contains(got, "reports_ts: CREATE INDEX reports_ts ON backfill.reports USING btree (ts)") ||
		!strings.Contains(got, "reports_winner_bucket") || strings.Contains(got, "gist") {
		t.Errorf("indexes of reports after the upgrade:\n%s", got)
	}
	if _, err := c.Exec(ctx, `INSERT INTO backfill.measurements VALUES (1, '2020-01-01', 0, 0), (1, '2020-01-02', 1, 0)`); err == nil ||
		!strings.Contains(err.Error(), "measurements_pkey") {
		t.Errorf("two rows with one ooid: %v", err)
	}
}

func createSchema(dsn, schema string) error {
	s, err := pgcopy.Open(context.Background(), pgcopy.Options{DSN: dsn, Schema: schema, CreateSchema: true})
	if err != nil {
		return err
	}
	return s.Close()
}

// A textname with a 2039 timestamp (ts >= 2^31) round-trips through the
// bigint column as a negative number, and the view gives the same bits.
func TestLoad_2039Negative(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	ctx := context.Background()
	s, err := pgcopy.Open(ctx, pgcopy.Options{DSN: dsn, CreateSchema: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	name := "2039-06-01/20390601T120000Z-US-AS7922-web_connectivity-no_report_id-0.2.0-probe.json"
	id, err := ooid.DefaultScheme.Report(name)
	if err != nil {
		t.Fatal(err)
	}
	if id.TS < 1<<31 {
		t.Fatalf("ts %d is below 2^31", id.TS)
	}
	m := stamped.Meta{Bucket: "2039-06-01", Fingerprint: "f", Scheme: ooid.DefaultScheme, NdxPolicy: "blobs", Version: "test"}
	w, err := s.Begin(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	testutil.Check(t, w.Report(&stamped.Report{Textname: name, Container: "c.tar.lz4", ID: id, N: 3}))
	if _, err := w.Commit(ctx, stamped.Counts{Reports: 1, Measurements: 3}); err != nil {
		t.Fatal(err)
	}
	c := pgtest.Connect(t, dsn)
	got := rows(t, c, `SELECT ooid::text FROM backfill.measurement_ids ORDER BY ndx`)
	for ndx, g := range got {
		want := id.ID(uint32(ndx))
		if g != fmt.Sprint(want.Int64()) || want.Int64() >= 0 {
			t.Errorf("ndx %d: %s in Postgres, want %d (%s)", ndx, g, want.Int64(), want)
		}
	}
	if len(got) != 3 {
		t.Errorf("%d rows", len(got))
	}
	var hexID string
	testutil.Check(t, c.QueryRow(ctx, `SELECT lpad(to_hex(ooid), 16, '0') FROM backfill.measurement_ids WHERE ndx = 2`).Scan(&hexID))
	if hexID != id.ID(2).String() {
		t.Errorf("to_hex gives %s, want %s", hexID, id.ID(2))
	}
}

// A hostile --pg-schema is a name like any other: it cannot run SQL of
// its own, and the password of the DSN appears in no error.
func TestSchema_HostileNameAndPassword(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	c := pgtest.Connect(t, dsn)
	ctx := context.Background()
	if _, err := c.Exec(ctx, `CREATE TABLE canary (x int)`); err != nil {
		t.Fatal(err)
	}
	hostile := `x"; DROP TABLE public.canary; --`
	in := corpustest.Generate(t, dirty(6))
	l := loader{t: t, dsn: dsn, schema: hostile, scheme: ooid.DefaultScheme}
	l.load(in)
	var n int
	if err := c.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{hostile, "measurement_ids"}.Sanitize()).Scan(&n); err != nil || n == 0 {
		t.Errorf("the schema %q: %d rows, %v", hostile, n, err)
	}
	if err := c.QueryRow(ctx, `SELECT count(*) FROM public.canary`).Scan(&n); err != nil {
		t.Errorf("the canary table is gone: %v", err)
	}
	if _, err := pgcopy.Open(ctx, pgcopy.Options{Schema: strings.Repeat("s", 64), DSN: dsn}); err == nil {
		t.Error("a 64-byte schema name was taken (Postgres would truncate it)")
	}

	const secret = "Sup3r-s3cret-PW"
	for _, bad := range []string{
		"postgres://postgres:" + secret + "@127.0.0.1:1/nowhere?sslmode=disable&connect_timeout=2", // nothing listens
		"postgres://postgres:" + secret + "@127.0.0.1:5432/nowhere%zz",                             // does not parse
		"host=127.0.0.1 port=1 user=postgres password=" + secret + " connect_timeout=2",
	} {
		_, err := pgcopy.Open(ctx, pgcopy.Options{DSN: bad, Retries: 0})
		if err == nil {
			t.Errorf("%s: no error", pgnet.Redact(bad, bad))
			continue
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("the password is in the error: %v", err)
		}
	}
}

// Open without the schema says how to make it.
func TestOpen_MissingSchema(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	_, err := pgcopy.Open(context.Background(), pgcopy.Options{DSN: dsn})
	if err == nil || !strings.Contains(err.Error(), "backfill schema") {
		t.Fatalf("got %v", err)
	}
}
