package job_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/backfill-dev/backfill/gen/corpus"
	"github.com/backfill-dev/backfill/gen/corpus/corpustest"
	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/internal/testutil"
	"github.com/backfill-dev/backfill/pipeline/deadletter"
	"github.com/backfill-dev/backfill/pipeline/ingest"
	"github.com/backfill-dev/backfill/pipeline/job"
	"github.com/backfill-dev/backfill/pipeline/ooid"
	"github.com/backfill-dev/backfill/pipeline/sink/parquetfile"
)

const maxBlob = 256 << 10

// genCorpus writes a corpus with every corruption kind into a temporary
// folder.
func genCorpus(t testing.TB, buckets, reports int) string {
	t.Helper()
	cfg := damagedConfig(buckets, reports, 64<<10, 0.03)
	for _, k := range corpus.ContainerKinds {
		cfg.Corrupt[k] = 0.12
	}
	return corpustest.Generate(t, cfg)
}

// damagedConfig is a small corpus with every report-level corruption kind
// at rate.
func damagedConfig(buckets, reports int, canSize int64, rate float64) corpus.Config {
	cfg := corpus.DefaultConfig()
	cfg.Buckets, cfg.Reports, cfg.CanSize, cfg.MaxMeasurements = buckets, reports, canSize, 3000
	cfg.HugeBlob, cfg.MaxBlob = maxBlob+100, maxBlob
	cfg.Corrupt = map[string]float64{}
	for _, k := range corpus.ReportKinds {
		cfg.Corrupt[k] = rate
	}
	return cfg
}

func runJob(t testing.TB, ctx context.Context, in, out string, workers int, buckets ...string) (job.Summary, error) {
	return runJobSHA1(t, ctx, in, out, workers, false, buckets...)
}

func runJobSHA1(t testing.TB, ctx context.Context, in, out string, workers int, verify bool, buckets ...string) (job.Summary, error) {
	t.Helper()
	s, err := parquetfile.Open(t.Context(), store.Local(out))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	return job.Run(ctx, job.Config{In: store.Local(in), Buckets: buckets, Workers: workers, Scheme: ooid.DefaultScheme, MaxBlob: maxBlob, Version: "test", VerifySHA1: verify}, s)
}

func readParquet[T any](t testing.TB, path string) []T {
	t.Helper()
	return readParquetScheme[T](t, path, "28", "33")
}

func readSchemeParquet[T any](t testing.TB, path string) []T {
	t.Helper()
	return readParquetScheme[T](t, path, fmt.Sprint(narrow.CounterBits), fmt.Sprint(narrow.SHA1Offset))
}

func readParquetScheme[T any](t testing.TB, path, bits, offset string) []T {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{"backfill.counter_bits": bits, "backfill.sha1_offset": offset, "backfill.ndx_policy": "blobs", "backfill.version": "test"} {
		if got, ok := pf.Lookup(key); !ok || got != want {
			t.Errorf("%s: metadata %s = %q, want %q", path, key, got, want)
		}
	}
	r := parquet.NewGenericReader[T](pf)
	defer r.Close()
	rows := make([]T, pf.NumRows())
	n, err := r.Read(rows)
	if err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	return rows[:n]
}

