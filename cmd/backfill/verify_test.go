package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/backfill-dev/backfill/internal/pgtest"
	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/internal/testutil"
	"github.com/backfill-dev/backfill/pipeline/sink/parquetfile"
)

// verify passes a run's output, with the digests the server computes
// from the same IDs loaded into PostgreSQL (sha256 over string_agg); and
// each damage of a measurement row (changed, dropped, doubled, moved to
// another ndx) or of a verdict fails it with exit 1, naming the row or
// report.
func TestVerify(t *testing.T) {
	t.Parallel()
	skipUnderRace(t)
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in"), filepath.Join(dir, "out")
	if code, o := call("gen", "--out", in, "--buckets", "2", "--reports", "120", "--time-slots", "3", "--seed", "3", "-q", "--max-template", "1KiB"); code != 0 {
		t.Fatalf("gen: exit %d\n%s", code, o)
	}
	if code, o := call("run", "--in", in, "--counter-bits", "20", "-q", "--out", out); code != 0 && code != 3 {
		t.Fatalf("run: exit %d\n%s", code, o)
	}
	code, js := call("verify", "--json", out)
	var res struct {
		Rejected int `json:"collision_losers"`
		Digest   string
		Buckets  []struct {
			Bucket, Digest string
			Rejected       int `json:"collision_losers"`
		}
	}
	if err := json.Unmarshal([]byte(js), &res); code != 0 || err != nil || len(res.Buckets) != 2 {
		t.Fatalf("verify: exit %d, %v\n%s", code, err, js)
	}
	if res.Rejected == 0 {
		t.Fatal("no rejected report: the verdicts would not be tested")
	}

	// Complete against its input; not against another input, nor when a
	// bucket of the input is missing.
	if code, o := call("verify", "-q", "--in", in, out); code != 0 {
		t.Fatalf("verify --in: exit %d\n%s", code, o)
	}
	other := filepath.Join(dir, "other")
	if code, o := call("gen", "--out", other, "--buckets", "3", "--reports", "120", "--time-slots", "3", "--seed", "4", "-q", "--max-template", "1KiB"); code != 0 {
		t.Fatalf("gen: exit %d\n%s", code, o)
	}
	if code, o := callIn("", "verify", "-q", "--in", other, out); code != 1 || !strings.Contains(o, "the input "+other+" has no such report") {
		t.Errorf("verify --in another input: exit %d\n%s", code, o)
	}
	if err := os.Rename(filepath.Join(other, "2017-06-03"), filepath.Join(in, "2017-06-03")); err != nil {
		t.Fatal(err)
	}
	if code, o := callIn("", "verify", "-q", "--in", in, out); code != 1 || !strings.Contains(o, "bucket 2017-06-03 of the input "+in+" is not among the output's committed buckets") {
		t.Errorf("verify --in an input with one more bucket: exit %d\n%s", code, o)
	}
	if err := os.RemoveAll(filepath.Join(in, "2017-06-03")); err != nil {
		t.Fatal(err)
	}
	if code, o := callIn("", "verify", "--from-index", out); code != 2 || !strings.Contains(o, "--from-index is for --in") {
		t.Errorf("verify --from-index without --in: exit %d\n%s", code, o)
	}

	// The digests, from the server.
	dsn := pgtest.NewDatabase(t)
	if code, o := call("run", "--in", in, "--counter-bits", "20", "-q", "--sink", "postgres", "--create-schema", "--dsn", dsn); code != 0 && code != 3 {
		t.Fatalf("run --sink postgres: exit %d\n%s", code, o)
	}
	c := pgtest.Connect(t, dsn)
	whole := sha256.New()
	for _, b := range res.Buckets {
		var d string
		err := c.QueryRow(context.Background(), `SELECT encode(sha256(convert_to(string_agg(lpad(to_hex(ooid), 16, '0') || E'\n', '' ORDER BY ooid), 'UTF8')), 'hex')
			FROM backfill.measurements WHERE bucket = $1::date`, b.Bucket).Scan(&d)
		if err != nil {
			t.Fatal(err)
		}
		if d != b.Digest {
			t.Errorf("bucket %s: verify's digest %s, the server's %s", b.Bucket, b.Digest, d)
		}
		fmt.Fprintf(whole, "%s %s\n", b.Bucket, d)
	}
	if d := hex.EncodeToString(whole.Sum(nil)); d != res.Digest {
		t.Errorf("output digest %s, from the server's %s", res.Digest, d)
	}

	// The same proof from the schema. Each damage of a copy of it (a row
	// changed, dropped, doubled; a verdict; a report's seq; a bucket
	// no longer committed whose rows are left) fails, naming the table.
	code, pjs := call("verify", "--sink", "postgres", "--dsn", dsn, "--json", "--in", in)
	var pres struct {
		Rejected int `json:"collision_losers"`
		Digest   string
	}
	if err := json.Unmarshal([]byte(pjs), &pres); code != 0 || err != nil || pres.Digest != res.Digest || pres.Rejected != res.Rejected {
		t.Fatalf("verify --sink postgres: exit %d, %v, %+v; the Parquet output's digest is %s\n%s", code, err, pres, res.Digest, pjs)
	}
	first := `(bucket, report, ndx) = (SELECT bucket, report, ndx FROM %[1]s.measurements ORDER BY bucket, report, ndx LIMIT 1)`
	for i, tc := range []struct{ name, sql, want string }{
		{"changed", `UPDATE %[1]s.measurements SET ooid = ooid # 1024 WHERE ` + first, `"{d}"."measurements", the row of bucket ` + res.Buckets[0].Bucket + `, report 0 (` + res.Buckets[0].Bucket + `/`},
		{"dropped", `DELETE FROM %[1]s.measurements WHERE ` + first, "measurement rows, the report has"},
		{"doubled", `INSERT INTO %[1]s.measurements SELECT * FROM %[1]s.measurements WHERE ` + first, "has two rows"},
		{"verdict", `UPDATE %[1]s.reports SET rejected_by = NULL`, "kept, but its IDs overlap"},
		{"seq", `DELETE FROM %[1]s.reports WHERE seq = 1`, "where 1 was due"},
		{"not committed", `UPDATE %[1]s.ledger SET status = 'failed', error = 'x' WHERE bucket = '` + res.Buckets[1].Bucket + `'`, "its bucket is not one of the output's committed buckets"},
	} {
		t.Run("postgres "+tc.name, func(t *testing.T) {
			d := fmt.Sprintf("damaged%d", i)
			if code, o := call("schema", "--dsn", dsn, "--pg-schema", d); code != 0 {
				t.Fatalf("schema: exit %d\n%s", code, o)
			}
			for _, q := range []string{
				`ALTER TABLE %[1]s.measurements DROP CONSTRAINT measurements_pkey`,
				`INSERT INTO %[1]s.ledger SELECT * FROM backfill.ledger`,
				`INSERT INTO %[1]s.reports SELECT * FROM backfill.reports`,
				`INSERT INTO %[1]s.measurements SELECT * FROM backfill.measurements`,
				tc.sql,
			} {
				if _, err := c.Exec(t.Context(), fmt.Sprintf(q, d)); err != nil {
					t.Fatalf("%s: %v", fmt.Sprintf(q, d), err)
				}
			}
			code, o := callIn("", "verify", "--sink", "postgres", "--dsn", dsn, "--pg-schema", d)
			if want := strings.ReplaceAll(tc.want, "{d}", d); code != 1 || !strings.HasPrefix(o, "backfill: verify: ") || !strings.Contains(o, `"`+d+`".`) || !strings.Contains(o, want) {
				t.Errorf("exit %d, %q; want exit 1 naming the table and %q", code, o, want)
			}
		})
	}

	// Damaged copies of the bucket with a rejected report.
	bucket := res.Buckets[0].Bucket
	if res.Buckets[0].Rejected == 0 {
		bucket = res.Buckets[1].Bucket
	}
	rows, err := parquetfile.ReadMeasurements(t.Context(), store.Local(out), "measurements/"+bucket+".parquet")
	if err != nil || len(rows) < 10 {
		t.Fatalf("%d rows, %v", len(rows), err)
	}
	reports, err := parquetfile.ReadReports(t.Context(), store.Local(out), "reports/"+bucket+".parquet")
	if err != nil {
		t.Fatal(err)
	}
	changed := append([]parquetfile.Measurement(nil), rows...)
	changed[7].OOID++
	moved := append([]parquetfile.Measurement(nil), rows...) // row 7 made a second row 8
	if moved[7].Textname != moved[8].Textname {
		t.Fatal("rows 7 and 8 are of two reports")
	}
	moved[7].Ndx, moved[7].OOID = moved[8].Ndx, moved[8].OOID
	kept := append([]parquetfile.Report(nil), reports...)
	for i := range kept {
		kept[i].RejectedBy = ""
	}
	for _, tc := range []struct {
		name    string
		rows    []parquetfile.Measurement
		reports []parquetfile.Report
		want    string
	}{
		{"changed", changed, nil, "row 7 ("},
		{"dropped", append(append([]parquetfile.Measurement(nil), rows[:7]...), rows[8:]...), nil, "measurement rows, the report has"},
		{"doubled", append(append([]parquetfile.Measurement(nil), rows...), rows[7]), nil, "has two rows"},
		{"moved", moved, nil, "has two rows"},
		{"verdict", nil, kept, "kept, but its IDs overlap"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := filepath.Join(t.TempDir(), "out")
			if err := os.CopyFS(bad, os.DirFS(out)); err != nil {
				t.Fatal(err)
			}
			if tc.rows != nil {
				writeParquet(t, filepath.Join(bad, "measurements", bucket+".parquet"), tc.rows)
			}
			if tc.reports != nil {
				writeParquet(t, filepath.Join(bad, "reports", bucket+".parquet"), tc.reports)
			}
			// As it is, the ledger's digests refuse the bucket; resealed
			// (a forger who recomputes them and the counts), the rows
			// themselves fail.
			if code, o := callIn("", "verify", bad); code != 1 || !strings.Contains(o, "is not the file its ledger entry recorded") {
				t.Errorf("unsealed: exit %d, %q; want exit 1 naming the digest", code, o)
			}
			reseal(t, bad, bucket)
			code, o := callIn("", "verify", bad)
			if code != 1 || !strings.Contains(o, "backfill: verify: "+bad+"/measurements/"+bucket+".parquet: ") || !strings.Contains(o, tc.want) {
				t.Errorf("exit %d, %q; want exit 1 naming the file and %q", code, o, tc.want)
			}
		})
	}
}

// reseal rewrites a bucket's ledger entry for its files as they are now:
// their digests, and the reports and measurements its manifest keeps.
func reseal(t *testing.T, out, bucket string) {
	t.Helper()
	path := filepath.Join(out, "ledger", bucket+".json")
	var l parquetfile.Ledger
	testutil.Check(t, json.Unmarshal(testutil.Must(os.ReadFile(path)), &l))
	for name := range l.Files {
		data := testutil.Must(os.ReadFile(filepath.Join(out, name)))
		sum := sha256.Sum256(data)
		l.Files[name] = parquetfile.Digest{Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}
	}
	reports, err := parquetfile.ReadReports(t.Context(), store.Local(out), "reports/"+bucket+".parquet")
	testutil.Check(t, err)
	l.Counts.Reports, l.Counts.Measurements = 0, 0
	for _, r := range reports {
		if r.RejectedBy == "" {
			l.Counts.Reports++
			l.Counts.Measurements += r.N
		}
	}
	testutil.Check(t, os.WriteFile(path, testutil.Must(json.Marshal(l)), 0o644))
}

func writeParquet[T any](t *testing.T, path string, rows []T) {
	t.Helper()
	if err := parquet.WriteFile(path, rows); err != nil {
		t.Fatal(err)
	}
}
