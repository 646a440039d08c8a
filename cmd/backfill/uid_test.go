package main

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/backfill-dev/backfill/internal/cli"
	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/internal/testutil"
	"github.com/backfill-dev/backfill/pipeline/sink/parquetfile"
)

// uidGolden are the rows of testdata/uid-golden.tsv: for every
// measurement of the corpus gen makes with uidCorpus, by "textname ndx",
// the measurement_uid ("-" for none) and content hash OONI's own code
// (ooni/backend's fastpath: its normalize.py and trivial_id) computed
// from the reports' raw bytes, taken out of the cans.
func uidGolden(t *testing.T) map[string][2]string {
	f, err := os.Open("testdata/uid-golden.tsv")
	testutil.Check(t, err)
	defer f.Close()
	out := map[string][2]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		p := strings.Split(sc.Text(), "\t")
		out[p[0]+" "+p[1]] = [2]string{p[2], p[3]}
	}
	testutil.Check(t, sc.Err())
	return out
}

var uidCorpus = []string{"gen", "-q", "--seed", "59", "--buckets", "2", "--reports", "40", "--max-measurements", "60",
	"--corrupt", "invalid_utf8=0.05", "--corrupt", "empty_report=0.05"}

// run --measurement-uid gives every measurement row the content hash
// OONI's code computes from its raw bytes and, for JSON reports, OONI's
// measurement_uid; the report manifests list both for every measurement.
// Compared row by row with OONI's own code over the same reports.
func TestRun_MeasurementUIDAgainstOONI(t *testing.T) {
	t.Parallel()
	want := uidGolden(t)
	dir := t.TempDir()
	if code, out := call(append(uidCorpus, "--out", dir+"/c")...); code != cli.ExitOK {
		t.Fatalf("gen: exit %d\n%s", code, out)
	}
	out := dir + "/out"
	if code, msg := callIn("", "run", "-q", "--measurement-uid", "--in", dir+"/c", "--out", out); code != cli.ExitOK {
		t.Fatalf("run: exit %d\n%s", code, msg)
	}
	rows, uids, yaml := 0, 0, 0
	files, _ := filepath.Glob(out + "/measurements/*.parquet")
	for _, f := range files {
		ms, err := parquetfile.ReadMeasurementIDs(t.Context(), store.Local(out), "measurements/"+filepath.Base(f))
		testutil.Check(t, err)
		for _, m := range ms {
			key := m.Textname + " " + strconv.Itoa(int(m.Ndx))
			w, ok := want[key]
			if !ok {
				t.Fatalf("%s: not in OONI's", key)
			}
			uid := "-"
			if m.MeasurementUID != nil {
				uid = *m.MeasurementUID
			}
			switch {
			case m.ContentHash != w[1]:
				t.Errorf("%s: content_hash %s, OONI's %s", key, m.ContentHash, w[1])
			case strings.HasSuffix(m.Textname, ".json") && uid != w[0]:
				t.Errorf("%s: measurement_uid %s, OONI's %s", key, uid, w[0])
			case strings.HasSuffix(m.Textname, ".yaml"):
				yaml++
				if uid != "-" {
					t.Errorf("%s: a YAML measurement with a measurement_uid, %s", key, uid)
				}
			}
			if uid != "-" {
				uids++
			}
			rows++
		}
	}
	if rows != len(want) || uids < 1000 || yaml < 500 {
		t.Errorf("%d rows (%d with a uid, %d of YAML reports), OONI has %d", rows, uids, yaml, len(want))
	}
	if code, msg := callIn("", "verify", out); code != cli.ExitOK {
		t.Errorf("verify: exit %d\n%s", code, msg)
	}
}
