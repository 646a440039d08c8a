package job_test

import (
	"context"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/backfill-dev/backfill/gen/corpus"
	"github.com/backfill-dev/backfill/gen/corpus/corpustest"
	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/pipeline/job"
	"github.com/backfill-dev/backfill/pipeline/ooid"
	"github.com/backfill-dev/backfill/pipeline/sink"
	"github.com/backfill-dev/backfill/pipeline/sink/parquetfile"
	"github.com/backfill-dev/backfill/pipeline/stamped"
)

func runNarrow(t testing.TB, cfg job.Config, out string) (job.Summary, error) {
	t.Helper()
	s, err := parquetfile.Open(t.Context(), store.Local(out))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cfg.Scheme, cfg.MaxBlob, cfg.Version, cfg.Workers = narrow, maxBlob, "test", 2
	return job.Run(context.Background(), cfg, s)
}

// withdrawnWhen returns the reports of bucket b that keep their IDs when
// b is run alone but lose them once every bucket is in: the IDs a run of
// the whole corpus takes back from a run of b alone.
func withdrawnWhen(t testing.TB, truth []corpus.Truth, b string) map[string]string {
	var alone []corpus.Truth
	for _, tr := range truth {
		if tr.Bucket == b {
			alone = append(alone, tr)
		}
	}
	lostAlone := expectedLosers(t, alone)
	out := map[string]string{}
	for l, w := range expectedLosers(t, truth) {
		if _, lost := lostAlone[l]; !lost && inBucket(truth, l) == b {
			out[l] = w
		}
	}
	return out
}

func inBucket(truth []corpus.Truth, textname string) string {
	for _, tr := range truth {
		if tr.Textname == textname {
			return tr.Bucket
		}
	}
	return ""
}

// lastLoses generates a colliding corpus and returns it, its buckets, and
// the reports of the last bucket that keep their IDs when it is run alone
// and lose them, by winner, once every bucket is in.
func lastLoses(t *testing.T) (in string, buckets []string, want map[string]string) {
	t.Helper()
	in = genColliding(t, 12)
	truth := corpustest.ReadTruth(t, in)
	buckets = slices.Sorted(maps.Keys(bucketSet(truth)))
	last := buckets[len(buckets)-1]
	if want = withdrawnWhen(t, truth, last); len(want) == 0 {
		t.Fatalf("no report of %s loses its IDs to an earlier bucket: the corpus proves nothing", last)
	}
	return in, buckets, want
}