func readDeadLetters(t testing.TB, path string) []deadletter.Record {
	t.Helper()
	out, err := parquetfile.ReadDeadLetters(context.Background(), store.Local(filepath.Dir(path)), filepath.Base(path))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A run over a generated corpus matches its ground truth exactly: every
// expected OOID once (as pipeline/ooid computes it), every dead letter
// with its reason, and the summary's counts.
func TestRun_GroundTruth(t *testing.T) {
	t.Run("samples", func(t *testing.T) { runMatchesTruth(t, genCorpus(t, 3, 150)) })
	// Each measurement a variation of its sample, as real ones differ
	// (corpus.Config.Varied): the same truth holds.
	t.Run("varied", func(t *testing.T) {
		cfg := damagedConfig(2, 100, 64<<10, 0.03)
		for _, k := range corpus.ContainerKinds {
			cfg.Corrupt[k] = 0.12
		}
		cfg.Varied = 0.4
		runMatchesTruth(t, corpustest.Generate(t, cfg))
	})
}

func runMatchesTruth(t *testing.T, in string) {
	t.Helper()
	out := t.TempDir()
	sum, err := runJobSHA1(t, context.Background(), in, out, 2, true)
	if err != nil {
		t.Fatal(err)
	}
	truth := corpustest.ReadTruth(t, in)
	type key struct{ file, textname string }
	wantN := map[string]int{}
	wantReasons := map[key][]string{}
	wantDead := map[string]int64{}
	var wantMeas int64
	reasonsSeen := map[string]bool{}
	for _, tr := range truth {
		if tr.Textname != "" {
			wantN[tr.Textname] += tr.N
			wantMeas += int64(tr.N)
		}
		wantReasons[key{tr.File, tr.Textname}] = append([]string(nil), tr.Reasons...)
		for _, r := range tr.Reasons {
			wantDead[r]++
			reasonsSeen[r] = true
		}
		if tr.Badblobs > 0 { // counted, not flagged, under the default policy
			reasonsSeen[corpus.KindBadblob] = true
		}
	}
	for _, k := range append(corpus.ReportKinds, corpus.ContainerKinds...) {
		if k == corpus.KindHugeBlob {
			k = deadletter.OversizedBlob
		}
		if !reasonsSeen[k] {
			t.Errorf("the corpus has no %s case", k)
		}
	}
	buckets, _ := ingest.ListBuckets(t.Context(), store.Local(in))
	gotN := map[string]int{}
	seen := map[int64]bool{}
	gotReasons := map[key][]string{}
	for _, b := range buckets {
		rows := readParquet[parquetfile.Measurement](t, filepath.Join(out, "measurements", b+".parquet"))
		reports := map[string]ooid.ReportIDs{}
		for _, m := range rows {
			if seen[m.OOID] {
				t.Fatalf("OOID %016x twice", uint64(m.OOID))
			}
			seen[m.OOID] = true
			gotN[m.Textname]++
			rep, ok := reports[m.Textname]
			if !ok {
				if rep, err = ooid.DefaultScheme.Report(m.Textname); err != nil {
					t.Fatalf("row of a bad textname %s: %v", m.Textname, err)
				}
				reports[m.Textname] = rep
			}
			if want := rep.ID(uint32(m.Ndx)).Int64(); m.OOID != want {
				t.Fatalf("%s #%d: ooid %016x, pipeline/ooid says %016x", m.Textname, m.Ndx, uint64(m.OOID), uint64(want))
			}
			if d := ooid.FromInt64(m.OOID); d.String()[:8] != rep.ID(0).String()[:8] {
				t.Fatalf("%s: ts half differs", m.Textname)
			}
		}
		for _, d := range readDeadLetters(t, filepath.Join(out, "dead-letters", b+".jsonl")) {
			if d.Bucket != b || d.File == "" || d.Message == "" {
				t.Errorf("dead letter without its location or message: %+v", d)
			}
			k := key{d.File, d.Textname}
			gotReasons[k] = append(gotReasons[k], d.Reason)
		}
	}
	for name, n := range wantN {
		if gotN[name] != n {
			t.Errorf("%s: %d measurements, truth %d", name, gotN[name], n)
		}
	}
	for name := range gotN {
		if _, ok := wantN[name]; !ok {
			t.Errorf("%s: not in the truth", name)
		}
	}
	for k, want := range wantReasons {
		got := gotReasons[k]
		sort.Strings(got)
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s %s: dead letters %v, truth %v", k.file, k.textname, got, want)
		}
	}
	for k, got := range gotReasons {
		if _, ok := wantReasons[k]; !ok {
			t.Errorf("%s %s: unexpected dead letters %v", k.file, k.textname, got)
		}
	}
	if sum.Measurements != wantMeas || int64(len(seen)) != wantMeas {
		t.Errorf("summary %d measurements, %d rows, truth %d", sum.Measurements, len(seen), wantMeas)
	}
	var dead int64
	for r, n := range wantDead {
		dead += n
		if sum.Reasons[r] != n {
			t.Errorf("summary: %d %s, truth %d", sum.Reasons[r], r, n)
		}
	}
	if sum.DeadLetters != dead || sum.Buckets != len(buckets) {
		t.Errorf("summary: %d dead letters, %d buckets; truth %d, %d", sum.DeadLetters, sum.Buckets, dead, len(buckets))
	}
}

