package job_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/pipeline/deadletter"
	"github.com/backfill-dev/backfill/pipeline/ingest"
	"github.com/backfill-dev/backfill/pipeline/job"
	"github.com/backfill-dev/backfill/pipeline/ooid"
	"github.com/backfill-dev/backfill/pipeline/reader"
	"github.com/backfill-dev/backfill/pipeline/sink"
	"github.com/backfill-dev/backfill/pipeline/sink/parquetfile"
	"github.com/backfill-dev/backfill/pipeline/sink/sinktest"
	"github.com/backfill-dev/backfill/pipeline/stamped"
)

// runCfg runs cfg into the Parquet output out, with the tests' defaults.
func runCfg(t *testing.T, cfg job.Config, out string) (job.Summary, error) {
	t.Helper()
	s, err := parquetfile.Open(t.Context(), store.Local(out))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cfg.Workers, cfg.MaxBlob, cfg.Version = 2, maxBlob, "test"
	if cfg.Scheme == (ooid.Scheme{}) {
		cfg.Scheme = ooid.DefaultScheme
	}
	return job.Run(context.Background(), cfg, s)
}

// withdrawn checks a run's withdrawals: each of cause, and counted as a
// reject of the run; the run after it, which withdraws nothing, counts
// none.
func withdrawn(t *testing.T, what string, sum job.Summary, cfg job.Config, out, cause string) {
	t.Helper()
	if len(sum.Withdrawn) == 0 {
		t.Fatalf("%s: nothing withdrawn", what)
	}
	for _, w := range sum.Withdrawn {
		if w.Cause != cause || w.N == 0 || !strings.Contains(w.Says(), cause) {
			t.Errorf("%s: withdrawal %+v, want cause %s", what, w, cause)
		}
	}
	if got := sum.RejectsByReason[deadletter.Withdrawn]; got != int64(len(sum.Withdrawn)) {
		t.Errorf("%s: %d withdrawn rejects for %d withdrawals", what, got, len(sum.Withdrawn))
	}
	cfg.Resume = true
	again, err := runCfg(t, cfg, out)
	if err != nil || len(again.Withdrawn) != 0 || again.RejectsByReason[deadletter.Withdrawn] != 0 || again.Rejects != sum.Rejects-int64(len(sum.Withdrawn)) {
		t.Errorf("%s: the run after: %v, %d withdrawn, %d rejects (the withdrawing run's %d)", what, err, len(again.Withdrawn), again.Rejects, sum.Rejects)
	}
}

// A bucket written again takes back IDs for causes other than a
// collision too: an ndx policy that counts its reports' measurements
// otherwise, a container gone from its input. Each is a withdrawal, named
// with its cause, recorded and counted; --no-withdraw refuses it before
// anything changes. An output holds one scheme and one ndx policy.
func TestRun_EveryWithdrawalIsNamed(t *testing.T) {
	in := genCorpus(t, 2, 60)
	buckets, err := ingest.ListBuckets(t.Context(), store.Local(in))
	if err != nil {
		t.Fatal(err)
	}

	// The ndx policy.
	out := t.TempDir()
	if _, err := runCfg(t, job.Config{In: store.Local(in)}, out); err != nil {
		t.Fatal(err)
	}
	before := filesOf(t, out)
	_, err = runCfg(t, job.Config{In: store.Local(in), Ndx: reader.NdxDatums, NoWithdraw: true}, out)
	if err == nil || !strings.Contains(err.Error(), "--no-withdraw") || !strings.Contains(err.Error(), "--ndx datums") {
		t.Fatalf("--ndx datums over --ndx blobs, --no-withdraw: %v, want a refusal", err)
	}
	sameFiles(t, "the refused run", before, filesOf(t, out))
	datums := job.Config{In: store.Local(in), Ndx: reader.NdxDatums}
	sum, err := runCfg(t, datums, out)
	if err != nil {
		t.Fatal(err)
	}
	withdrawn(t, "--ndx datums over --ndx blobs", sum, datums, out, sink.CauseNdxPolicy)

	// One bucket of another policy would mix two in one output.
	_, err = runCfg(t, job.Config{In: store.Local(in), Buckets: buckets[:1]}, out)
	if err == nil || !strings.Contains(err.Error(), "--ndx datums") || !strings.Contains(err.Error(), "--ndx blobs") || !strings.Contains(err.Error(), buckets[1]) {
		t.Errorf("one bucket under --ndx blobs into an output of --ndx datums: %v, want a refusal naming both", err)
	}

	// A container gone from the input.
	out = t.TempDir()
	if _, err := runCfg(t, job.Config{In: store.Local(in)}, out); err != nil {
		t.Fatal(err)
	}
	cans, _ := filepath.Glob(filepath.Join(in, buckets[0], "*.tar.lz4"))
	if len(cans) < 2 {
		t.Fatalf("bucket %s has %d containers", buckets[0], len(cans))
	}
	if err := os.Remove(cans[0]); err != nil {
		t.Fatal(err)
	}
	before = filesOf(t, out)
	_, err = runCfg(t, job.Config{In: store.Local(in), Resume: true, NoWithdraw: true}, out)
	var we *sink.WithdrawError
	if !errors.As(err, &we) || we.Withdrawals[0].Cause != sink.CauseVanished || we.Bucket != buckets[0] {
		t.Fatalf("a container gone, --resume --no-withdraw: %v, want a refusal of cause %s", err, sink.CauseVanished)
	}
	sameFiles(t, "the refused run", before, filesOf(t, out))
	resume := job.Config{In: store.Local(in), Resume: true}
	sum, err = runCfg(t, resume, out)
	if err != nil {
		t.Fatal(err)
	}
	withdrawn(t, "a container gone", sum, resume, out, sink.CauseVanished)
}

// skipping is a sink that another run always beats to the bucket (as a
// PostgreSQL sink whose bucket another run holds, or committed), and
// counts the reads of its ledger.
type skipping struct {
	*sinktest.Sink
	states int
}

func (s *skipping) State(ctx context.Context) ([]stamped.State, error) {
	s.states++
	return s.Sink.State(ctx)
}

func (s *skipping) Begin(context.Context, stamped.Meta) (sink.BucketWriter, error) {
	return nil, fmt.Errorf("held by another run: %w", sink.ErrSkipped)
}

// A run whose buckets another run takes reads the ledger once when it
// starts and once when it counts, not once a bucket.
func TestRun_SkippedBucketsReadTheLedgerOnce(t *testing.T) {
	in := genCorpus(t, 3, 10)
	s := &skipping{Sink: sinktest.New()}
	sum, err := job.Run(context.Background(), job.Config{In: store.Local(in), Workers: 2, Scheme: ooid.DefaultScheme, MaxBlob: maxBlob, Version: "test"}, s)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Skipped != 3 || s.states > 2 {
		t.Errorf("%d buckets skipped, the ledger read %d times; want 3 skipped, read twice at most", sum.Skipped, s.states)
	}
}
