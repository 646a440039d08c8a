package pgcopy_test

import (
	"context"
	"strings"
	"testing"

	"github.com/backfill-dev/backfill/gen/corpus/corpustest"
	"github.com/backfill-dev/backfill/internal/pgtest"
	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/pipeline/ingest"
	"github.com/backfill-dev/backfill/pipeline/ooid"
)

func keyed(t testing.TB, seed string, def uint64, ov ...ooid.Override) ooid.Scheme {
	t.Helper()
	kt, err := ooid.NewKeyTable(seed, def, ov)
	if err != nil {
		t.Fatal(err)
	}
	return ooid.KeyedScheme(20, kt)
}

// Under a keyed scheme the database holds what the Parquet output holds,
// its ledger names the key table, and buckets of another table are
// refused beside them.
func TestLoad_KeyedScheme(t *testing.T) {
	skipUnderRace(t)
	in := corpustest.Generate(t, colliding(13))
	scheme := keyed(t, "pg-test", 3, ooid.Override{TS: 1496275200, Index: 9})
	want := dumpParquet(t, parquetRun(t, in, scheme))
	dsn := pgtest.NewDatabase(t)
	l := loader{t: t, dsn: dsn, schema: "keyed", scheme: scheme}
	l.load(in)
	sameState(t, "keyed", want, dumpPostgres(t, dsn, "keyed"))
	c := pgtest.Connect(t, dsn)
	if got := rows(t, c, `SELECT DISTINCT key_table || ' ' || sha1_offset FROM keyed.ledger`); len(got) != 1 || got[0] != scheme.Table+" -1" {
		t.Errorf("ledger key tables: %v, want %s", got, scheme.Table)
	}
	buckets, _ := ingest.ListBuckets(t.Context(), store.Local(in))
	other := loader{t: t, dsn: dsn, schema: "keyed", scheme: keyed(t, "pg-test", 4)}
	_, err := other.run(context.Background(), in, 2, buckets[0])
	if err == nil || !strings.Contains(err.Error(), "key_table="+scheme.Table) {
		t.Errorf("a bucket of another key table: %v", err)
	}
}