func filesOf(t testing.TB, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, sub := range []string{"measurements", "reports", "dead-letters"} {
		files, _ := filepath.Glob(filepath.Join(dir, sub, "*"))
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			rel, _ := filepath.Rel(dir, f)
			out[rel] = b
		}
	}
	return out
}

func sameFiles(t testing.TB, what string, a, b map[string][]byte) {
	t.Helper()
	if len(a) != len(b) || len(a) == 0 {
		t.Errorf("%s: %d files against %d", what, len(a), len(b))
	}
	for name, x := range a {
		if !bytes.Equal(x, b[name]) {
			t.Errorf("%s: %s differs", what, name)
		}
	}
}

// The output is byte-identical whatever the number of workers or SHA-1
// checking, and a rerun over the same output folder replaces it with the
// same bytes.
func TestRun_WorkersDeterministic(t *testing.T) {
	in := genCorpus(t, 2, 120)
	one, four := t.TempDir(), t.TempDir()
	if _, err := runJob(t, context.Background(), in, one, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := runJobSHA1(t, context.Background(), in, four, 4, true); err != nil {
		t.Fatal(err)
	}
	sameFiles(t, "--workers 1 and 4 --verify-sha1", filesOf(t, one), filesOf(t, four))
	before := filesOf(t, four)
	if _, err := runJob(t, context.Background(), in, four, 3); err != nil {
		t.Fatal(err)
	}
	sameFiles(t, "rerun", before, filesOf(t, four))
}

// Cancelling a run in the middle of a bucket leaves no partial file; a
// rerun with --resume completes to the identical result.
func TestRun_InterruptAndResume(t *testing.T) {
	in := genCorpus(t, 3, 120)
	clean := t.TempDir()
	if _, err := runJob(t, context.Background(), in, clean, 2); err != nil {
		t.Fatal(err)
	}
	want := filesOf(t, clean)
	for _, stopAt := range []int{1, 7, 25} {
		out := t.TempDir()
		ctx, cancel := context.WithCancel(context.Background())
		calls := 0
		s, _ := parquetfile.Open(t.Context(), store.Local(out))
		_, err := job.Run(ctx, job.Config{In: store.Local(in), Workers: 2, Scheme: ooid.DefaultScheme, MaxBlob: maxBlob, Version: "test",
			Progress: func(job.Progress) {
				if calls++; calls == stopAt {
					cancel()
				}
			}}, s)
		cancel()
		s.Close()
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("stop at %d: %v, want context.Canceled", stopAt, err)
		}
		// What is there is whole: every file equals the clean run's.
		for name, b := range filesOf(t, out) {
			if !bytes.Equal(b, want[name]) {
				t.Errorf("stop at %d: %s is partial or differs", stopAt, name)
			}
		}
		if tmp, _ := os.ReadDir(filepath.Join(out, ".tmp")); len(tmp) != 0 {
			t.Errorf("stop at %d: %d temporary folders left", stopAt, len(tmp))
		}
		s2, _ := parquetfile.Open(t.Context(), store.Local(out))
		sum, err := job.Run(context.Background(), job.Config{In: store.Local(in), Workers: 2, Scheme: ooid.DefaultScheme, MaxBlob: maxBlob, Version: "test", Resume: true}, s2)
		s2.Close()
		if err != nil {
			t.Fatal(err)
		}
		if sum.Buckets+sum.Skipped != 3 {
			t.Errorf("resume: %d committed + %d skipped, want 3", sum.Buckets, sum.Skipped)
		}
		sameFiles(t, "resumed", want, filesOf(t, out))
	}
	// A finished output is skipped whole by --resume, and redone when the
	// scheme changes.
	sum, err := runJobResume(t, in, clean, ooid.DefaultScheme)
	if err != nil || sum.Skipped != 3 || sum.Buckets != 0 {
		t.Errorf("resume over a complete output: %+v %v", sum, err)
	}
	sum, err = runJobResume(t, in, clean, ooid.Scheme{CounterBits: 24, SHA1Offset: 0})
	if err != nil || sum.Skipped != 0 || sum.Buckets != 3 {
		t.Errorf("resume with another scheme: %+v %v", sum, err)
	}
}

