package load_test

import (
	"context"
	"fmt"
	"sort"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/backfill-dev/backfill/internal/pgtest"
	"github.com/backfill-dev/backfill/internal/testutil"
	"github.com/backfill-dev/backfill/pipeline/deadletter"
	"github.com/backfill-dev/backfill/pipeline/load"
	"github.com/backfill-dev/backfill/pipeline/ooid"
	"github.com/backfill-dev/backfill/pipeline/sink"
	"github.com/backfill-dev/backfill/pipeline/sink/pgcopy"
	"github.com/backfill-dev/backfill/pipeline/sink/sinktest"
	"github.com/backfill-dev/backfill/pipeline/stamped"
)

// The Settler tests run one table of cases through both Settlers, the
// in-memory one (over sinktest) and the one in the sink (pgcopy's
// transaction), and hold both to a brute-force reading of the policy over
// the reports the output ends with: a report is rejected exactly when a
// report it shares an ID with sorts first, and its winner is the first of
// those.

var scheme = ooid.Scheme{CounterBits: 20, SHA1Offset: 33}

const n = 3000 // measurements per report: ranges of 3000 in 2^20 counters

// report is a report of the cases: its textname.
type report struct {
	bucket, textname string
}

// collide reports whether two textnames' ranges of n counters overlap:
// brute force over the counters.
func collide(a, b string) bool {
	ia, _ := scheme.Report(a)
	ib, _ := scheme.Report(b)
	if ia.TS != ib.TS {
		return false
	}
	seen := map[ooid.ID]bool{}
	for i := range uint32(n) {
		seen[ia.ID(i)] = true
	}
	for i := range uint32(n) {
		if seen[ib.ID(i)] {
			return true
		}
	}
	return false
}

// names finds textnames on one timestamp of 2017-06-01, in sorting
// order, such that name i and name j collide exactly when want(i, j): a
// search over report ids, deterministic.
func names(t *testing.T, k int, want func(i, j int) bool) []string {
	return namesOn(t, "01", k, want)
}

// namesOn is names on a timestamp of day (two digits) of June 2017.
func namesOn(t *testing.T, day string, k int, want func(i, j int) bool) []string {
	t.Helper()
	var cands []string
	for i := 0; len(cands) < 4000; i++ {
		cands = append(cands, fmt.Sprintf("2017-06-%s/201706%sT101010Z-IT-AS3269-web_connectivity-201706%sT101011Z_AS3269_%08d-0.2.0-probe.json", day, day, day, i))
	}
	var pick []string
	var search func(from int) bool
	search = func(from int) bool {
		if len(pick) == k {
			return true
		}
		for c := from; c < len(cands) && c < from+2000; c++ {
			ok := true
			for i, p := range pick {
				if collide(p, cands[c]) != want(i, len(pick)) {
					ok = false
					break
				}
			}
			if ok {
				pick = append(pick, cands[c])
				if search(c + 1) {
					return true
				}
				pick = pick[:len(pick)-1]
			}
		}
		return false
	}
	if !search(0) {
		t.Fatalf("no %d textnames with the wanted collisions", k)
	}
	return pick
}

// A run commits buckets, each with its reports (textnames).
type run map[string][]string

type settleCase struct {
	name string
	runs []run
}

