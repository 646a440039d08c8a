package corpus

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/pierrec/lz4/v4"
)

// Every sample has values to vary, and each variation parses to the
// sample's keys, at the sample's length, and differs from it.
func TestVaried_SameKeys(t *testing.T) {
	jsonT, yamlT, err := loadTemplates()
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tm := range append(jsonT, yamlT...) {
		if len(tm.vary) == 0 {
			t.Errorf("%s: no value to vary", tm.name)
			continue
		}
		want, err := keysOf(tm.kind, tm.blob)
		if err != nil {
			t.Fatal(err)
		}
		var buf []byte
		for range 50 {
			buf = varied(buf, tm.blob, tm.vary, 0.5, rng)
			got, err := keysOf(tm.kind, buf)
			if err != nil || got != want || len(buf) != len(tm.blob) {
				t.Fatalf("%s: a variation does not parse to the sample's keys (%v):\n%s", tm.name, err, buf)
			}
		}
		if bytes.Equal(buf, tm.blob) {
			t.Errorf("%s: the variation is the sample", tm.name)
		}
	}
}

// A varied corpus has the plain one's reports and measurements at the same
// offsets (the same ground truth), its bytes are not the same, and its
// containers compress as text, not as one sample repeated.
func TestVaried_CompressesAsText(t *testing.T) {
	gen := func(varied float64) (string, int64, int64) {
		cfg := DefaultConfig()
		cfg.Buckets, cfg.Reports, cfg.MaxMeasurements, cfg.MaxTemplate, cfg.Varied = 1, 60, 300, 1024, varied
		dir := t.TempDir()
		if _, err := Generate(dir, cfg); err != nil {
			t.Fatal(err)
		}
		files, _ := filepath.Glob(filepath.Join(dir, "*", "*.lz4"))
		var raw, packed int64
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var text bytes.Buffer
			if _, err := text.ReadFrom(lz4.NewReader(bytes.NewReader(b))); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			var out bytes.Buffer
			w := lz4.NewWriter(&out)
			if err := w.Apply(lz4.CompressionLevelOption(lz4.Level5)); err != nil {
				t.Fatal(err)
			}
			w.Write(text.Bytes())
			w.Close()
			raw, packed = raw+int64(text.Len()), packed+int64(out.Len())
		}
		truth, err := os.ReadFile(filepath.Join(dir, TruthName))
		if err != nil {
			t.Fatal(err)
		}
		return string(truth), raw, packed
	}
	plainTruth, raw, plainPacked := gen(0)
	variedTruth, vraw, variedPacked := gen(0.4)
	if plainTruth != variedTruth || raw != vraw {
		t.Errorf("the varied corpus's truth or size differs from the plain one's (%d and %d bytes)", vraw, raw)
	}
	plain, vary := float64(raw)/float64(plainPacked), float64(raw)/float64(variedPacked)
	t.Logf("lz4 level 5: the plain corpus compresses %.1f-fold, the varied one %.1f-fold", plain, vary)
	if plain < 20 || vary < 3 || vary > 10 {
		t.Errorf("lz4 level 5: the plain corpus compresses %.1f-fold, the varied one %.1f-fold; want over 20, and 3 to 10 as text", plain, vary)
	}
}