func runJobResume(t testing.TB, in, out string, scheme ooid.Scheme) (job.Summary, error) {
	s, err := parquetfile.Open(t.Context(), store.Local(out))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	return job.Run(context.Background(), job.Config{In: store.Local(in), Workers: 2, Scheme: scheme, MaxBlob: maxBlob, Version: "test", Resume: true}, s)
}

// The real OONI samples (testdata/ooni), packed into a bucket by GNU tar,
// the lz4 CLI and a Python writer of the canning step's index, give the
// measurement counts of the realdata MANIFEST: one per YAML report (after
// its header) and one per JSON line; no dead letter.
func TestRun_RealSamples(t *testing.T) {
	for _, tool := range []string{"tar", "lz4", "python3"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed: %v", tool, err)
		}
	}
	const bucket = "2019-04-07"
	raw, in := t.TempDir(), t.TempDir()
	testutil.Check(t, os.MkdirAll(filepath.Join(raw, bucket), 0o755))
	testutil.Check(t, os.MkdirAll(filepath.Join(in, bucket), 0o755))
	want := map[string]int{} // textname -> measurements, per the MANIFEST
	add := func(basename string, data []byte, n int) {
		testutil.Check(t, os.WriteFile(filepath.Join(raw, bucket, basename), data, 0o644))
		want[bucket+"/"+basename] = n
	}
	yamls := map[string]string{
		"binary_city.yaml":               "20151105T122936Z-IS-AS51896-http_requests-PqtugF8dGSTWXGIa4ao2Fs1hjVpjZVXXN4dUmaPIdFjR9kqqwbmVj6GiEonyfsUW-0.1.0-probe.yaml",
		"dns_n_http_bin_body.yaml":       "20150903T223722Z-TR-AS15897-dns_n_http-no_report_id-0.1.0-probe.yaml",
		"http_invalid_request_line.yaml": "20180726T233723Z-US-AS7922-http_invalid_request_line-no_report_id-0.1.0-probe.yaml",
	}
	for sample, basename := range yamls {
		b, err := os.ReadFile(filepath.Join("../../testdata/ooni/yaml", sample))
		testutil.Check(t, err)
		add(basename, b, 1)
	}
	jsons, _ := filepath.Glob("../../testdata/ooni/json/*.json")
	var all []byte
	for i, f := range jsons {
		b, err := os.ReadFile(f)
		testutil.Check(t, err)
		line := append(bytes.TrimRight(b, "\n"), '\n')
		all = append(all, line...)
		add(fmt.Sprintf("20190407T00000%dZ-US-AS3352-web_connectivity-no_report_id-0.2.0-probe.json", i), line, 1)
	}
	add("20190407T000009Z-US-AS3352-web_connectivity-no_report_id-0.2.0-probe.json", all, len(jsons))
	// One report as-is, the others in a tar slice, as canning did.
	var names []string
	asis := ""
	for name := range want {
		if strings.HasSuffix(name, "T000009Z-US-AS3352-web_connectivity-no_report_id-0.2.0-probe.json") {
			asis = name
			continue
		}
		names = append(names, name)
	}
	sort.Strings(names)
	sh := func(script string) {
		t.Helper()
		cmd := exec.Command("sh", "-c", script)
		cmd.Dir = raw
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", script, err, out)
		}
	}
	testutil.Check(t, os.WriteFile(filepath.Join(raw, "list"), []byte(strings.Join(names, "\x00")+"\x00"), 0o644))
	sh("tar --create --format=gnu --null --files-from list | lz4 -5 -q > " + filepath.Join(in, bucket, "mixed.0.tar.lz4"))
	sh("lz4 -5 -q < " + asis + " > " + filepath.Join(in, asis+".lz4"))
	sh("python3 " + mustAbs(t, "../../testdata/tools/canned_index.py") + " " + filepath.Join(in, bucket))

	out := t.TempDir()
	sum, err := runJob(t, context.Background(), in, out, 2)
	testutil.Check(t, err)
	if sum.DeadLetters != 0 {
		t.Errorf("dead letters: %v\n%s", sum.Reasons, mustRead(t, filepath.Join(out, "dead-letters", bucket+".jsonl")))
	}
	got := map[string]int{}
	for _, m := range readParquet[parquetfile.Measurement](t, filepath.Join(out, "measurements", bucket+".parquet")) {
		got[m.Textname]++
		rep, err := ooid.DefaultScheme.Report(m.Textname)
		testutil.Check(t, err)
		if m.OOID != rep.ID(uint32(m.Ndx)).Int64() {
			t.Errorf("%s #%d: wrong OOID", m.Textname, m.Ndx)
		}
	}
	for name, n := range want {
		if got[name] != n {
			t.Errorf("%s: %d measurements, MANIFEST says %d", name, got[name], n)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d reports with rows, want %d", len(got), len(want))
	}
}