func cases(t *testing.T) []settleCase {
	// A < B < C: A and B collide, B and C collide, A and C do not.
	chain := names(t, 3, func(i, j int) bool { return j-i == 1 })
	a, b, c := chain[0], chain[1], chain[2]
	// Four that all collide.
	all := names(t, 4, func(i, j int) bool { return true })
	// Two pairs that collide, each on a day of its own.
	pair := func(i, j int) bool { return true }
	one, two := names(t, 2, pair), namesOn(t, "02", 2, pair)
	return []settleCase{
		{"chain in one bucket", []run{{"2017-06-01": {c, a, b}}}},
		{"chain across buckets, in order", []run{{"2017-06-01": {a}, "2017-06-02": {b}, "2017-06-03": {c}}}},
		{"chain across runs, newest first (rewrites)", []run{{"2017-06-03": {c}}, {"2017-06-02": {b}}, {"2017-06-01": {a}}}},
		{"chain across runs, oldest first", []run{{"2017-06-01": {a}}, {"2017-06-02": {b}}, {"2017-06-03": {c}}}},
		{"the winner's bucket is loaded again without it", []run{{"2017-06-01": {a}, "2017-06-02": {b}}, {"2017-06-01": {}}}},
		{"the winner moves to another bucket", []run{{"2017-06-02": {b, c}}, {"2017-06-03": {a}}, {"2017-06-03": {}, "2017-06-01": {a}}}},
		{"four on one timestamp, two runs", []run{{"2017-06-02": {all[3], all[1]}}, {"2017-06-01": {all[2], all[0]}}}},
		{"a bucket loaded twice", []run{{"2017-06-01": {b, a}}, {"2017-06-01": {b, a}}}},
		// A committed bucket on two days, reached on one of them by a
		// later run: its report of the other day keeps its verdict,
		// which a bucket the run does not reach decides.
		{"a bucket reached on one of its days", []run{{"2017-06-01": {one[0]}, "2017-06-02": {one[1], two[1]}}, {"2017-06-03": {two[0]}}}},
		{"a bucket reached on one of its days, then the other", []run{{"2017-06-02": {one[1], two[1]}}, {"2017-06-03": {two[0]}}, {"2017-06-01": {one[0]}}}},
		{"a bucket rewritten without its winner's day", []run{{"2017-06-01": {one[0], two[0]}, "2017-06-02": {one[1], two[1]}}, {"2017-06-01": {two[0]}}}},
	}
}

// bucketOf builds a stamped bucket of textnames.
func bucketOf(name string, textnames []string) *stamped.Bucket {
	b := &stamped.Bucket{Meta: stamped.Meta{Bucket: name, Fingerprint: fmt.Sprint(textnames), Scheme: scheme, NdxPolicy: "blobs", Version: "test"}}
	for i, tn := range textnames {
		id, err := scheme.Report(tn)
		if err != nil {
			panic(err)
		}
		b.Reports = append(b.Reports, stamped.Report{Textname: tn, Container: name + "/web_connectivity.0.tar.lz4", Offset: int64(i), ID: id, N: n})
	}
	return b
}

// apply commits the runs of c through a Loader of s, one Loader a run.
func apply(t *testing.T, s sink.Sink, c settleCase) map[string][]string {
	t.Helper()
	ctx := context.Background()
	final := map[string][]string{}
	for _, r := range c.runs {
		l, err := load.New(s, scheme)
		if err != nil {
			t.Fatal(err)
		}
		var buckets []string
		for b := range r {
			buckets = append(buckets, b)
		}
		sort.Strings(buckets)
		if err := l.Start(ctx, buckets); err != nil {
			t.Fatal(err)
		}
		for _, b := range buckets {
			if _, err := l.Commit(ctx, bucketOf(b, r[b])); err != nil {
				t.Fatal(err)
			}
			final[b] = r[b]
		}
		if err := l.Finish(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return final
}

// want applies the policy by brute force to the reports the output ends
// with: bucket → textname → winner ("" keeps its IDs).
func want(final map[string][]string) map[string]map[string]string {
	var all []report
	out := map[string]map[string]string{}
	for b, tns := range final {
		out[b] = map[string]string{}
		for _, tn := range tns {
			all = append(all, report{b, tn})
		}
	}
	for _, r := range all {
		w := ""
		for _, o := range all {
			if o.textname < r.textname && collide(o.textname, r.textname) && (w == "" || o.textname < w) {
				w = o.textname
			}
		}
		out[r.bucket][r.textname] = w
	}
	return out
}

func check(t *testing.T, got, want map[string]map[string]string) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("verdicts (bucket → report → winner):\n%v\nwant:\n%v", got, want)
	}
}

func TestSettler_Memory(t *testing.T) {
	for _, zoned := range []bool{false, true} {
		for _, c := range cases(t) {
			t.Run(fmt.Sprintf("%s/zoned=%v", c.name, zoned), func(t *testing.T) { memoryCase(t, c, zoned) })
		}
	}
}

