package job_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/pipeline/ingest"
	"github.com/backfill-dev/backfill/pipeline/job"
	"github.com/backfill-dev/backfill/pipeline/job/jobtest"
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

// withdrawn checks a run's withdrawals (jobtest.Withdrawn), the run
// after it being cfg with --resume.
func withdrawn(t *testing.T, what string, sum job.Summary, cfg job.Config, out, cause string) {
	t.Helper()
	cfg.Resume = true
	jobtest.Withdrawn(t, what, sum, cause, func() (job.Summary, error) { return runCfg(t, cfg, out) })
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
	jobtest.RemoveContainer(t, in, buckets[0])
	before = filesOf(t, out)
	_, err = runCfg(t, job.Config{In: store.Local(in), Resume: true, NoWithdraw: true}, out)
	jobtest.RefusedVanished(t, "a container gone, --resume --no-withdraw", err, buckets[0])
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
