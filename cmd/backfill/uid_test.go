package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/backfill-dev/backfill/internal/cli"
	"github.com/backfill-dev/backfill/internal/pgtest"
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

// uidRun generates the corpus of uidCorpus in dir/c and, with out set,
// runs it with --measurement-uid into dir/out; it returns dir.
func uidRun(t *testing.T, out bool) string {
	t.Helper()
	dir := t.TempDir()
	if code, msg := call(append(uidCorpus, "--out", dir+"/c")...); code != cli.ExitOK {
		t.Fatalf("gen: exit %d\n%s", code, msg)
	}
	if out {
		if code, msg := callIn("", "run", "-q", "--measurement-uid", "--in", dir+"/c", "--out", dir+"/out"); code != cli.ExitOK {
			t.Fatalf("run: exit %d\n%s", code, msg)
		}
	}
	return dir
}

// run --measurement-uid gives every measurement row the content hash
// OONI's code computes from its raw bytes and OONI's measurement_uid,
// JSON and YAML reports alike; the report manifests list both for every
// measurement.
// Compared row by row with OONI's own code over the same reports.
func TestRun_MeasurementUIDAgainstOONI(t *testing.T) {
	t.Parallel()
	want := uidGolden(t)
	dir := uidRun(t, true)
	out := dir + "/out"
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
			uid, hash := "-", "-"
			if m.MeasurementUID != nil {
				uid = *m.MeasurementUID
			}
			if m.ContentHash != nil {
				hash = *m.ContentHash
			}
			switch {
			case hash != w[1]:
				t.Errorf("%s: content_hash %s, OONI's %s", key, hash, w[1])
			case uid != w[0]:
				t.Errorf("%s: measurement_uid %s, OONI's %s", key, uid, w[0])
			}
			if strings.HasSuffix(m.Textname, ".yaml") {
				yaml++
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
	if code, msg := callIn("", "verify", "--in", dir+"/c", out); code != cli.ExitOK {
		t.Errorf("verify --in: exit %d\n%s", code, msg)
	}
}

// census finds the groups of measurements with equal raw bytes that a
// brute force over OONI's own hashes of every measurement finds, names
// each duplicate against its group's first in (textname, ndx) order with
// the right kind, and writes the pairs with their rows' OOIDs.
func TestCensus_AgainstOONIHashes(t *testing.T) {
	t.Parallel()
	want := uidGolden(t)
	dir := uidRun(t, true)
	out := dir + "/out"
	// The brute force, over OONI's hashes.
	type m struct {
		textname string
		ndx      int
	}
	groups := map[string][]m{}
	for key, w := range want {
		tn, ndx, _ := strings.Cut(key, " ")
		n, _ := strconv.Atoi(ndx)
		groups[w[1]] = append(groups[w[1]], m{tn, n})
	}
	wantPairs := map[string]bool{}
	var nGroups, nDup int64
	kinds := map[string]int64{"same_report": 0, "retry": 0, "other": 0}
	for _, g := range groups {
		if len(g) < 2 {
			continue
		}
		nGroups++
		sort.Slice(g, func(i, j int) bool {
			return g[i].textname < g[j].textname || g[i].textname == g[j].textname && g[i].ndx < g[j].ndx
		})
		for _, d := range g[1:] {
			kind := "other"
			switch {
			case d.textname == g[0].textname:
				kind = "same_report"
			case filepath.Base(d.textname) == filepath.Base(g[0].textname):
				kind = "retry"
			}
			kinds[kind]++
			nDup++
			wantPairs[fmt.Sprintf("%s,%s,%d,%s,%d", kind, d.textname, d.ndx, g[0].textname, g[0].ndx)] = true
		}
	}
	if nGroups < 5 || nDup < 100 {
		t.Fatalf("%d groups, %d duplicates: the corpus proves nothing", nGroups, nDup)
	}
	pairs := dir + "/pairs.csv"
	code, msg := callIn("", "census", "--json", "--pairs", pairs, out)
	if code != cli.ExitOK {
		t.Fatalf("census: exit %d\n%s", code, msg)
	}
	var res struct {
		Groups, Duplicates, Measurements int64
		ByKind                           map[string]int64 `json:"by_kind"`
	}
	testutil.Check(t, json.Unmarshal([]byte(msg), &res))
	if res.Groups != nGroups || res.Duplicates != nDup || res.Measurements != int64(len(want)) || !maps.Equal(res.ByKind, kinds) {
		t.Errorf("census %+v; the brute force: %d groups, %d duplicates, %v, %d measurements", res, nGroups, nDup, kinds, len(want))
	}
	// The pairs, with the OOIDs of their rows.
	ooids := map[string]string{}
	files, _ := filepath.Glob(out + "/measurements/*.parquet")
	for _, f := range files {
		ms, err := parquetfile.ReadMeasurements(t.Context(), store.Local(out), "measurements/"+filepath.Base(f))
		testutil.Check(t, err)
		for _, r := range ms {
			ooids[r.Textname+","+strconv.Itoa(int(r.Ndx))] = strconv.FormatInt(r.OOID, 10)
		}
	}
	lines := strings.Split(strings.TrimSpace(string(testutil.Must(os.ReadFile(pairs)))), "\n")
	if lines[0] != "duplicate_ooid,first_ooid,kind,duplicate_textname,duplicate_ndx,first_textname,first_ndx" || int64(len(lines)-1) != nDup {
		t.Fatalf("pairs: header %q, %d lines, want %d", lines[0], len(lines)-1, nDup)
	}
	for _, l := range lines[1:] {
		f := strings.Split(l, ",")
		if !wantPairs[strings.Join(f[2:], ",")] || f[0] != ooids[f[3]+","+f[4]] || f[1] != ooids[f[5]+","+f[6]] {
			t.Errorf("pair %q: not the brute force's, or not its rows' OOIDs", l)
		}
	}
}

// A sharded job's output carries OONI's identities as one run's does:
// mapped with --measurement-uid, checked and loaded, into Parquet or
// PostgreSQL, its census is the one-machine run's, and verify --in
// computes its identities again.
func TestCensus_ShardedEqualsOneRun(t *testing.T) {
	t.Parallel()
	dir := uidRun(t, false)
	if code, msg := callIn("", "run", "-q", "--measurement-uid", "--in", dir+"/c", "--out", dir+"/one"); code != cli.ExitOK {
		t.Fatalf("run: exit %d\n%s", code, msg)
	}
	plan, job := dir+"/plan.json", dir+"/job"
	steps := [][]string{{"plan", "--in", dir + "/c", "--shards", "2", "--out", plan}}
	for i := range 2 {
		steps = append(steps, []string{"run", "-q", "--measurement-uid", "--plan", plan, "--shard", strconv.Itoa(i), "--out", job})
	}
	steps = append(steps, []string{"check", "--plan", plan, "--out", job, "--rejects-exit", "0"})
	for i := range 2 {
		steps = append(steps, []string{"load", "--plan", plan, "--shard", strconv.Itoa(i), "--out", job})
	}
	for _, s := range steps {
		if code, msg := callIn("", s...); code != cli.ExitOK {
			t.Fatalf("%v: exit %d\n%s", s, code, msg)
		}
	}
	_, one := callIn("", "census", "--json", dir+"/one")
	code, sharded := callIn("", "census", "--json", job)
	if code != cli.ExitOK || one != sharded || !strings.Contains(one, `"groups"`) {
		t.Errorf("census of the sharded job (exit %d):\n%s\nof one run:\n%s", code, sharded, one)
	}
	dsn := pgtest.NewDatabase(t)
	for i := range 2 {
		if code, msg := callIn("", "load", "--plan", plan, "--shard", strconv.Itoa(i), "--out", job, "--sink", "postgres", "--dsn", dsn, "--create-schema"); code != cli.ExitOK {
			t.Fatalf("load --sink postgres, shard %d: exit %d\n%s", i, code, msg)
		}
	}
	if pg := censusJSON(t, "--sink", "postgres", "--dsn", dsn); pg != one {
		t.Errorf("census of the sharded job loaded into PostgreSQL:\n%s\nof one run:\n%s", pg, one)
	}
	if code, msg := callIn("", "verify", "--sink", "postgres", "--dsn", dsn, "--in", dir+"/c"); code != cli.ExitOK {
		t.Errorf("verify --in of the sharded job in PostgreSQL: exit %d\n%s", code, msg)
	}
}

// Into PostgreSQL, per bucket and --bulk, the measurement_ids view gives
// every row OONI's measurement_uid and content_hash, as OONI's own code
// computes them, and census --sink postgres is the Parquet output's.
func TestRun_MeasurementUIDPostgres(t *testing.T) {
	t.Parallel()
	want := uidGolden(t)
	dir := uidRun(t, false)
	var censuses []string
	for _, bulk := range []bool{false, true} {
		dsn := pgtest.NewDatabase(t)
		args := []string{"run", "-q", "--measurement-uid", "--in", dir + "/c", "--sink", "postgres", "--dsn", dsn, "--create-schema"}
		if bulk {
			// The builds at the end in one process, with memory of their own.
			args = append(args, "--bulk", "--build-workers", "0", "--build-memory", "100MiB")
		}
		if code, msg := callIn("", args...); code != cli.ExitOK {
			t.Fatalf("run (bulk %v): exit %d\n%s", bulk, code, msg)
		}
		c := pgtest.Connect(t, dsn)
		rows, err := c.Query(t.Context(), `SELECT textname, ndx, coalesce(measurement_uid, '-'), content_hash FROM backfill.measurement_ids`)
		testutil.Check(t, err)
		n := 0
		for rows.Next() {
			var tn, uid, hash string
			var ndx int
			testutil.Check(t, rows.Scan(&tn, &ndx, &uid, &hash))
			if w := want[tn+" "+strconv.Itoa(ndx)]; w != [2]string{uid, hash} {
				t.Errorf("bulk %v: %s %d: %s %s, OONI's %v", bulk, tn, ndx, uid, hash, w)
			}
			n++
		}
		testutil.Check(t, rows.Err())
		if n != len(want) {
			t.Errorf("bulk %v: %d rows, OONI has %d", bulk, n, len(want))
		}
		censuses = append(censuses, censusJSON(t, "--sink", "postgres", "--dsn", dsn))
		// verify --in computes the identities again from the input: a
		// changed hash is named.
		if code, msg := callIn("", "verify", "--sink", "postgres", "--dsn", dsn, "--in", dir+"/c"); code != cli.ExitOK {
			t.Errorf("bulk %v: verify --in: exit %d\n%s", bulk, code, msg)
		}
		pgtest.Exec(t, dsn, `UPDATE backfill.measurement_identities SET content_hash = '\x000000000000000000000000000000' WHERE (bucket, report, ndx) = (SELECT bucket, report, ndx FROM backfill.measurement_identities ORDER BY 1, 2, 3 LIMIT 1)`)
		if code, msg := callIn("", "verify", "--sink", "postgres", "--dsn", dsn, "--in", dir+"/c"); code != cli.ExitFailure || !strings.Contains(msg, "content_hash 000000000000000000000000000000") {
			t.Errorf("bulk %v: verify --in of a changed hash: exit %d\n%s", bulk, code, msg)
		}
	}
	// The census of either schema is the census of the same run to Parquet.
	if code, msg := callIn("", "run", "-q", "--measurement-uid", "--in", dir+"/c", "--out", dir+"/out"); code != cli.ExitOK {
		t.Fatalf("run: exit %d\n%s", code, msg)
	}
	parquet := censusJSON(t, dir+"/out")
	for i, c := range censuses {
		if c != parquet || !strings.Contains(c, `"duplicates"`) {
			t.Errorf("census of schema %d:\n%s\nof the Parquet output:\n%s", i, c, parquet)
		}
	}
}

func censusJSON(t *testing.T, args ...string) string {
	t.Helper()
	code, out := callIn("", append([]string{"census", "--json"}, args...)...)
	if code != cli.ExitOK {
		t.Fatalf("census %v: exit %d\n%s", args, code, out)
	}
	return out
}

// Over autoclaved buckets, run --measurement-uid takes each measurement's
// raw bytes from the canned form named by --canned: every row gets the
// identity OONI's code computed from the cans, and verify --in --canned
// computes them again. Without --canned, or with --from-index, it is
// refused. The reports of a canned file that is not there get no
// identity (null content_hash and measurement_uid, in Parquet and in
// PostgreSQL), each with a canned_mismatch record that says so, and the
// census counts them apart.
func TestRun_MeasurementUIDAutoclaved(t *testing.T) {
	t.Parallel()
	want := uidGolden(t)
	dir := t.TempDir()
	if code, msg := call(append(uidCorpus, "--format", "both", "--out", dir+"/c")...); code != cli.ExitOK {
		t.Fatalf("gen: exit %d\n%s", code, msg)
	}
	auto, canned := dir+"/c/autoclaved", dir+"/c/canned"
	for _, refused := range [][]string{
		{"--in", auto, "--format", "autoclaved"},
		{"--in", auto, "--canned", canned, "--from-index"},
	} {
		code, msg := callIn("", append([]string{"run", "-q", "--measurement-uid", "--out", dir + "/no"}, refused...)...)
		if code != cli.ExitUsage || !strings.Contains(msg, "raw bytes") {
			t.Errorf("run %v: exit %d\n%s", refused, code, msg)
		}
	}
	if code, msg := callIn("", "run", "-q", "--measurement-uid", "--in", auto, "--out", dir+"/no"); code != cli.ExitFailure || !strings.Contains(msg, "--canned DIR") {
		t.Errorf("run over autoclaved buckets without --canned: exit %d\n%s", code, msg)
	}

	out := dir + "/out"
	if code, msg := callIn("", "run", "-q", "--measurement-uid", "--in", auto, "--canned", canned, "--out", out); code != cli.ExitOK {
		t.Fatalf("run --canned: exit %d\n%s", code, msg)
	}
	rows := uidRows(t, out)
	if len(rows) != len(want) {
		t.Fatalf("%d rows, OONI has %d", len(rows), len(want))
	}
	for key, got := range rows {
		if got != want[key] {
			t.Errorf("%s: %v, OONI's %v", key, got, want[key])
		}
	}
	if code, msg := callIn("", "verify", "--in", auto, "--canned", canned, out); code != cli.ExitOK {
		t.Errorf("verify --in --canned: exit %d\n%s", code, msg)
	}
	if code, msg := callIn("", "verify", "--in", auto, out); code == cli.ExitOK {
		t.Errorf("verify --in without --canned: exit 0\n%s", msg)
	}

	// A canned file that is not there: its reports get no identity.
	gone, _ := filepath.Glob(canned + "/*/dns_consistency.0.tar.lz4")
	testutil.Check(t, os.Remove(gone[0]))
	bucket := filepath.Base(filepath.Dir(gone[0]))
	out2 := dir + "/out2"
	if code, msg := callIn("", "run", "-q", "--measurement-uid", "--in", auto, "--canned", canned, "--out", out2); code != cli.ExitOK && code != cli.ExitRejects {
		t.Fatalf("run --canned, a canned file gone: exit %d\n%s", code, msg)
	}
	unhashed := 0
	for key, got := range uidRows(t, out2) {
		lost := strings.Contains(key, "dns_consistency") && strings.HasPrefix(key, bucket)
		switch {
		case lost && got != [2]string{"-", "-"}:
			t.Errorf("%s: %v, where the canned file is gone", key, got)
		case !lost && got != want[key]:
			t.Errorf("%s: %v, OONI's %v", key, got, want[key])
		}
		if lost {
			unhashed++
		}
	}
	dead := string(testutil.Must(os.ReadFile(filepath.Join(out2, "dead-letters", bucket+".jsonl"))))
	if unhashed == 0 || !strings.Contains(dead, "canned_mismatch") || !strings.Contains(dead, "no content_hash nor measurement_uid") {
		t.Errorf("%d rows without identity; dead letters:\n%s", unhashed, dead)
	}
	var res struct{ Measurements, Unhashed int }
	testutil.Check(t, json.Unmarshal([]byte(censusJSON(t, out2)), &res))
	if res.Unhashed != unhashed || res.Measurements != len(want) {
		t.Errorf("census: %+v; want %d unhashed of %d", res, unhashed, len(want))
	}
	dsn := pgtest.NewDatabase(t)
	if code, msg := callIn("", "run", "-q", "--measurement-uid", "--in", auto, "--canned", canned, "--sink", "postgres", "--dsn", dsn, "--create-schema"); code != cli.ExitOK && code != cli.ExitRejects {
		t.Fatalf("run --canned into PostgreSQL: exit %d\n%s", code, msg)
	}
	var nulls, uids int
	testutil.Check(t, pgtest.Connect(t, dsn).QueryRow(t.Context(), `SELECT count(*) FILTER (WHERE content_hash IS NULL), count(measurement_uid) FROM backfill.measurement_ids`).Scan(&nulls, &uids))
	if nulls != unhashed {
		t.Errorf("PostgreSQL: %d rows without content_hash; Parquet has %d", nulls, unhashed)
	}
	if code, msg := callIn("", "verify", "--sink", "postgres", "--dsn", dsn, "--in", auto, "--canned", canned); code != cli.ExitOK {
		t.Errorf("verify --sink postgres --in --canned: exit %d\n%s", code, msg)
	}
}

// uidRows are the identities of an output's measurement rows, by
// "textname ndx": measurement_uid and content_hash, "-" for null.
func uidRows(t *testing.T, out string) map[string][2]string {
	t.Helper()
	rows := map[string][2]string{}
	files, _ := filepath.Glob(out + "/measurements/*.parquet")
	for _, f := range files {
		ms, err := parquetfile.ReadMeasurementIDs(t.Context(), store.Local(out), "measurements/"+filepath.Base(f))
		testutil.Check(t, err)
		for _, m := range ms {
			v := [2]string{"-", "-"}
			if m.MeasurementUID != nil {
				v[0] = *m.MeasurementUID
			}
			if m.ContentHash != nil {
				v[1] = *m.ContentHash
			}
			rows[m.Textname+" "+strconv.Itoa(int(m.Ndx))] = v
		}
	}
	return rows
}
