package corpus_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/backfill-dev/backfill/gen/corpus"
	"github.com/backfill-dev/backfill/gen/corpus/corpustest"
	"github.com/backfill-dev/backfill/pipeline/deadletter"
	"github.com/backfill-dev/backfill/pipeline/reader"
)

// smallConfig is a corpus with every corruption kind, small enough for a
// unit test.
func smallConfig() corpus.Config {
	cfg := corpus.DefaultConfig()
	cfg.Buckets, cfg.Reports, cfg.CanSize, cfg.MaxMeasurements = 2, 120, 64<<10, 3000
	cfg.HugeBlob, cfg.MaxBlob = 300<<10, 256<<10
	cfg.Corrupt = map[string]float64{}
	for _, k := range corpus.ReportKinds {
		cfg.Corrupt[k] = 0.03
	}
	for _, k := range corpus.ContainerKinds {
		cfg.Corrupt[k] = 0.08
	}
	return cfg
}

type key struct{ file, textname string }

// The reader, run over a generated corpus, finds exactly the measurements
// and the dead letters of the ground truth (all but bad_textname, which
// is the job's to find).
func TestGenerate_ReaderMatchesTruth(t *testing.T) {
	dir := t.TempDir()
	st, err := corpus.Generate(dir, smallConfig())
	if err != nil {
		t.Fatal(err)
	}
	truth := corpustest.ReadTruth(t, dir)
	seen := map[string]int{}
	want := map[key]corpus.Truth{}
	for _, tr := range truth {
		for _, r := range tr.Reasons {
			seen[r]++
		}
		seen[corpus.KindBadblob] += tr.Badblobs // flagged only when blobs are parsed
		want[key{tr.File, tr.Textname}] = tr
	}
	for _, k := range append(corpus.ReportKinds, corpus.ContainerKinds...) {
		if k == corpus.KindHugeBlob {
			k = deadletter.OversizedBlob
		}
		if seen[k] == 0 {
			t.Errorf("no %s in the corpus (%v)", k, seen)
		}
	}
	got := map[key]*corpus.Truth{}
	entry := func(file, textname string) *corpus.Truth {
		k := key{file, textname}
		if got[k] == nil {
			got[k] = &corpus.Truth{File: file, Textname: textname}
		}
		return got[k]
	}
	cr := reader.NewContainerReader()
	cr.Reports.MaxBlob = 256 << 10
	{
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if !e.IsDir() {
				continue
			}
			bk, err := reader.OpenBucket(filepath.Join(dir, e.Name()))
			if err != nil || len(bk.Problems) != 0 {
				t.Fatalf("%s: %v %v", e.Name(), err, bk.Problems)
			}
			for _, c := range bk.Containers {
				_, err := cr.Read(context.Background(), bk, c, reader.Handler{
					Report: func(r reader.ContainerReport) { entry(c.Name, r.Textname).N += int(r.Stats.N) },
					Problem: func(p deadletter.Record) {
						e := entry(p.File, p.Textname)
						e.Reasons = append(e.Reasons, p.Reason)
					},
				})
				if err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	n := 0
	for k, w := range want {
		g := got[k]
		if g == nil {
			g = &corpus.Truth{}
		}
		sort.Strings(g.Reasons)
		var wr []string
		for _, r := range w.Reasons {
			if r != corpus.KindBadTextname {
				wr = append(wr, r)
			}
		}
		if g.N != w.N && !(w.N == 0 && strings.Join(w.Reasons, ",") == corpus.KindBadTextname) || strings.Join(g.Reasons, ",") != strings.Join(wr, ",") {
			t.Errorf("%s %s: n=%d %v, truth n=%d %v", k.file, k.textname, g.N, g.Reasons, w.N, w.Reasons)
		}
		n += w.N
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s %s: read, not in the truth: %+v", k.file, k.textname, got[k])
		}
	}
	if n != st.Measurements {
		t.Errorf("truth holds %d measurements, stats say %d", n, st.Measurements)
	}
}

// The generator is deterministic: the same seed writes the same bytes.
func TestGenerate_Deterministic(t *testing.T) {
	cfg := smallConfig()
	cfg.Buckets = 1
	a, b := t.TempDir(), t.TempDir()
	if _, err := corpus.Generate(a, cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := corpus.Generate(b, cfg); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(a, "*", "*"))
	if len(files) < 3 {
		t.Fatalf("only %d files", len(files))
	}
	files = append(files, filepath.Join(a, corpus.TruthName))
	for _, fa := range files {
		rel, _ := filepath.Rel(a, fa)
		x, _ := os.ReadFile(fa)
		y, err := os.ReadFile(filepath.Join(b, rel))
		if err != nil || !bytes.Equal(x, y) {
			t.Errorf("%s differs between two runs (%v)", rel, err)
		}
	}
}

// The containers are what the lz4 CLI and GNU tar read: frame header as
// lz4 writes it, member names (LongLink) as the index lists them.
func TestGenerate_ReadByLZ4AndTar(t *testing.T) {
	if _, err := exec.LookPath("lz4"); err != nil {
		t.Fatal("the lz4 CLI is needed (apt-get install lz4)")
	}
	cfg := corpus.DefaultConfig()
	cfg.Buckets, cfg.Reports, cfg.CanSize, cfg.MaxMeasurements = 1, 40, 256<<10, 500
	dir := t.TempDir()
	if _, err := corpus.Generate(dir, cfg); err != nil {
		t.Fatal(err)
	}
	bk, err := reader.OpenBucket(filepath.Join(dir, "2017-06-01"))
	if err != nil {
		t.Fatal(err)
	}
	tars := 0
	for _, c := range bk.Containers {
		raw, _ := os.ReadFile(filepath.Join(dir, c.Path))
		if !bytes.HasPrefix(raw, []byte{0x04, 0x22, 0x4d, 0x18, 0x64, 0x70, 0xb9}) {
			t.Errorf("%s: frame header % x, want the lz4 CLI's 04 22 4d 18 64 70 b9", c.Name, raw[:7])
		}
		if !c.Tar {
			continue
		}
		tars++
		out, err := exec.Command("sh", "-c", "lz4 -dc < '"+filepath.Join(dir, c.Path)+"' | tar -tf -").Output()
		if err != nil {
			t.Fatalf("%s: lz4 | tar: %v", c.Name, err)
		}
		var names []string
		for _, tx := range c.Entry.Texts {
			names = append(names, tx.Textname)
		}
		if got := strings.Fields(string(out)); strings.Join(got, " ") != strings.Join(names, " ") {
			t.Errorf("%s: tar lists %v, index %v", c.Name, got, names)
		}
	}
	if tars == 0 {
		t.Error("no tar container generated")
	}
}

// MaxTemplate keeps only the small real samples: the same reports, with a
// third or less of the bytes a measurement (under 2 KiB, a YAML header
// included); a bound that leaves no sample of a kind is refused.
func TestGenerate_MaxTemplate(t *testing.T) {
	cfg := corpus.DefaultConfig()
	cfg.Buckets, cfg.Reports, cfg.MaxMeasurements, cfg.MaxTemplate = 1, 60, 200, 1024
	dir := t.TempDir()
	small, err := corpus.Generate(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxTemplate = 0
	all, err := corpus.Generate(t.TempDir(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if small.Measurements != all.Measurements || small.Measurements == 0 {
		t.Fatalf("%d and %d measurements: the bound changed the reports' sizes", small.Measurements, all.Measurements)
	}
	perSmall, perAll := small.TextBytes/int64(small.Measurements), all.TextBytes/int64(all.Measurements)
	if perSmall > 2048 || perSmall*3 > perAll {
		t.Errorf("%d bytes a measurement with the bound, %d without", perSmall, perAll)
	}
	cfg.MaxTemplate = 10
	if _, err := corpus.Generate(t.TempDir(), cfg); err == nil {
		t.Error("a bound no sample meets was accepted")
	}
}

// TestConfigCheck_Corruption: --corrupt all=RATE sets every kind but
// huge_blob; a rate outside 0..1, an unknown kind, a format and a count
// out of range are refused.
func TestConfigCheck_Corruption(t *testing.T) {
	rates := map[string]float64{}
	if err := corpus.AddCorruption(rates, "all=0.5"); err != nil {
		t.Fatal(err)
	}
	if _, ok := rates[corpus.KindHugeBlob]; ok || len(rates) != len(corpus.ReportKinds)+len(corpus.ContainerKinds)-1 {
		t.Errorf("all=0.5 set %v", rates)
	}
	for _, bad := range []string{"badblob=2", "badblob", "badblob=x"} {
		if corpus.AddCorruption(map[string]float64{}, bad) == nil {
			t.Errorf("corpus.AddCorruption(%q) took it", bad)
		}
	}
	cfg := corpus.DefaultConfig()
	if err := cfg.Check(); err != nil {
		t.Fatalf("the default config: %v", err)
	}
	for name, mend := range map[string]func(*corpus.Config){
		"kind":    func(c *corpus.Config) { c.Corrupt = map[string]float64{"nosuch": 1} },
		"format":  func(c *corpus.Config) { c.Format = "zip" },
		"buckets": func(c *corpus.Config) { c.Buckets = 0 },
	} {
		c := corpus.DefaultConfig()
		mend(&c)
		if c.Check() == nil {
			t.Errorf("a config with a bad %s passed", name)
		}
	}
}
