package parquetfile_test

import (
	"context"
	"slices"
	"testing"

	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/pipeline/sink/parquetfile"
)

// events is a store that records when each file becomes visible or goes.
type events struct {
	store.Store
	log *[]string
}

func (e events) Create(ctx context.Context, name string) (store.Writer, error) {
	w, err := e.Store.Create(ctx, name)
	return recorded{w, name, e.log}, err
}

func (e events) Remove(ctx context.Context, name string) error {
	*e.log = append(*e.log, "remove "+name)
	return e.Store.Remove(ctx, name)
}

type recorded struct {
	store.Writer
	name string
	log  *[]string
}

func (r recorded) Commit() error {
	*r.log = append(*r.log, "commit "+r.name)
	return r.Writer.Commit()
}

// A bucket's measurements, which readers glob, are never visible without
// its ledger entry: a commit removes them before it touches the ledger and
// makes them visible after the new entry, so a run killed at any step
// leaves no measurements file of an uncommitted bucket (and never an old
// one beside a new entry, which the digests would refuse).
func TestSink_MeasurementsVisibleOnlyWhenCommitted(t *testing.T) {
	var log []string
	st := events{store.Local(t.TempDir()), &log}
	s, err := parquetfile.Open(t.Context(), st)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	commit(t, s, reports(t), nil)
	log = nil
	commit(t, s, reports(t), nil) // a bucket written again
	at := func(ev string) int {
		i := slices.Index(log, ev)
		if i < 0 {
			t.Fatalf("no %q in %q", ev, log)
		}
		return i
	}
	m, l := "measurements/"+bucket+".parquet", "ledger/"+bucket+".json"
	if !(at("remove "+m) < at("remove "+l) && at("remove "+l) < at("commit "+l) && at("commit "+l) < at("commit "+m)) {
		t.Errorf("commit order %q: the measurements must go before the old ledger entry and come back after the new one", log)
	}
	for _, f := range []string{"reports/" + bucket + ".parquet", "dead-letters/" + bucket + ".jsonl"} {
		if at("commit "+f) > at("commit "+l) {
			t.Errorf("commit order %q: %s after the ledger entry", log, f)
		}
	}
	if err := parquetfile.CheckBucket(t.Context(), st, bucket); err != nil {
		t.Errorf("the bucket as committed does not check: %v", err)
	}
}
