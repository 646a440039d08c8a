package job_test

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/backfill-dev/backfill/gen/corpus"
	"github.com/backfill-dev/backfill/gen/corpus/corpustest"

	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/internal/testutil"
	"github.com/backfill-dev/backfill/pipeline/deadletter"
	"github.com/backfill-dev/backfill/pipeline/sink/parquetfile"
)

// A small index that names many reports in containers that are not
// there: the first deadletter.MaxListed are listed one by one, the rest
// counted in one closing record, so the dead letters (and the memory that
// holds them) do not grow with what the index claims; every report is
// still counted, and the bucket checks against its ledger.
func TestRun_MissingContainersCapped(t *testing.T) {
	in := t.TempDir()
	dir := filepath.Join(in, "2017-06-01")
	testutil.Check(t, os.MkdirAll(dir, 0o755))
	f, err := os.Create(filepath.Join(dir, "index.json.gz"))
	testutil.Check(t, err)
	zw := gzip.NewWriter(f)
	enc := json.NewEncoder(zw)
	const rows, per = 250, 100 // 25,000 reports
	for i := range rows {
		var texts []map[string]any
		for j := range per {
			texts = append(texts, map[string]any{"text_crc32": 1, "text_sha1": "fWq46ivF7+Ii0YuAaWxgUO04YzU=", "text_size": 1000,
				"textname": fmt.Sprintf("2017-06-01/20170531T%06dZ-RU-AS1-web_connectivity-20170530T154341Z_AS1_%08d-0.2.0-probe.json", i, i*per+j)})
		}
		testutil.Check(t, enc.Encode(map[string]any{"canned": texts, "file_crc32": 1, "file_sha1": "rgGFtNz3PybVQs31IDR0iQirdxI=", "file_size": 1920,
			"filename": fmt.Sprintf("2017-06-01/web_connectivity.%d.tar.lz4", i), "text_size": per * 1536}))
	}
	testutil.Check(t, zw.Close())
	testutil.Check(t, f.Close())

	out := t.TempDir()
	sum, err := runJob(t, context.Background(), in, out, 2)
	testutil.Check(t, err)
	if sum.RejectsByReason[deadletter.MissingContainer] != rows*per {
		t.Errorf("%d missing_container rejects counted, want %d", sum.RejectsByReason[deadletter.MissingContainer], rows*per)
	}
	recs, err := parquetfile.ReadDeadLetters(t.Context(), store.Local(out), "dead-letters/2017-06-01.jsonl")
	testutil.Check(t, err)
	var more int64
	closing := 0
	for _, r := range recs {
		if r.More > 0 {
			closing++
			more += r.More
		}
	}
	if len(recs) != deadletter.MaxListed+1 || closing != 1 || int64(len(recs))+more != rows*per {
		t.Errorf("%d records (%d closing, %d more), want %d listed and one closing record for the rest", len(recs), closing, more, deadletter.MaxListed)
	}
	if err := parquetfile.CheckBucket(t.Context(), store.Local(out), "2017-06-01"); err != nil {
		t.Errorf("the bucket does not check against its ledger: %v", err)
	}
}

// A container whose name differs from its index row's only by case (a
// copy through a file system that folds names) is read as that row, with
// one name_mismatch notice: its reports keep their IDs, and it is neither
// a missing container nor one the index does not list.
func TestRun_ContainerNameFolded(t *testing.T) {
	cfg := corpus.DefaultConfig()
	cfg.Seed, cfg.Buckets, cfg.Reports, cfg.MaxMeasurements = 5, 1, 40, 200
	in := corpustest.Generate(t, cfg)
	clean, err := runJob(t, context.Background(), in, t.TempDir(), 2)
	testutil.Check(t, err)
	dir := filepath.Join(in, "2017-06-01")
	ents, err := os.ReadDir(dir)
	testutil.Check(t, err)
	renamed := ""
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".lz4") {
			renamed = strings.ToUpper(e.Name()[:1]) + e.Name()[1:]
			testutil.Check(t, os.Rename(filepath.Join(dir, e.Name()), filepath.Join(dir, renamed)))
			break
		}
	}
	sum, err := runJob(t, context.Background(), in, t.TempDir(), 2)
	testutil.Check(t, err)
	if sum.Reports != clean.Reports || sum.Measurements != clean.Measurements || sum.Rejects != clean.Rejects {
		t.Errorf("with %s renamed: %+v; the clean run's %+v", renamed, sum.Tally, clean.Tally)
	}
	if sum.NoticesByReason[deadletter.NameMismatch] != 1 || sum.RejectsByReason[deadletter.MissingContainer] != 0 || sum.Reasons[deadletter.NotInIndex] != clean.Reasons[deadletter.NotInIndex] {
		t.Errorf("records %v; want one name_mismatch, no missing_container, no more not_in_index", sum.Reasons)
	}
}
