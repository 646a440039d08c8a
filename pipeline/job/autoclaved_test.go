package job_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/backfill-dev/backfill/gen/corpus"
	"github.com/backfill-dev/backfill/gen/corpus/corpustest"
	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/internal/testutil"
	"github.com/backfill-dev/backfill/pipeline/deadletter"
	"github.com/backfill-dev/backfill/pipeline/ingest"
	"github.com/backfill-dev/backfill/pipeline/job"
	"github.com/backfill-dev/backfill/pipeline/ooid"
	"github.com/backfill-dev/backfill/pipeline/reader"
	"github.com/backfill-dev/backfill/pipeline/sink/parquetfile"
)

// genBoth writes a corpus in both forms with every report-level
// corruption kind (the container kinds damage the canned form only, so
// they would make the forms differ).
func genBoth(t testing.TB, buckets, reports int) string {
	t.Helper()
	cfg := damagedConfig(buckets, reports, 256<<10, 0.04)
	cfg.Format = corpus.FormatBoth
	dir := t.TempDir()
	if _, err := corpus.Generate(dir, cfg); err != nil {
		t.Fatal(err)
	}
	return dir
}

type mkey struct {
	textname string
	ndx      int32
}

type outcome struct {
	ids     map[mkey]int64
	dead    []deadletter.Record
	summary job.Summary
}

// runWith runs the job with cfg into a fresh Parquet folder and reads
// back every measurement and dead letter.
func runWith(t testing.TB, cfg job.Config) outcome {
	t.Helper()
	out := t.TempDir()
	s, err := parquetfile.Open(t.Context(), store.Local(out))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cfg.Scheme, cfg.MaxBlob, cfg.Version, cfg.Workers = ooid.DefaultScheme, maxBlob, "test", 2
	sum, err := job.Run(context.Background(), cfg, s)
	if err != nil {
		t.Fatal(err)
	}
	o := outcome{ids: map[mkey]int64{}, summary: sum}
	buckets, _ := ingest.ListBuckets(t.Context(), cfg.In)
	for _, b := range buckets {
		rows, err := parquetfile.ReadMeasurements(t.Context(), store.Local(out), "measurements/"+b+".parquet")
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range rows {
			k := mkey{m.Textname, m.Ndx}
			if _, dup := o.ids[k]; dup {
				t.Fatalf("%s #%d twice", m.Textname, m.Ndx)
			}
			o.ids[k] = m.OOID
		}
		o.dead = append(o.dead, readDeadLetters(t, filepath.Join(out, "dead-letters", b+".jsonl"))...)
	}
	return o
}

func sameIDs(t testing.TB, what string, a, b map[mkey]int64) {
	t.Helper()
	for k, id := range a {
		if got, ok := b[k]; !ok || got != id {
			t.Errorf("%s: %s #%d: %016x against %016x (present %v)", what, k.textname, k.ndx, uint64(id), uint64(got), ok)
			return
		}
	}
	if len(a) != len(b) {
		t.Errorf("%s: %d IDs against %d", what, len(a), len(b))
	}
}

