package ooniuid_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/backfill-dev/backfill/gen/uidfuzz"
	"github.com/backfill-dev/backfill/internal/testutil"
	"github.com/backfill-dev/backfill/pipeline/deadletter"
	"github.com/backfill-dev/backfill/pipeline/reader/report"
)

var (
	oracle     = flag.String("uid.oracle", "", "run OONI's own code, the oracle script at `PATH` (it reads RAW/<bucket>/<basename> and prints textname, ndx, uid, hash), over freshly generated reports")
	oracleCats = flag.String("uid.cats", strings.Join(uidfuzz.Categories, ","), "with -uid.oracle: the categories of reports")
	oracleSeed = flag.Uint64("uid.seed", 1, "with -uid.oracle: the generator's seed")
	oracleN    = flag.Int("uid.reports", 2000, "with -uid.oracle: how many reports")
)

// The categories the short pass generates (every one), and the golden
// file OONI's code made of them (testdata/diff/golden.tsv: the oracle over
// uidfuzz.Generate(diffSeed, diffReports, diffCats)).
var diffCats = uidfuzz.Categories

const (
	diffSeed    = 1
	diffReports = 280
)

// oracleRow is a measurement as OONI's code gives it: its ndx (a JSON
// line's index, a YAML document's among those autoclaving counts), its
// uid ("-" for none) and its content hash.
type oracleRow struct {
	ndx       int
	uid, hash string
}

// The tool's measurement_uids agree with OONI's own code over generated
// reports with the oddities real uploads carry: row by row (a JSON row
// whose document is one line is that line, a YAML row is the document of
// its ndx) and uid by uid (every uid OONI gives is on a row or listed in
// a dead letter, and no other). The short pass reads what OONI's code
// gave for a fixed set (testdata/diff); with -uid.oracle (make uid-diff)
// the oracle runs over reports generated afresh, of every category.
func TestDifferential(t *testing.T) {
	if *oracle == "" {
		reports, err := uidfuzz.Generate(diffSeed, diffReports, diffCats)
		testutil.Check(t, err)
		want := readOracle(t, testutil.Must(os.ReadFile("testdata/diff/golden.tsv")))
		if len(want) < diffReports*3/4 {
			t.Fatalf("the golden file has %d of the %d reports", len(want), diffReports)
		}
		for cat, ds := range differences(t, reports, want) {
			t.Errorf("%s: %d disagreements, the first: %s", cat, len(ds), ds[0])
		}
		return
	}
	reports, err := uidfuzz.Generate(*oracleSeed, *oracleN, strings.Split(*oracleCats, ","))
	testutil.Check(t, err)
	raw := t.TempDir()
	for _, r := range reports {
		p := filepath.Join(raw, filepath.FromSlash(r.Textname))
		testutil.Check(t, os.MkdirAll(filepath.Dir(p), 0o755))
		testutil.Check(t, os.WriteFile(p, r.Raw, 0o644))
	}
	cmd := exec.Command("/usr/bin/python3", *oracle, raw)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the oracle: %v\n%s", err, stderr.String())
	}
	if dir := os.Getenv("UID_DIFF_GOLDEN"); dir != "" {
		testutil.Check(t, os.WriteFile(filepath.Join(dir, "golden.tsv"), out, 0o644))
	}
	ds := differences(t, reports, readOracle(t, out))
	total := 0
	for _, cat := range uidfuzz.Categories {
		if len(ds[cat]) > 0 {
			t.Logf("%s: %d disagreements; the first %d:\n  %s", cat, len(ds[cat]), min(5, len(ds[cat])), strings.Join(ds[cat][:min(5, len(ds[cat]))], "\n  "))
			total += len(ds[cat])
		}
	}
	if total > 0 {
		t.Errorf("%d disagreements with OONI's code over %d reports (seed %d)", total, len(reports), *oracleSeed)
	}
}

func readOracle(t *testing.T, out []byte) map[string][]oracleRow {
	rows := map[string][]oracleRow{}
	for line := range strings.Lines(string(out)) {
		f := strings.Split(strings.TrimSuffix(line, "\n"), "\t")
		if len(f) != 4 {
			t.Fatalf("oracle line %q", line)
		}
		ndx, err := strconv.Atoi(f[1])
		testutil.Check(t, err)
		rows[f[0]] = append(rows[f[0]], oracleRow{ndx, f[2], f[3]})
	}
	return rows
}

// differences compares the reader's measurements of each report with
// OONI's, and returns the disagreements by category.
func differences(t *testing.T, reports []uidfuzz.Report, want map[string][]oracleRow) map[string][]string {
	rr := report.NewReader()
	rr.UIDs = true
	out := map[string][]string{}
	for _, r := range reports {
		kind := report.KindOf(r.Textname)
		byNdx := map[int]oracleRow{}
		var oonis, got []string
		for _, o := range want[r.Textname] {
			byNdx[o.ndx] = o
			if o.uid != "-" {
				oonis = append(oonis, o.uid)
			}
		}
		var diffs []string
		_, err := rr.Read(bytes.NewReader(r.Raw), kind, func(m report.Measurement) {
			uid := m.ID.UID
			if uid != "" {
				got = append(got, uid)
			} else {
				uid = "-"
			}
			blob := r.Raw[m.Offset : m.Offset+m.Size]
			at := int(m.Ndx)
			if kind == report.KindJSON {
				if bytes.IndexByte(blob, '\n') >= 0 {
					if uid != "-" {
						diffs = append(diffs, fmt.Sprintf("#%d spans lines and carries the uid %s", m.Ndx, uid))
					}
					return
				}
				at = bytes.Count(r.Raw[:m.Offset], []byte("\n"))
			}
			o, ok := byNdx[at]
			switch {
			case !ok:
				diffs = append(diffs, fmt.Sprintf("#%d: OONI has no measurement %d", m.Ndx, at))
			case o.hash != m.ID.Hash.String():
				diffs = append(diffs, fmt.Sprintf("#%d: hash %s, OONI's %s", m.Ndx, m.ID.Hash, o.hash))
			case o.uid != uid:
				diffs = append(diffs, fmt.Sprintf("#%d: uid %s, OONI's %s", m.Ndx, uid, o.uid))
			}
		}, func(d deadletter.Record) {
			got = append(got, d.MeasurementUIDs...)
		})
		if err != nil {
			t.Fatalf("%s: %v", r.Textname, err)
		}
		slices.Sort(got)
		slices.Sort(oonis)
		if !slices.Equal(got, oonis) {
			diffs = append(diffs, fmt.Sprintf("the rows and records carry %d uids, OONI's code gives %d, not the same", len(got), len(oonis)))
		}
		if len(diffs) > 0 {
			out[r.Category] = append(out[r.Category], fmt.Sprintf("%s: %s", r.Textname, strings.Join(diffs, "; ")))
		}
	}
	return out
}