func mustAbs(t testing.TB, p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func mustRead(t testing.TB, p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}

// opens is a store that records the files opened through it.
type opens struct {
	store.Store
	mu    sync.Mutex
	names []string
}

func (o *opens) Open(ctx context.Context, name string) (fs.File, error) {
	o.mu.Lock()
	o.names = append(o.names, name)
	o.mu.Unlock()
	return o.Store.Open(ctx, name)
}

// --resume skips a bucket whose folder lists as it did when the bucket
// was committed without opening any of its files, the index included;
// a bucket whose index changed (its time, here) is read and done again.
func TestRun_ResumeReadsNoFileOfUnchangedBuckets(t *testing.T) {
	in, out := genCorpus(t, 3, 40), t.TempDir()
	if _, err := runJob(t, context.Background(), in, out, 2); err != nil {
		t.Fatal(err)
	}
	resume := func() (job.Summary, []string) {
		t.Helper()
		s, err := parquetfile.Open(t.Context(), store.Local(out))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		o := &opens{Store: store.Local(in)}
		sum, err := job.Run(context.Background(), job.Config{In: o, Workers: 2, Scheme: ooid.DefaultScheme, MaxBlob: maxBlob, Version: "test", Resume: true}, s)
		if err != nil {
			t.Fatal(err)
		}
		return sum, o.names
	}
	if sum, opened := resume(); sum.Skipped != 3 || sum.Buckets != 0 || len(opened) != 0 {
		t.Errorf("resume over a complete output: %d skipped, %d committed, opened %v", sum.Skipped, sum.Buckets, opened)
	}
	buckets, err := ingest.ListBuckets(t.Context(), store.Local(in))
	if err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(in, buckets[1], "index.json.gz"), later, later); err != nil {
		t.Fatal(err)
	}
	sum, opened := resume()
	if sum.Skipped != 2 || sum.Buckets != 1 {
		t.Errorf("resume after an index changed: %d skipped, %d committed", sum.Skipped, sum.Buckets)
	}
	for _, name := range opened {
		if !strings.HasPrefix(name, buckets[1]+"/") {
			t.Errorf("opened %s, of a bucket that did not change", name)
		}
	}
	if len(opened) == 0 {
		t.Error("the changed bucket was done again without reading it")
	}
}