// The canned path, the autoclaved data path and --from-index give the
// identical set of (textname, ndx, OOID), under both ndx policies; the
// IDs are what pipeline/ooid computes; the policies differ exactly by the
// badblobs; and the autoclaved runs record what the autoclaved ground
// truth says.
func TestRun_AutoclavedAgreesWithCanned(t *testing.T) {
	reports := 150
	if testutil.RaceEnabled {
		reports = 40 // eight runs, each on many goroutines: the detector needs them, not the volume
	}
	dir := genBoth(t, 2, reports)
	canned, auto := filepath.Join(dir, "canned"), filepath.Join(dir, "autoclaved")
	truth := corpustest.ReadTruth(t, auto)
	var badblobs int
	for _, tr := range truth {
		badblobs += tr.Badblobs
	}
	if badblobs == 0 {
		t.Fatal("the corpus has no badblob")
	}
	byPolicy := map[reader.Ndx]map[mkey]int64{}
	for _, ndx := range []reader.Ndx{reader.NdxBlobs, reader.NdxDatums} {
		c := runWith(t, job.Config{In: store.Local(canned), Ndx: ndx})
		d := runWith(t, job.Config{In: store.Local(auto), Ndx: ndx, VerifySHA1: true})
		x := runWith(t, job.Config{In: store.Local(auto), Ndx: ndx, FromIndex: true})
		forced := runWith(t, job.Config{In: store.Local(auto), Ndx: ndx, Format: reader.FormatAutoclaved})
		sameIDs(t, string(ndx)+": canned against the data path", c.ids, d.ids)
		sameIDs(t, string(ndx)+": data path against --from-index", d.ids, x.ids)
		sameIDs(t, string(ndx)+": auto against --format autoclaved", d.ids, forced.ids)
		byPolicy[ndx] = x.ids
		t.Logf("%s: %d IDs; dead letters: canned %v, autoclaved %v", ndx, len(x.ids), c.summary.Reasons, x.summary.Reasons)
		for k, id := range x.ids {
			rep, err := ooid.DefaultScheme.Report(k.textname)
			if err != nil {
				t.Fatal(err)
			}
			if want := rep.ID(uint32(k.ndx)).Int64(); id != want {
				t.Fatalf("%s #%d: %016x, pipeline/ooid says %016x", k.textname, k.ndx, uint64(id), uint64(want))
			}
		}
		// Both autoclaved ways record exactly what the truth says.
		for _, o := range []outcome{d, x} {
			type fk struct{ file, textname string }
			want, got := map[fk][]string{}, map[fk][]string{}
			for _, tr := range truth {
				r := append([]string(nil), tr.Reasons...)
				for range tr.Badblobs {
					if ndx == reader.NdxDatums {
						r = append(r, deadletter.Badblob)
					}
				}
				if len(r) > 0 {
					sort.Strings(r)
					want[fk{tr.File, tr.Textname}] = r
				}
			}
			for _, dl := range o.dead {
				got[fk{dl.File, dl.Textname}] = append(got[fk{dl.File, dl.Textname}], dl.Reason)
			}
			for k, w := range want {
				g := got[k]
				sort.Strings(g)
				if strings.Join(g, ",") != strings.Join(w, ",") {
					t.Errorf("%s: %s: dead letters %v, truth %v", ndx, k.textname, g, w)
				}
			}
			for k, g := range got {
				if _, ok := want[k]; !ok {
					t.Errorf("%s: %s %s: unexpected dead letters %v", ndx, k.file, k.textname, g)
				}
			}
			var wantN int
			for _, tr := range truth {
				wantN += tr.N
				if ndx == reader.NdxDatums {
					wantN -= tr.Badblobs
				}
			}
			if len(o.ids) != wantN || o.summary.Measurements != int64(wantN) {
				t.Errorf("%s: %d IDs (summary %d), truth %d", ndx, len(o.ids), o.summary.Measurements, wantN)
			}
		}
	}
	// The policies differ: by one ID per badblob, and in the numbering of
	// what follows a badblob.
	if diff := len(byPolicy[reader.NdxBlobs]) - len(byPolicy[reader.NdxDatums]); diff != badblobs {
		t.Errorf("blobs gives %d more IDs than datums, the corpus has %d badblobs", diff, badblobs)
	}
}

// A run reading autoclaved data from the index alone reads no data.
func TestRun_FromIndexReadsNoData(t *testing.T) {
	dir := genBoth(t, 1, 40)
	x := runWith(t, job.Config{In: store.Local(filepath.Join(dir, "autoclaved")), FromIndex: true})
	if x.summary.BytesOut != 0 || len(x.ids) == 0 {
		t.Errorf("from the index: %d bytes decompressed, %d IDs", x.summary.BytesOut, len(x.ids))
	}
}

// copyDir copies the bucket folders of src into a new folder.
func copyDir(t testing.TB, src string) string {
	t.Helper()
	dst := t.TempDir()
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return dst
}

// indexLines reads a bucket's autoclaved index.
func indexLines(t testing.TB, bucketDir string) []string {
	t.Helper()
	f, err := os.Open(filepath.Join(bucketDir, reader.IndexName))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return strings.SplitAfter(strings.TrimSuffix(string(data), "\n"), "\n")
}

