package pgcopy_test

import (
	"context"
	"strings"
	"testing"

	"github.com/backfill-dev/backfill/gen/corpus/corpustest"
	"github.com/backfill-dev/backfill/internal/pgtest"
	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/pipeline/ingest"
	"github.com/backfill-dev/backfill/pipeline/job"
	"github.com/backfill-dev/backfill/pipeline/job/jobtest"
	"github.com/backfill-dev/backfill/pipeline/ooid"
	"github.com/backfill-dev/backfill/pipeline/reader"
	"github.com/backfill-dev/backfill/pipeline/sink"
	"github.com/backfill-dev/backfill/pipeline/sink/pgcopy"
)

// A bucket loaded again takes back IDs for causes other than a collision
// too, in PostgreSQL as in a Parquet output: an ndx policy that counts its
// reports' measurements otherwise, a container gone from its input. Each
// is named with its cause and counted as a reject of the run that made
// it; --no-withdraw refuses it and leaves the tables as they were.
func TestLoad_EveryWithdrawalIsNamed(t *testing.T) {
	in := corpustest.Generate(t, dirty(5))
	buckets, err := ingest.ListBuckets(t.Context(), store.Local(in))
	if err != nil {
		t.Fatal(err)
	}
	admin := pgtest.AdminURL(t)
	run := func(dsn string, cfg job.Config, noWithdraw bool) (job.Summary, error) {
		t.Helper()
		s, err := pgcopy.Open(t.Context(), pgcopy.Options{DSN: dsn, Schema: "backfill", CreateSchema: true, Resume: cfg.Resume, NoWithdraw: noWithdraw})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		cfg.In, cfg.Workers, cfg.Scheme, cfg.MaxBlob, cfg.Version, cfg.NoWithdraw = store.Local(in), 2, ooid.DefaultScheme, maxBlob, "test", noWithdraw
		return job.Run(context.Background(), cfg, s)
	}
	named := func(what, dsn string, cfg job.Config, cause string) {
		t.Helper()
		sum, err := run(dsn, cfg, false)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		cfg.Resume = true
		jobtest.Withdrawn(t, what, sum, cause, func() (job.Summary, error) { return run(dsn, cfg, true) })
	}

	// The ndx policy: --no-withdraw is refused before anything is written
	// (the run sees it from the ledger), and without it each report whose
	// count changes is named.
	dsn := pgtest.CreateDatabase(t, admin)
	if _, err := run(dsn, job.Config{}, false); err != nil {
		t.Fatal(err)
	}
	before := dumpPostgres(t, dsn, "backfill")
	if _, err := run(dsn, job.Config{Ndx: reader.NdxDatums}, true); err == nil || !strings.Contains(err.Error(), "--ndx datums") {
		t.Fatalf("--ndx datums over --ndx blobs, --no-withdraw: %v, want a refusal", err)
	}
	sameState(t, "the refused run", before, dumpPostgres(t, dsn, "backfill"))
	named("--ndx datums over --ndx blobs", dsn, job.Config{Ndx: reader.NdxDatums}, sink.CauseNdxPolicy)

	// A container gone from the input: only the sink can tell.
	dsn = pgtest.CreateDatabase(t, admin)
	if _, err := run(dsn, job.Config{}, false); err != nil {
		t.Fatal(err)
	}
	jobtest.RemoveContainer(t, in, buckets[0])
	before = dumpPostgres(t, dsn, "backfill")
	_, err = run(dsn, job.Config{Resume: true}, true)
	jobtest.RefusedVanished(t, "a container gone, --resume --no-withdraw", err, buckets[0])
	sameState(t, "the refused run", before, dumpPostgres(t, dsn, "backfill"))
	named("a container gone", dsn, job.Config{Resume: true}, sink.CauseVanished)
}
