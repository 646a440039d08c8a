package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/backfill-dev/backfill/gen/corpus/corpustest"
	"github.com/backfill-dev/backfill/internal/cli"
	"github.com/backfill-dev/backfill/internal/pgtest"
	"github.com/backfill-dev/backfill/internal/testutil"
)

// audit and keysearch read a PostgreSQL schema that run loaded as they
// read the Parquet output of the same run: the same JSON, pair for pair,
// and the same scheme file.
func TestAuditKeysearch_Postgres(t *testing.T) {
	t.Parallel()
	skipUnderRace(t)
	dir := t.TempDir()
	if code, out := call("gen", "--out", dir+"/c", "--buckets", "2", "--reports", "80", "--min-measurements", "400",
		"--max-measurements", "5000", "--time-slots", "3", "--max-template", "1KiB"); code != 0 {
		t.Fatalf("gen: exit %d\n%s", code, out)
	}
	dsn := pgtest.NewDatabase(t)
	if code, out := call("run", "--in", dir+"/c", "--sink", "postgres", "--dsn", dsn, "--create-schema", "-q", "--counter-bits", "20"); code != cli.ExitRejects {
		t.Fatalf("run --sink postgres: exit %d\n%s", code, out)
	}
	if code, out := call("run", "--in", dir+"/c", "--out", dir+"/out", "-q", "--counter-bits", "20"); code != cli.ExitRejects {
		t.Fatalf("run: exit %d\n%s", code, out)
	}
	codePQ, fromParquet := call("audit", "--counter-bits", "20,24", "--pairs", "1000", "--json", dir+"/out")
	codePG, fromPG := call("audit", "--counter-bits", "20,24", "--pairs", "1000", "--json", "--sink", "postgres", "--dsn", dsn)
	if codePQ != cli.ExitOK || codePG != cli.ExitOK || fromPG != fromParquet {
		t.Errorf("audit of the Parquet output (exit %d):\n%s\nof PostgreSQL (exit %d):\n%s", codePQ, fromParquet, codePG, fromPG)
	}
	if len(fromPG) < 200 {
		t.Errorf("audit lists no pairs: %s", fromPG)
	}
	// With a manifest file beside the schema, the pairs are named from
	// both, as beside the Parquet output.
	var m strings.Builder
	for _, tr := range corpustest.ReadTruth(t, dir+"/c") {
		if tr.Textname != "" {
			fmt.Fprintf(&m, "%s\t%d\n", tr.Textname, tr.N)
		}
	}
	manifest := filepath.Join(dir, "m.tsv")
	testutil.Check(t, os.WriteFile(manifest, []byte(m.String()), 0o644))
	codePQ, withParquet := call("audit", "--counter-bits", "20", "--pairs", "1000", "--json", dir+"/out", manifest)
	codePG, withPG := call("audit", "--counter-bits", "20", "--pairs", "1000", "--json", "--sink", "postgres", "--dsn", dsn, manifest)
	if codePQ != cli.ExitOK || codePG != cli.ExitOK || withPG != withParquet || !strings.Contains(withPG, `"reports":320`) {
		t.Errorf("a manifest beside the Parquet output:\n%s\nbeside PostgreSQL:\n%s", withParquet, withPG)
	}
	a, b := filepath.Join(dir, "a.txt"), filepath.Join(dir, "b.txt")
	if code, out := call("keysearch", "--counter-bits", "20", "--out", a, "-q", dir+"/out"); code != cli.ExitOK {
		t.Fatalf("keysearch over Parquet: exit %d\n%s", code, out)
	}
	if code, out := call("keysearch", "--counter-bits", "20", "--out", b, "-q", "--sink", "postgres", "--dsn", dsn); code != cli.ExitOK {
		t.Fatalf("keysearch over PostgreSQL: exit %d\n%s", code, out)
	}
	x, _ := os.ReadFile(a)
	y, _ := os.ReadFile(b)
	if string(x) != string(y) || len(x) == 0 {
		t.Errorf("scheme files differ:\n%s\n%s", x, y)
	}
	if code, _ := call("audit", "--dsn", dsn, dir+"/out"); code != cli.ExitUsage {
		t.Errorf("--dsn without --sink postgres: exit %d", code)
	}
}
