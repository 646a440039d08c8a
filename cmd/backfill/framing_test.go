package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pierrec/lz4/v4"

	"github.com/backfill-dev/backfill/internal/cli"
	"github.com/backfill-dev/backfill/internal/pgtest"
	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/internal/testutil"
	"github.com/backfill-dev/backfill/pipeline/sink/parquetfile"
)

// framingDir holds JSON reports that OONI's fastpath (a measurement a
// line) and autoclaving (a document from '{' to "}\n") frame apart, and
// what OONI's own code gives each line.
const framingDir = "../../pipeline/ooniuid/testdata/framing"

// framingInput writes the framing reports as a canned bucket of one can
// a report, without an index, and returns the folder of bucket folders.
func framingInput(t *testing.T) string {
	t.Helper()
	in := t.TempDir()
	files, err := filepath.Glob(framingDir + "/raw/*/*.json")
	testutil.Check(t, err)
	if len(files) < 10 {
		t.Fatalf("%d framing reports", len(files))
	}
	for _, f := range files {
		dir := filepath.Join(in, filepath.Base(filepath.Dir(f)))
		testutil.Check(t, os.MkdirAll(dir, 0o755))
		out, err := os.Create(filepath.Join(dir, filepath.Base(f)+".lz4"))
		testutil.Check(t, err)
		w := lz4.NewWriter(out)
		_, err = w.Write(testutil.Must(os.ReadFile(f)))
		testutil.Check(t, err)
		testutil.Check(t, w.Close())
		testutil.Check(t, out.Close())
	}
	return in
}

// framingGolden returns OONI's uids of each framing report, sorted.
func framingGolden(t *testing.T) map[string][]string {
	t.Helper()
	f, err := os.Open(framingDir + "/golden.tsv")
	testutil.Check(t, err)
	defer f.Close()
	out := map[string][]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		p := strings.Split(sc.Text(), "\t")
		if p[2] != "-" {
			out[p[0]] = append(out[p[0]], p[2])
		}
	}
	testutil.Check(t, sc.Err())
	for _, v := range out {
		slices.Sort(v)
	}
	return out
}

// Over JSON reports OONI's fastpath frames otherwise than autoclaving,
// run --measurement-uid accounts for every uid OONI's code gives: on a
// row, or listed in the dead letter that says why those bytes have none
// (the cut of a broken frame or a truncated report, a measurement that
// spans several lines). Into Parquet and PostgreSQL alike, and verify
// --in computes the listed uids again, and names one changed.
func TestRun_EveryUIDAccountedFor(t *testing.T) {
	t.Parallel()
	in := framingInput(t)
	want := framingGolden(t)
	out := t.TempDir() + "/out"
	if code, msg := callIn("", "run", "-q", "--measurement-uid", "--in", in, "--out", out); code != cli.ExitRejects {
		t.Fatalf("run: exit %d, want 3 (broken frames)\n%s", code, msg)
	}
	got := map[string][]string{}
	files, _ := filepath.Glob(out + "/measurements/*.parquet")
	for _, f := range files {
		ms, err := parquetfile.ReadMeasurementIDs(t.Context(), store.Local(out), "measurements/"+filepath.Base(f))
		testutil.Check(t, err)
		for _, m := range ms {
			if m.MeasurementUID != nil {
				got[m.Textname] = append(got[m.Textname], *m.MeasurementUID)
			}
		}
	}
	listed := 0
	dead, _ := filepath.Glob(out + "/dead-letters/*.jsonl")
	for _, f := range dead {
		ds, err := parquetfile.ReadDeadLetters(t.Context(), store.Local(out), "dead-letters/"+filepath.Base(f))
		testutil.Check(t, err)
		for _, d := range ds {
			got[d.Textname] = append(got[d.Textname], d.MeasurementUIDs...)
			listed += len(d.MeasurementUIDs)
		}
	}
	for tn, w := range want {
		g := got[tn]
		slices.Sort(g)
		if !slices.Equal(g, w) {
			t.Errorf("%s: the output carries\n%v\nOONI's code gives\n%v", tn, g, w)
		}
	}
	if listed < 20 {
		t.Errorf("%d uids listed in dead letters: the framing cases prove nothing", listed)
	}
	if code, msg := callIn("", "verify", "--in", in, out); code != cli.ExitOK {
		t.Errorf("verify --in: exit %d\n%s", code, msg)
	}
	// The census groups the listed measurements by their hash too: the
	// two equal lines of the CRLF report, neither of which is a row, are
	// a duplicate pair of the same report, without OOIDs or ndx.
	pairs := t.TempDir() + "/pairs.csv"
	fromParquet := censusJSON(t, "--pairs", pairs, out)
	var res struct{ Listed int }
	testutil.Check(t, json.Unmarshal([]byte(fromParquet), &res))
	if res.Listed != listed {
		t.Errorf("census: %d listed, the dead letters list %d\n%s", res.Listed, listed, fromParquet)
	}
	if !strings.Contains(string(testutil.Must(os.ReadFile(pairs))), ",,same_report,2017-06-02/20170602T000006Z-ZZ-AS0-framingcrlfreal-r6-0.2.0-probe.json,,2017-06-02/20170602T000006Z-ZZ-AS0-framingcrlfreal-r6-0.2.0-probe.json,\n") {
		t.Errorf("census --pairs names no pair of the CRLF report's listed lines:\n%s", testutil.Must(os.ReadFile(pairs)))
	}

	dsn := pgtest.NewDatabase(t)
	if code, msg := callIn("", "run", "-q", "--measurement-uid", "--in", in, "--sink", "postgres", "--dsn", dsn, "--create-schema"); code != cli.ExitRejects {
		t.Fatalf("run --sink postgres: exit %d\n%s", code, msg)
	}
	c := pgtest.Connect(t, dsn)
	rows, err := c.Query(t.Context(), `SELECT textname, measurement_uid FROM backfill.measurement_ids WHERE measurement_uid IS NOT NULL
		UNION ALL SELECT textname, unnest(measurement_uids) FROM backfill.dead_letters`)
	testutil.Check(t, err)
	pg := map[string][]string{}
	for rows.Next() {
		var tn, uid string
		testutil.Check(t, rows.Scan(&tn, &uid))
		pg[tn] = append(pg[tn], uid)
	}
	testutil.Check(t, rows.Err())
	for tn, w := range want {
		g := pg[tn]
		slices.Sort(g)
		if !slices.Equal(g, w) {
			t.Errorf("postgres: %s: the tables carry\n%v\nOONI's code gives\n%v", tn, g, w)
		}
	}
	if code, msg := callIn("", "verify", "--sink", "postgres", "--dsn", dsn, "--in", in); code != cli.ExitOK {
		t.Errorf("verify --sink postgres --in: exit %d\n%s", code, msg)
	}
	if c := censusJSON(t, "--sink", "postgres", "--dsn", dsn); c != fromParquet {
		t.Errorf("census of the schema:\n%s\nof the Parquet output:\n%s", c, fromParquet)
	}
	pgtest.Exec(t, dsn, `UPDATE backfill.dead_letters SET measurement_uids = measurement_uids[2:] WHERE ctid = (SELECT ctid FROM backfill.dead_letters WHERE measurement_uids IS NOT NULL LIMIT 1)`)
	if code, msg := callIn("", "verify", "--sink", "postgres", "--dsn", dsn, "--in", in); code != cli.ExitFailure || !strings.Contains(msg, "measurement_uids") {
		t.Errorf("verify --in of a listed uid gone: exit %d\n%s", code, msg)
	}
}
