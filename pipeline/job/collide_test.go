package job_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"testing"

	"github.com/backfill-dev/backfill/gen/corpus"
	"github.com/backfill-dev/backfill/gen/corpus/corpustest"
	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/internal/testutil"
	"github.com/backfill-dev/backfill/pipeline/deadletter"
	"github.com/backfill-dev/backfill/pipeline/ingest"
	"github.com/backfill-dev/backfill/pipeline/job"
	"github.com/backfill-dev/backfill/pipeline/ooid"
	"github.com/backfill-dev/backfill/pipeline/sink/parquetfile"
)

// narrow is a scheme under which the colliding corpus collides often.
var narrow = ooid.Scheme{CounterBits: 20, SHA1Offset: 33}

// genColliding writes a corpus whose reports share timestamps (within a
// bucket and with the next) and are large for a 20-bit counter.
func genColliding(t testing.TB, seed uint64) string {
	t.Helper()
	cfg := corpus.DefaultConfig()
	// Twice the reports of 90 of up to 5,000 measurements, a fifth of
	// their size: about as many colliding pairs, in half the rows.
	cfg.Seed, cfg.Buckets, cfg.Reports, cfg.CanSize = seed, 4, 180, 256<<10
	cfg.MinMeasurements, cfg.MaxMeasurements, cfg.TimeSlots, cfg.MaxTemplate = 100, 1000, 3, 1024
	dir := t.TempDir()
	if _, err := corpus.Generate(dir, cfg); err != nil {
		t.Fatal(err)
	}
	return dir
}

// skipUnderRace skips the collision tests under the race detector: their
// logic runs in the writer goroutine alone, the pipeline's concurrency is
// raced by the other tests of the package, and the race detector would
// make these (a dozen runs over colliding corpora) take many minutes.
func skipUnderRace(t *testing.T) {
	testutil.SkipUnderRace(t, "many runs over colliding corpora, single-goroutine logic")
}

func runScheme(t testing.TB, in, out string, workers int, buckets ...string) job.Summary {
	t.Helper()
	s, err := parquetfile.Open(t.Context(), store.Local(out))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sum, err := job.Run(context.Background(), job.Config{In: store.Local(in), Buckets: buckets, Workers: workers, Scheme: narrow, MaxBlob: maxBlob, Version: "test"}, s)
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

// expectedLosers applies docs/design.md §3 to the ground truth by brute force:
// every ID of every report in a set; a report loses to the first-sorting
// report that shares an ID with it and sorts before it.
func expectedLosers(t testing.TB, truth []corpus.Truth) map[string]string {
	owners := map[uint64][]string{}
	for _, tr := range truth {
		if tr.Textname == "" || tr.N == 0 {
			continue
		}
		r, err := narrow.Report(tr.Textname)
		if err != nil {
			t.Fatal(err)
		}
		for ndx := range uint32(tr.N) {
			id := uint64(r.ID(ndx))
			owners[id] = append(owners[id], tr.Textname)
		}
	}
	losers := map[string]string{}
	for _, names := range owners {
		sort.Strings(names)
		for _, l := range names[1:] {
			if w, ok := losers[l]; !ok || names[0] < w {
				losers[l] = names[0]
			}
		}
	}
	return losers
}

// A run rejects exactly the reports the policy rejects, and no two
// measurement rows share an ID.
func TestRun_CollisionsMatchPolicy(t *testing.T) {
	skipUnderRace(t)
	in := genColliding(t, 11)
	want := expectedLosers(t, corpustest.ReadTruth(t, in))
	if len(want) < 5 {
		t.Fatalf("only %d colliding reports: the corpus does not exercise the policy", len(want))
	}
	out := t.TempDir()
	sum := runScheme(t, in, out, 2)
	if sum.Reasons[deadletter.Collision] != int64(len(want)) {
		t.Errorf("summary: %d collision dead letters, want %d", sum.Reasons[deadletter.Collision], len(want))
	}
	got := map[string]string{}
	accepted := map[string]int64{}
	reports, _ := filepath.Glob(filepath.Join(out, "reports", "*.parquet"))
	for _, f := range reports {
		for _, r := range readSchemeParquet[parquetfile.Report](t, f) {
			if r.RejectedBy != "" {
				got[r.Textname] = r.RejectedBy
			} else {
				accepted[r.Textname] = r.N
			}
		}
	}
	for l, w := range want {
		if got[l] != w {
			t.Errorf("%s: rejected by %q, want %q", l, got[l], w)
		}
	}
	for l := range got {
		if _, ok := want[l]; !ok {
			t.Errorf("%s rejected, but it collides with no earlier-sorting report", l)
		}
	}
	seen := map[int64]bool{}
	rows := map[string]int64{}
	ms, _ := filepath.Glob(filepath.Join(out, "measurements", "*.parquet"))
	for _, f := range ms {
		for _, m := range readSchemeParquet[parquetfile.Measurement](t, f) {
			if seen[m.OOID] {
				t.Fatalf("OOID %x written twice", uint64(m.OOID))
			}
			seen[m.OOID] = true
			rows[m.Textname]++
		}
	}
	for name, n := range accepted {
		if rows[name] != n {
			t.Errorf("%s: %d rows, want %d", name, rows[name], n)
		}
	}
	for name := range got {
		if rows[name] != 0 {
			t.Errorf("rejected %s has %d rows", name, rows[name])
		}
	}
	dl := map[string]int{}
	dls, _ := filepath.Glob(filepath.Join(out, "dead-letters", "*.jsonl"))
	for _, f := range dls {
		for _, d := range readDeadLetters(t, f) {
			if d.Reason == deadletter.Collision {
				dl[d.Textname]++
			}
		}
	}
	for l := range want {
		if dl[l] != 1 {
			t.Errorf("%s: %d collision dead letters", l, dl[l])
		}
	}
}

// The output does not depend on the number of workers, the order the
// buckets are run in, or how they are split across runs.
func TestRun_CollisionsOrderIndependent(t *testing.T) {
	skipUnderRace(t)
	in := genColliding(t, 12)
	losers := expectedLosers(t, corpustest.ReadTruth(t, in))
	across := 0
	for l, w := range losers {
		if l[:10] != w[:10] {
			across++
		}
	}
	// Losers in a later bucket than their winner make the out-of-order
	// runs rewrite committed buckets.
	if len(losers) < 5 || across < 2 {
		t.Fatalf("%d colliding reports, %d across buckets: too few to prove anything", len(losers), across)
	}
	buckets, err := ingest.ListBuckets(t.Context(), store.Local(in))
	if err != nil {
		t.Fatal(err)
	}
	clean := t.TempDir()
	runScheme(t, in, clean, 2)
	want := filesOf(t, clean)

	for _, v := range []struct {
		name    string
		workers int
		runs    [][]string
	}{
		{"one at a time, newest first", 1, [][]string{{buckets[3]}, {buckets[2]}, {buckets[1]}, {buckets[0]}}},
		{"split, the later half first", 3, [][]string{{buckets[2], buckets[3]}, {buckets[0], buckets[1]}}},
		{"interleaved", 2, [][]string{{buckets[1], buckets[3]}, {buckets[0]}, {buckets[2]}}},
		{"everything, then parts again", 4, [][]string{buckets, {buckets[2]}, {buckets[0], buckets[3]}}},
	} {
		out := t.TempDir()
		for _, bs := range v.runs {
			runScheme(t, in, out, v.workers, bs...)
		}
		sameFiles(t, fmt.Sprintf("%s, %d workers", v.name, v.workers), want, filesOf(t, out))
	}
}