func writeIndex(t testing.TB, bucketDir string, lines []string) {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write([]byte(strings.Join(lines, "")))
	testutil.Check(t, zw.Close())
	if err := os.WriteFile(filepath.Join(bucketDir, reader.IndexName), b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// find returns the index of the first line from `from` containing all of
// the substrings.
func find(t testing.TB, lines []string, from int, subs ...string) int {
	t.Helper()
	for i := from; i < len(lines); i++ {
		ok := true
		for _, s := range subs {
			ok = ok && strings.Contains(lines[i], s)
		}
		if ok {
			return i
		}
	}
	t.Fatalf("no index line with %q", subs)
	return -1
}

func fileOf(line string) string {
	_, rest, _ := strings.Cut(line, `"filename": "`)
	name, _, _ := strings.Cut(rest, `"`)
	return name
}

// Damaged autoclaved input, read from the index alone and through the
// data path: every damage is a dead letter with its file (and report
// where one is concerned) and reason; no ID differs from the clean run's;
// every report no dead letter names keeps all its IDs.
func TestRun_AutoclavedBadInput(t *testing.T) {
	cfg := corpus.DefaultConfig()
	cfg.Buckets, cfg.Reports, cfg.CanSize, cfg.MaxMeasurements = 1, 60, 512<<10, 2000
	cfg.Format = corpus.FormatAutoclaved
	clean := t.TempDir()
	if _, err := corpus.Generate(clean, cfg); err != nil {
		t.Fatal(err)
	}
	bucket := cfg.Start.Format("2006-01-02")
	base := indexLines(t, filepath.Join(clean, bucket))
	// A tar file of several frames, and the report open across a frame
	// boundary in it.
	var multi int
	for i, l := range base {
		if strings.Contains(l, `"type": "file"`) && strings.Contains(l, ".tar.lz4") &&
			strings.Count(strings.Join(base[i:find(t, base, i, `"/file"`)], ""), `"type": "frame"`) >= 3 {
			multi = i
			break
		}
	}
	if multi == 0 {
		t.Fatal("no tar file of several frames in the corpus")
	}
	tarFile := fileOf(base[multi])
	secondFrame := find(t, base, find(t, base, multi, `"type": "frame"`)+1, `"type": "frame"`)
	firstReport := find(t, base, multi, `"type": "report"`)
	firstDatum := find(t, base, firstReport, `"type": "datum"`)
	var asIs int
	for i, l := range base {
		if strings.Contains(l, `"type": "file"`) && !strings.Contains(l, ".tar.lz4") {
			asIs = i
			break
		}
	}
	asIsFile := fileOf(base[asIs])
	textnameAt := func(i int) string {
		_, rest, _ := strings.Cut(base[find(t, base, i, `"type": "report"`)], `"textname": "`)
		name, _, _ := strings.Cut(rest, `"`)
		return name
	}

	type want struct{ file, textname, reason string }
	cases := []struct {
		name   string
		damage func(dir string)
		// what each mode must record (the index file is named by its
		// path under the bucket)
		fromIndex, data []want
	}{
		{"gzip CRC", func(dir string) {
			p := filepath.Join(dir, reader.IndexName)
			b, _ := os.ReadFile(p)
			b[len(b)-8] ^= 0xff
			testutil.Check(t, os.WriteFile(p, b, 0o644))
		}, []want{{bucket + "/index.json.gz", "", deadletter.BadIndexRow}}, []want{{bucket + "/index.json.gz", "", deadletter.BadIndexRow}}},
		{"index cut short", func(dir string) {
			writeIndex(t, dir, base[:firstDatum+3])
		}, []want{{bucket + "/index.json.gz", "", deadletter.BadIndexRow}, {tarFile, textnameAt(firstReport), deadletter.BadIndexRow}},
			[]want{{bucket + "/index.json.gz", "", deadletter.BadIndexRow}, {tarFile, textnameAt(firstReport), deadletter.BadIndexRow}}},
		{"bad JSON row", func(dir string) {
			l := append([]string(nil), base...)
			l[firstDatum+1] = `{"orig_sha1": "oops` + "\n"
			writeIndex(t, dir, l)
		}, []want{{tarFile, textnameAt(firstReport), deadletter.BadIndexRow}}, []want{{tarFile, textnameAt(firstReport), deadletter.BadIndexRow}}},
		{"events out of order", func(dir string) {
			l := append([]string(nil), base...)
			l[firstReport], l[firstDatum] = l[firstDatum], l[firstReport] // a datum before its report
			writeIndex(t, dir, l)
		}, []want{{tarFile, textnameAt(firstReport), deadletter.BadIndexRow}}, []want{{tarFile, textnameAt(firstReport), deadletter.BadIndexRow}}},
		{"datum outside any report", func(dir string) {
			l := append([]string(nil), base...)
			end := find(t, l, firstReport, `"type": "/report"`)
			l = append(l[:end+1], append([]string{l[firstDatum]}, l[end+1:]...)...)
			writeIndex(t, dir, l)
		}, []want{{tarFile, textnameAt(firstReport), deadletter.BadIndexRow}}, []want{{tarFile, textnameAt(firstReport), deadletter.BadIndexRow}}},
		{"frame offsets beyond the file", func(dir string) {
			l := append([]string(nil), base...)
			end := find(t, l, multi, `"/file"`)
			last := end
			for !strings.Contains(l[last], `"type": "frame"`) {
				last--
			}
			l[last] = strings.Replace(l[last], `"file_size": `, `"file_size": 9`, 1)
			writeIndex(t, dir, l)
		}, []want{{tarFile, "", deadletter.FrameMismatch}}, []want{{tarFile, "", deadletter.FrameMismatch}}},
		{"frame not matching the index", func(dir string) {
			l := append([]string(nil), base...)
			l[secondFrame] = strings.Replace(l[secondFrame], `"text_size": `, `"text_size": 1`, 1)
			writeIndex(t, dir, l)
		}, []want{{tarFile, "", deadletter.FrameMismatch}}, []want{{tarFile, "", deadletter.FrameMismatch}}},
		{"missing data file", func(dir string) {
			os.Remove(filepath.Join(dir, strings.TrimPrefix(asIsFile, bucket+"/")))
		}, []want{{asIsFile, "", deadletter.MissingContainer}}, []want{{asIsFile, "", deadletter.MissingContainer}, {asIsFile, textnameAt(asIs), deadletter.MissingContainer}}},
		{"corrupt frame data", func(dir string) {
			p := filepath.Join(dir, strings.TrimPrefix(tarFile, bucket+"/"))
			b, _ := os.ReadFile(p)
			for i := len(b) / 2; i < len(b)/2+16; i++ {
				b[i] ^= 0x5a
			}
			testutil.Check(t, os.WriteFile(p, b, 0o644))
		}, nil, []want{{tarFile, "", deadletter.LZ4Corrupt}}},
		{"data file cut short", func(dir string) {
			p := filepath.Join(dir, strings.TrimPrefix(tarFile, bucket+"/"))
			st, _ := os.Stat(p)
			testutil.Check(t, os.Truncate(p, st.Size()-100))
		}, []want{{tarFile, "", deadletter.SizeMismatch}}, []want{{tarFile, "", deadletter.LZ4Truncated}}},
	}
	ref := runWith(t, job.Config{In: store.Local(clean), FromIndex: true})
	if len(ref.dead) != 0 {
		t.Fatalf("the clean corpus has dead letters: %v", ref.dead)
	}
	byReport := map[string]int{}
	for k := range ref.ids {
		byReport[k.textname]++
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyDir(t, clean)
			tc.damage(filepath.Join(dir, bucket))
			for _, mode := range []struct {
				name      string
				fromIndex bool
				want      []want
			}{{"from-index", true, tc.fromIndex}, {"data", false, tc.data}} {
				if mode.want == nil {
					continue
				}
				o := runWith(t, job.Config{In: store.Local(dir), FromIndex: mode.fromIndex})
				named := map[string]bool{}
				for _, d := range o.dead {
					if d.Bucket != bucket || d.File == "" || d.Reason == "" || d.Message == "" {
						t.Errorf("%s: dead letter without location or reason: %+v", mode.name, d)
					}
					named[d.Textname] = true
				}
				for _, w := range mode.want {
					found := false
					for _, d := range o.dead {
						found = found || (d.File == w.file && d.Textname == w.textname && d.Reason == w.reason)
					}
					if !found {
						t.Errorf("%s: no %s record for %s %s; got %v", mode.name, w.reason, w.file, w.textname, o.dead)
					}
				}
				got := map[string]int{}
				for k, id := range o.ids {
					got[k.textname]++
					if want, ok := ref.ids[k]; !ok || want != id {
						t.Fatalf("%s: %s #%d: %016x, the clean run gives %016x", mode.name, k.textname, k.ndx, uint64(id), uint64(want))
					}
				}
				for name, n := range byReport {
					if got[name] != n && !named[name] && !named[""] {
						t.Errorf("%s: %s has %d IDs of %d and no dead letter", mode.name, name, got[name], n)
					}
				}
			}
		})
	}
}
