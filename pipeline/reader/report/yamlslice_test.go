package report

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/backfill-dev/backfill/internal/testutil"
)

// refYAMLSlice is the autoclaving step's stream_yaml_blobs run over the
// whole report at once: the oracle for YAMLSlicer.
func refYAMLSlice(data []byte) (blobs []Blob, cut *SliceError) {
	start := 0
	for {
		rest := data[start:]
		prefix := rest[:min(4, len(rest))]
		switch {
		case len(prefix) == 0:
			return blobs, nil
		case string(prefix) == "---\n":
			end := bytes.Index(rest, []byte("\n...\n"))
			if end < 0 {
				return blobs, &SliceError{Reason: ReasonTruncatedReport, Offset: int64(start)}
			}
			blobs = append(blobs, Blob{Offset: int64(start), Size: int64(end + 5)})
			start += end + 5
		case string(prefix) == "...\n":
			start += 4
		case len(prefix) < 4:
			return blobs, &SliceError{Reason: ReasonTruncatedReport, Offset: int64(start)}
		case prefix[0] == '#':
			nl := bytes.IndexByte(rest, '\n')
			if nl < 0 {
				return blobs, &SliceError{Reason: ReasonTruncatedReport, Offset: int64(start)}
			}
			start += nl + 1
		default:
			return blobs, &SliceError{Reason: ReasonBrokenFrame, Offset: int64(start)}
		}
	}
}

func newYAML(r io.Reader, content io.Writer) slicer {
	s := NewYAMLSlicer(r)
	s.Content = content
	return s
}

func yamlSliceAll(t testing.TB, r io.Reader) ([]Blob, *SliceError, []byte) {
	return sliceWith(t, newYAML, r)
}

func checkYAMLAgainstRef(t testing.TB, data []byte) {
	t.Helper()
	want, wantCut := refYAMLSlice(data)
	checkSlices(t, newYAML, data, want, wantCut)
}

func realYAML(t testing.TB) map[string][]byte {
	files, err := filepath.Glob("../../../testdata/ooni/yaml/*.yaml")
	if err != nil || len(files) != 3 {
		t.Fatalf("real YAML samples: %v %v", files, err)
	}
	out := map[string][]byte{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(f)] = b
	}
	return out
}

// Every real sample is a header and one measurement, the in-document
// comment of dns_n_http_bin_body.yaml included.
func TestYAMLSlicer_Real(t *testing.T) {
	for name, data := range realYAML(t) {
		t.Run(name, func(t *testing.T) {
			blobs, cut, _ := yamlSliceAll(t, bytes.NewReader(data))
			if cut != nil || len(blobs) != 2 {
				t.Fatalf("%d blobs, cut %v; want header + 1", len(blobs), cut)
			}
			if end := blobs[1].Offset + blobs[1].Size; end != int64(len(data)) {
				t.Errorf("last blob ends at %d of %d", end, len(data))
			}
			checkYAMLAgainstRef(t, data)
		})
	}
}

func TestYAMLSlicer_Pathologies(t *testing.T) {
	doc := "---\na: 1\n...\n"
	for _, tc := range []struct {
		name   string
		data   string
		blobs  int
		reason string
		offset int
	}{
		{"banner comments", "#####\n# OONI Probe Report\n#####\n" + doc + doc, 2, "", 0},
		{"duplicate trailer", doc + "...\n...\n" + doc, 2, "", 0},
		{"empty document", "---\n...\n" + doc, 2, "", 0},
		{"null document", doc + "---\nnull\n...\n", 2, "", 0},
		{"comment inside", "---\n# c\na: 1\n...\n", 1, "", 0},
		{"dots inside a line", "---\na: '...'\nb: ...x\n...\n", 1, "", 0},
		{"garbage between", doc + "garbage\n" + doc, 1, ReasonBrokenFrame, len(doc)},
		{"blank line between", doc + "\n" + doc, 1, ReasonBrokenFrame, len(doc)},
		{"unterminated", doc + "---\na: 1\n", 1, ReasonTruncatedReport, len(doc)},
		{"trailer without newline", doc + "---\na: 1\n...", 1, ReasonTruncatedReport, len(doc)},
		{"short leftover", doc + "#\n", 1, ReasonTruncatedReport, len(doc)},
		{"comment without newline", doc + "# the end", 1, ReasonTruncatedReport, len(doc)},
		{"empty report", "", 0, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			blobs, cut, _ := yamlSliceAll(t, strings.NewReader(tc.data))
			if len(blobs) != tc.blobs {
				t.Errorf("%d blobs, want %d", len(blobs), tc.blobs)
			}
			switch {
			case tc.reason == "" && cut != nil:
				t.Errorf("cut %v, want none", cut)
			case tc.reason != "" && (cut == nil || cut.Reason != tc.reason || cut.Offset != int64(tc.offset)):
				t.Errorf("cut %v, want %s at %d", cut, tc.reason, tc.offset)
			}
			checkYAMLAgainstRef(t, []byte(tc.data))
		})
	}
}

func TestYAMLSlicer_Large(t *testing.T) {
	testutil.SkipUnderRace(t, "megabytes through a slicer that runs on one goroutine")
	big := "---\nbody: " + strings.Repeat("x", 3<<20) + "\n...\n"
	data := []byte("# banner\n" + big + "---\n" + strings.Repeat("k: 1\n", 50000) + "...\n")
	checkYAMLAgainstRef(t, data)
	for _, cut := range truncations(len(data), len("# banner\n")+len(big)) {
		checkYAMLAgainstRef(t, data[:cut])
	}
}

func FuzzYAMLSlicer(f *testing.F) {
	for _, data := range realYAML(f) {
		f.Add(data)
	}
	f.Add([]byte("#\n---\n...\n...\n---\nnull\n...\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkYAMLAgainstRef(t, data)
	})
}
