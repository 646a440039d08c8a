package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/backfill-dev/backfill/internal/cli"
	"github.com/backfill-dev/backfill/internal/pgtest"
	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/pipeline/deadletter"
	"github.com/backfill-dev/backfill/pipeline/sink/parquetfile"
)

// The full-scale corpus as autoclaved indexes, at about 1/550 (of every
// 1,500 of its 2,026 buckets, the first 2 in a row: 4 buckets of 2012 and
// 2017, about 270,000 measurements; make bench-fullscale runs it whole, as
// docs/full-scale.md does):
// run --from-index gives every measurement of the manifest its ID and no
// other; 1,000 IDs drawn at random equal backfill ooid's of their textname
// and ndx; and the collision verdicts equal audit's on the same manifest,
// at the 20-bit offset where it finds the most pairs, and under a 24-bit
// keyed scheme from keysearch. backfill verify proves each output. Under
// the 20-bit scheme the corpus also goes into PostgreSQL, bucket by bucket
// on two connections, and the schema holds the Parquet output's ID set:
// adjacent buckets, as a user's archive has them, where a bucket's reports
// of the day before, and those uploaded again, go among the rows of the
// buckets before.
func TestOONI2018Indexes_Sample(t *testing.T) {
	t.Parallel()
	skipUnderRace(t)
	dir := t.TempDir()
	ix := filepath.Join(dir, "ix")
	if code, out := call("gen", "--profile", "ooni2018", "--format", "autoclaved", "--index-only", "--every", "1500", "--run", "2", "--out", ix, "-q"); code != 0 {
		t.Fatalf("gen: exit %d\n%s", code, out)
	}
	manifest := filepath.Join(ix, "manifest.tsv")
	want, total := readManifest(t, manifest)
	if len(want) < 5000 || total < 200_000 {
		t.Fatalf("the 1/550 manifest holds %d reports, %d measurements", len(want), total)
	}
	if n := uploadedAgain(want); n == 0 {
		t.Fatal("no report of the manifest is in two of its buckets: the runs of adjacent buckets are not there")
	}

	// Every measurement of the manifest, and only those.
	out := filepath.Join(dir, "out")
	code, js := call("run", "--in", ix, "--from-index", "-q", "--json", "--out", out)
	var sum struct {
		Reports, Measurements, Rejects int64
		Notices                        map[string]int64 `json:"notices_by_reason"`
	}
	if err := json.Unmarshal([]byte(js), &sum); code != cli.ExitOK || err != nil {
		t.Fatalf("run: exit %d, %v\n%s", code, err, js)
	}
	if sum.Reports != int64(len(want)) || sum.Measurements != total || sum.Rejects != 0 {
		t.Errorf("run: %d reports, %d measurements, %d rejects; the manifest has %d and %d", sum.Reports, sum.Measurements, sum.Rejects, len(want), total)
	}
	if len(sum.Notices) != 1 || sum.Notices[deadletter.MissingContainer] == 0 {
		t.Errorf("notices %v: want one missing_container per data file, nothing else", sum.Notices)
	}
	rows := readAllMeasurements(t, out)
	seen := map[string]int32{}
	ids := make(map[int64]bool, len(rows))
	for _, r := range rows {
		seen[r.Textname]++
		if ids[r.OOID] {
			t.Fatalf("ID %016x given twice (%s %d)", uint64(r.OOID), r.Textname, r.Ndx)
		}
		ids[r.OOID] = true
	}
	if int64(len(rows)) != total || len(seen) != len(want) {
		t.Fatalf("%d rows of %d reports, want %d of %d", len(rows), len(seen), total, len(want))
	}
	for name, n := range seen {
		if uint32(n) != want[name] {
			t.Fatalf("%s: %d rows, the manifest says %d", name, n, want[name])
		}
	}

	// A random sample, against backfill ooid.
	rng := rand.New(rand.NewPCG(1, 2))
	var in strings.Builder
	var sample []parquetfile.Measurement
	for range 1000 {
		r := rows[rng.IntN(len(rows))]
		sample = append(sample, r)
		fmt.Fprintf(&in, "%s\t%d\n", r.Textname, r.Ndx)
	}
	code, got := callIn(in.String(), "ooid", "-")
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	if code != 0 || len(lines) != len(sample) {
		t.Fatalf("ooid: exit %d, %d lines for %d", code, len(lines), len(sample))
	}
	for i, r := range sample {
		if want := fmt.Sprintf("%016x\t%s\t%d", uint64(r.OOID), r.Textname, r.Ndx); lines[i] != want {
			t.Fatalf("row %d: the run wrote %s, backfill ooid says %s", i, want, lines[i])
		}
	}

	// The verdicts: where audit finds the most pairs at 20 bits.
	code, a := call("audit", "--json", "--counter-bits", "20", "--sha1-offset", "all", "--pairs", "1000", manifest)
	var aud struct{ Results []auditResult }
	if err := json.Unmarshal([]byte(a), &aud); code != 0 || err != nil {
		t.Fatalf("audit: exit %d, %v\n%s", code, err, a)
	}
	best := slices.MaxFunc(aud.Results, func(x, y auditResult) int { return len(x.Pairs) - len(y.Pairs) })
	if len(best.Pairs) == 0 {
		t.Fatal("audit finds no pair at 20 bits at any offset: the verdicts would not be tested")
	}
	var losers []string
	for _, p := range best.Pairs {
		losers = append(losers, max(p.A, p.B)) // the textname that sorts first keeps its IDs
	}
	narrow := []string{"--counter-bits", "20", "--sha1-offset", strconv.Itoa(best.Offset)}
	checkVerdicts(t, ix, filepath.Join(dir, "narrow"), losers, narrow...)
	dsn := pgtest.NewDatabase(t)
	if code, out := call(append([]string{"run", "--in", ix, "--from-index", "-q", "--sink", "postgres", "--create-schema", "--dsn", dsn}, narrow...)...); code != cli.ExitRejects {
		t.Fatalf("run --sink postgres %v: exit %d\n%s", narrow, code, out)
	}

	// A 24-bit keyed scheme: keysearch finds one without a collision, and
	// the run under it agrees.
	scheme := filepath.Join(dir, "scheme.txt")
	if code, out := call("keysearch", "--counter-bits", "24", "--out", scheme, manifest); code != 0 {
		t.Fatalf("keysearch: exit %d\n%s", code, out)
	}
	checkVerdicts(t, ix, filepath.Join(dir, "keyed"), nil, "--scheme", scheme)

	// verify proves each output from itself, and complete against the
	// indexes; a keyed one with its scheme file only.
	digests := map[string]string{}
	for _, v := range [][]string{{out}, {filepath.Join(dir, "narrow")}, {"--scheme", scheme, filepath.Join(dir, "keyed")}, {"--sink", "postgres", "--dsn", dsn}} {
		code, js := call(append([]string{"verify", "--json", "--in", ix, "--from-index"}, v...)...)
		var res struct {
			Measurements int64
			Rejected     int64 `json:"collision_losers"`
			Digest       string
		}
		if err := json.Unmarshal([]byte(js), &res); code != 0 || err != nil || res.Measurements+res.Rejected == 0 || res.Digest == "" {
			t.Errorf("verify %v: exit %d, %v\n%s", v, code, err, js)
		}
		digests[v[0]] = res.Digest
	}
	if pq, pg := digests[filepath.Join(dir, "narrow")], digests["--sink"]; pq != pg {
		t.Errorf("under %v the Parquet output's digest is %s, the schema's %s", narrow, pq, pg)
	}
	if code, o := callIn("", "verify", filepath.Join(dir, "keyed")); code != 1 || !strings.Contains(o, "--scheme FILE") {
		t.Errorf("verify of a keyed output without its scheme file: exit %d\n%s", code, o)
	}
}