func memoryCase(t *testing.T, c settleCase, zoned bool) {
	s := sinktest.New()
	var into sink.Sink = s
	if zoned {
		into = sinktest.Zoned{Sink: s}
	}
	final := apply(t, into, c)
	got := map[string]map[string]string{}
	for name, b := range s.Committed {
		got[name] = map[string]string{}
		rejected := 0
		for _, r := range b.Reports {
			got[name][r.Textname] = r.RejectedBy
			if r.RejectedBy != "" {
				rejected++
			}
		}
		// The counts and records follow the verdicts.
		collisionsRecorded := 0
		for _, d := range b.Records {
			if d.Reason == deadletter.Collision {
				collisionsRecorded++
			}
		}
		if b.Counts.Reports != int64(len(b.Reports)-rejected) || b.Counts.Rejects[deadletter.Collision] != int64(rejected) || collisionsRecorded != rejected {
			t.Errorf("bucket %s: %d reports, %d rejected; counts %+v, %d collision records", name, len(b.Reports), rejected, b.Counts, collisionsRecorded)
		}
	}
	check(t, got, want(final))
}

// A run reads only the committed buckets its reports can reach: those
// with a report on a day of its own reports', or of those its buckets
// held before.
func TestSettler_ReadsWhatItReaches(t *testing.T) {
	ctx := context.Background()
	pair := func(i, j int) bool { return true }
	one, two, six := names(t, 2, pair), namesOn(t, "02", 2, pair), namesOn(t, "06", 1, pair)
	s := sinktest.NewZoned()
	apply(t, s, settleCase{runs: []run{{"2017-06-01": {one[1]}, "2017-06-02": {two[1]}, "2017-06-06": {six[0]}}}})
	clear(s.Read)
	l, err := load.New(s, scheme)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Start(ctx, []string{"2017-06-03"}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Commit(ctx, bucketOf("2017-06-03", []string{two[0]})); err != nil {
		t.Fatal(err)
	}
	if err := l.Finish(ctx); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(s.Read) != "map[2017-06-02:1]" {
		t.Errorf("a bucket of 2017-06-02's reports read the manifests %v; want 2017-06-02's alone, once", s.Read)
	}
	if got := s.Committed["2017-06-02"].Reports[0].RejectedBy; got != two[0] {
		t.Errorf("%s lost its IDs to %q, want %s", two[1], got, two[0])
	}
}

func TestSettler_InSink(t *testing.T) {
	for _, c := range cases(t) {
		t.Run(c.name, func(t *testing.T) {
			dsn := pgtest.NewDatabase(t)
			ctx := context.Background()
			s, err := pgcopy.Open(ctx, pgcopy.Options{DSN: dsn, CreateSchema: true})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			final := apply(t, s, c)
			conn := pgtest.Connect(t, dsn)
			rows, err := conn.Query(ctx, `SELECT bucket::text, textname, coalesce(rejected_by, '') FROM backfill.reports`)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]map[string]string{}
			for _, r := range testutil.Must(pgx.CollectRows(rows, pgx.RowToStructByPos[struct{ B, T, W string }])) {
				if got[r.B] == nil {
					got[r.B] = map[string]string{}
				}
				got[r.B][r.T] = r.W
			}
			var bad int
			if err := conn.QueryRow(ctx, `SELECT count(*) FROM backfill.ledger l WHERE reports <> (SELECT count(*) FROM backfill.reports r WHERE r.bucket = l.bucket AND rejected_by IS NULL)
				OR coalesce((rejects_by_reason->>'collision')::int, 0) <> (SELECT count(*) FROM backfill.reports r WHERE r.bucket = l.bucket AND rejected_by IS NOT NULL)`).Scan(&bad); err != nil || bad != 0 {
				t.Errorf("%d ledger rows disagree with the verdicts (%v)", bad, err)
			}
			for b := range final { // buckets loaded empty have no report rows
				if got[b] == nil {
					got[b] = map[string]string{}
				}
			}
			check(t, got, want(final))
		})
	}
}