// A run that takes back IDs an earlier run committed says so: it names
// each report, counts it as a reject, and its summary equals an
// uninterrupted run's; with NoWithdraw it refuses and changes nothing.
func TestRun_WithdrawalIsLoud(t *testing.T) {
	skipUnderRace(t)
	in, buckets, want := lastLoses(t)
	last := buckets[len(buckets)-1]
	clean, err := runNarrow(t, job.Config{In: store.Local(in)}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if clean.Rejects == 0 {
		t.Fatal("the uninterrupted run has no reject")
	}

	for _, resume := range []bool{true, false} {
		out := t.TempDir()
		first, err := runNarrow(t, job.Config{In: store.Local(in), Buckets: []string{last}}, out)
		if err != nil {
			t.Fatal(err)
		}
		if len(first.Withdrawn) != 0 {
			t.Fatalf("a first run withdrew %v", first.Withdrawn)
		}
		before := filesOf(t, out)
		// Forbidden: the run refuses before it changes anything.
		cfg := job.Config{In: store.Local(in), Resume: resume, NoWithdraw: true}
		_, err = runNarrow(t, cfg, out)
		var we *sink.WithdrawError
		if !errors.As(err, &we) {
			t.Fatalf("resume=%v, --no-withdraw: err %v, want a *sink.WithdrawError", resume, err)
		}
		for _, w := range we.Withdrawals {
			if want[w.Textname] == "" || w.Bucket != last {
				t.Errorf("refusal names %+v, which is not withdrawn", w)
			}
		}
		after := filesOf(t, out)
		for name, b := range before {
			if string(after[name]) != string(b) {
				t.Errorf("--no-withdraw changed %s", name)
			}
		}

		cfg.NoWithdraw = false
		sum, err := runNarrow(t, cfg, out)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, w := range sum.Withdrawn {
			if w.Bucket != last || w.N == 0 {
				t.Errorf("withdrawal %+v", w)
			}
			got[w.Textname] = w.Winner
		}
		if !maps.Equal(got, want) {
			t.Errorf("resume=%v: withdrawn %v, want %v", resume, got, want)
		}
		if sum.Reports != clean.Reports || sum.Measurements != clean.Measurements || sum.Rejects != clean.Rejects ||
			!maps.Equal(sum.RejectsByReason, clean.RejectsByReason) || !maps.Equal(sum.Reasons, clean.Reasons) {
			t.Errorf("resume=%v: summary %+v, an uninterrupted run's %+v", resume, sum.Tally, clean.Tally)
		}
	}
}

func bucketSet(truth []corpus.Truth) map[string]bool {
	out := map[string]bool{}
	for _, tr := range truth {
		if tr.Bucket != "" {
			out[tr.Bucket] = true
		}
	}
	return out
}

// OONI's identities of the measurements (UIDs) survive the rewrites of
// committed buckets whose verdicts change: buckets run newest first, with
// their collision losers rewritten, end byte for byte as one run over all
// of them.
func TestRun_UIDsSurviveRewrites(t *testing.T) {
	skipUnderRace(t)
	in := genColliding(t, 12)
	buckets := slices.Sorted(maps.Keys(bucketSet(corpustest.ReadTruth(t, in))))
	clean := t.TempDir()
	if _, err := runNarrow(t, job.Config{In: store.Local(in), UIDs: true}, clean); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	for i := len(buckets) - 1; i >= 0; i-- {
		if _, err := runNarrow(t, job.Config{In: store.Local(in), UIDs: true, Buckets: []string{buckets[i]}}, out); err != nil {
			t.Fatal(err)
		}
	}
	sameFiles(t, "newest first, with --measurement-uid", filesOf(t, clean), filesOf(t, out))
	rows, err := parquetfile.ReadReportIDs(t.Context(), store.Local(out), "reports/"+buckets[len(buckets)-1]+".parquet")
	if err != nil {
		t.Fatal(err)
	}
	losers := 0
	for _, r := range rows {
		if int64(len(r.IDs)) != r.N {
			t.Errorf("%s: %d identities for %d measurements", r.Textname, len(r.IDs), r.N)
		}
		if r.RejectedBy != "" {
			losers++
		}
	}
	if losers == 0 {
		t.Error("the last bucket has no collision loser: its rewrite proves nothing")
	}
}

// dying is a Parquet sink that fails, as a kill would stop it, the first
// bucket it is asked to write after it rewrote a committed bucket's
// verdicts: the settlement's first half done, its bucket not committed.
type dying struct {
	*parquetfile.Sink
	rewrote, died bool
}

func (d *dying) Reassign(ctx context.Context, scheme ooid.Scheme, bucket string, vs []stamped.Verdict) error {
	d.rewrote = true
	return d.Sink.Reassign(ctx, scheme, bucket, vs)
}

func (d *dying) Begin(ctx context.Context, m stamped.Meta) (sink.BucketWriter, error) {
	if d.rewrote && !d.died {
		d.died = true
		return nil, errors.New("killed")
	}
	return d.Sink.Begin(ctx, m)
}

// A run stopped between the rewrite of a committed bucket that loses IDs
// and the commit of the bucket that takes them leaves its settlement in
// a journal: the next run with --no-withdraw gives the IDs back and
// refuses, the committed bucket as it was; the next without names the
// withdrawal, as an uninterrupted run does.
func TestRun_KilledSettlementIsNamed(t *testing.T) {
	skipUnderRace(t)
	in, buckets, want := lastLoses(t)
	last := buckets[len(buckets)-1]
	out := t.TempDir()
	if _, err := runNarrow(t, job.Config{In: store.Local(in), Buckets: []string{last}}, out); err != nil {
		t.Fatal(err)
	}
	before := filesOf(t, out)

	s, err := parquetfile.Open(t.Context(), store.Local(out))
	if err != nil {
		t.Fatal(err)
	}
	d := &dying{Sink: s}
	_, err = job.Run(context.Background(), job.Config{In: store.Local(in), Buckets: buckets[:len(buckets)-1], Scheme: narrow, MaxBlob: maxBlob, Version: "test", Workers: 2}, d)
	s.Close()
	if !d.died || err == nil {
		t.Fatalf("the run was not stopped in a settlement (died %v): %v", d.died, err)
	}
	if _, err := os.Stat(filepath.Join(out, parquetfile.SettlingName)); err != nil {
		t.Fatalf("no journal of the settlement: %v", err)
	}

	_, err = runNarrow(t, job.Config{In: store.Local(in), Resume: true, NoWithdraw: true}, out)
	var we *sink.WithdrawError
	if !errors.As(err, &we) {
		t.Fatalf("--resume --no-withdraw after the kill: %v, want a *sink.WithdrawError", err)
	}
	after := filesOf(t, out)
	for _, f := range []string{"measurements/", "reports/", "dead-letters/"} {
		name := f + last + map[bool]string{true: ".jsonl", false: ".parquet"}[f == "dead-letters/"]
		if string(after[name]) != string(before[name]) {
			t.Errorf("--no-withdraw left %s as the stopped run changed it", name)
		}
	}

	sum, err := runNarrow(t, job.Config{In: store.Local(in), Resume: true}, out)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, w := range sum.Withdrawn {
		got[w.Textname] = w.Winner
	}
	if !maps.Equal(got, want) {
		t.Errorf("withdrawn %v, want %v", got, want)
	}
	if _, err := os.Stat(filepath.Join(out, parquetfile.SettlingName)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the journal is left after the settlement completed: %v", err)
	}
}