// uploadedAgain counts the report files of a manifest that are in more
// than one of its buckets.
func uploadedAgain(manifest map[string]uint32) int {
	seen, again := map[string]bool{}, 0
	for name := range manifest {
		base := name[strings.IndexByte(name, '/')+1:]
		if seen[base] {
			again++
		}
		seen[base] = true
	}
	return again
}

// auditResult is one result of audit --json.
type auditResult struct {
	Offset int `json:"sha1_offset"`
	Pairs  []struct{ A, B string }
}

// checkVerdicts runs --from-index over ix with the scheme flags into out,
// and checks that the reports it rejects as collision losers are losers.
func checkVerdicts(t *testing.T, ix, out string, losers []string, scheme ...string) {
	t.Helper()
	code, js := call(append([]string{"run", "--in", ix, "--from-index", "-q", "--json", "--out", out}, scheme...)...)
	if code != cli.ExitOK && code != cli.ExitRejects {
		t.Fatalf("run %v: exit %d\n%s", scheme, code, js)
	}
	var got []string
	files, _ := filepath.Glob(filepath.Join(out, "dead-letters", "*.jsonl"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(string(data)) {
			var d deadletter.Record
			if err := json.Unmarshal([]byte(line), &d); err != nil {
				t.Fatal(err)
			}
			if d.Reason == deadletter.Collision {
				got = append(got, d.Textname)
			}
		}
	}
	slices.Sort(got)
	slices.Sort(losers)
	losers = slices.Compact(losers)
	if !slices.Equal(got, losers) {
		t.Errorf("run %v rejects %v; audit's pairs make %v the losers", scheme, got, losers)
	}
}

// readManifest reads TEXTNAME<TAB>N lines.
func readManifest(t *testing.T, path string) (map[string]uint32, int64) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m := map[string]uint32{}
	var total int64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, n, _ := strings.Cut(sc.Text(), "\t")
		v, err := strconv.ParseUint(n, 10, 32)
		if err != nil {
			t.Fatalf("manifest line %q", sc.Text())
		}
		m[name] = uint32(v)
		total += int64(v)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return m, total
}

// readAllMeasurements reads every measurement row of a Parquet output.
func readAllMeasurements(t *testing.T, out string) []parquetfile.Measurement {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(out, "measurements", "*.parquet"))
	var rows []parquetfile.Measurement
	for _, f := range files {
		ms, err := parquetfile.ReadMeasurements(t.Context(), store.Local(out), "measurements/"+filepath.Base(f))
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, ms...)
	}
	return rows
}
