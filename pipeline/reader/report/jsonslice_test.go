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

// refSliceJSON is the plain reference: whole input in memory, blobs found
// with bytes.Index.
func refSliceJSON(data []byte) (blobs []Blob, cut *SliceError) {
	pos := 0
	for pos < len(data) {
		if data[pos] != '{' {
			return blobs, &SliceError{Reason: ReasonBrokenFrame, Offset: int64(pos)}
		}
		end := bytes.Index(data[pos:], []byte("}\n"))
		if end < 0 {
			return blobs, &SliceError{Reason: ReasonTruncatedReport, Offset: int64(pos)}
		}
		blobs = append(blobs, Blob{Offset: int64(pos), Size: int64(end + 1)})
		pos += end + 2
	}
	return blobs, nil
}

func newJSON(r io.Reader, content io.Writer) slicer {
	s := NewJSONSlicer(r)
	s.Content = content
	return s
}

func sliceAll(t testing.TB, data []byte) ([]Blob, *SliceError, []byte) {
	return sliceWith(t, newJSON, bytes.NewReader(data))
}

func checkAgainstRef(t testing.TB, data []byte) {
	t.Helper()
	want, wantCut := refSliceJSON(data)
	checkSlices(t, newJSON, data, want, wantCut)
}

// realReport joins the real compact JSON measurements into a report.
func realReport(t testing.TB) ([]byte, [][]byte) {
	files, err := filepath.Glob("../../../testdata/ooni/json/*.json")
	if err != nil || len(files) != 4 {
		t.Fatalf("real JSON samples: %v %v", files, err)
	}
	var report []byte
	var lines [][]byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		b = bytes.TrimRight(b, "\n")
		lines = append(lines, b)
		report = append(append(report, b...), '\n')
	}
	return report, lines
}

func TestJSONSlicer_Real(t *testing.T) {
	report, lines := realReport(t)
	blobs, cut, content := sliceAll(t, report)
	if cut != nil || len(blobs) != len(lines) {
		t.Fatalf("%d blobs, cut %v; want %d", len(blobs), cut, len(lines))
	}
	for i, b := range blobs {
		if got := report[b.Offset : b.Offset+b.Size]; !bytes.Equal(got, lines[i]) {
			t.Errorf("blob %d is not line %d", i, i)
		}
	}
	if !bytes.Equal(content, bytes.Join(lines, nil)) {
		t.Error("Content is not the concatenated lines")
	}
	checkAgainstRef(t, report)
}

func TestJSONSlicer_Pathologies(t *testing.T) {
	report, lines := realReport(t)
	for _, tc := range []struct {
		name   string
		data   string
		blobs  int
		reason string
		offset int
	}{
		{"blank line", string(lines[0]) + "\n\n" + string(lines[1]) + "\n", 1, ReasonBrokenFrame, len(lines[0]) + 1},
		{"garbage between", string(lines[0]) + "\nxx\n", 1, ReasonBrokenFrame, len(lines[0]) + 1},
		{"no final newline", strings.TrimSuffix(string(report), "\n"), len(lines) - 1, ReasonTruncatedReport, len(report) - 1 - len(lines[len(lines)-1])},
		{"partial last line", string(report) + `{"a": 1, "b"`, len(lines), ReasonTruncatedReport, len(report)},
		{"empty report", "", 0, "", 0},
		{"multi-line document", "{\n\"a\": 1\n}\n{}\n", 2, "", 0},
		{"carriage return joins lines", "{}\r\n{}\n", 1, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			blobs, cut, _ := sliceAll(t, []byte(tc.data))
			if len(blobs) != tc.blobs {
				t.Errorf("%d blobs, want %d", len(blobs), tc.blobs)
			}
			switch {
			case tc.reason == "" && cut != nil:
				t.Errorf("cut %v, want none", cut)
			case tc.reason != "" && (cut == nil || cut.Reason != tc.reason || cut.Offset != int64(tc.offset)):
				t.Errorf("cut %v, want %s at %d", cut, tc.reason, tc.offset)
			}
			checkAgainstRef(t, []byte(tc.data))
		})
	}
}

// A 3 MB single line and a document spread over many buffer fills are read
// in constant memory and sliced exactly.
func TestJSONSlicer_Large(t *testing.T) {
	testutil.SkipUnderRace(t, "megabytes through a slicer that runs on one goroutine")
	big := `{"body": "` + strings.Repeat("x", 3<<20) + `"}` + "\n"
	multi := "{\n" + strings.Repeat(`"k": 1,`+"\n", 50000) + "\"end\": 0}\n"
	data := []byte(big + multi + "{}\n")
	checkAgainstRef(t, data)
	// Every truncation gives blobs then an error, never a hang or panic.
	for _, cut := range truncations(len(data), len(big)) {
		checkAgainstRef(t, data[:cut])
	}
}

// truncations is where the large slicer tests cut their input of n bytes
// whose first bigEnd bytes hold one large value: every 9973rd byte, but
// only every 99,730th inside the value, where every cut is the same case
// (a value cut short), and each byte around the value's end.
func truncations(n, bigEnd int) []int {
	var cuts []int
	for c := 0; c < n; {
		cuts = append(cuts, c)
		if c+99730 < bigEnd {
			c += 99730
		} else {
			c += 9973
		}
	}
	for c := max(bigEnd-4, 0); c <= bigEnd+4 && c < n; c++ {
		cuts = append(cuts, c)
	}
	return cuts
}

func FuzzJSONSlicer(f *testing.F) {
	report, _ := realReport(f)
	f.Add(report)
	f.Add([]byte("{}\n\n{}"))
	f.Add([]byte("{\n}\n}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkAgainstRef(t, data)
	})
}
