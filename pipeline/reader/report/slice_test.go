package report

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// slicer is what the JSON and YAML slicers share.
type slicer interface{ Next() (Blob, error) }

// smallReader hands out at most n bytes per Read, to cross every buffer
// boundary.
type smallReader struct {
	r io.Reader
	n int
}

func (s smallReader) Read(p []byte) (int, error) { return s.r.Read(p[:min(len(p), s.n)]) }

// sliceWith slices r to the end with a slicer made by newSlicer, and
// checks that a cut is followed by io.EOF.
func sliceWith(t testing.TB, newSlicer func(io.Reader, io.Writer) slicer, r io.Reader) (blobs []Blob, cut *SliceError, content []byte) {
	t.Helper()
	var buf bytes.Buffer
	s := newSlicer(r, &buf)
	for {
		b, err := s.Next()
		if errors.Is(err, io.EOF) {
			return blobs, cut, buf.Bytes()
		}
		if errors.As(err, &cut) {
			if _, err := s.Next(); !errors.Is(err, io.EOF) {
				t.Fatalf("after a cut Next gives %v, not EOF", err)
			}
			return blobs, cut, buf.Bytes()
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		blobs = append(blobs, b)
	}
}

// checkSlices slices data, whole and in 3-byte reads, and compares the
// blobs, the cut and the Content bytes with a reference's.
func checkSlices(t testing.TB, newSlicer func(io.Reader, io.Writer) slicer, data []byte, want []Blob, wantCut *SliceError) {
	t.Helper()
	for _, r := range []io.Reader{bytes.NewReader(data), smallReader{bytes.NewReader(data), 3}} {
		blobs, cut, content := sliceWith(t, newSlicer, r)
		if len(blobs) != len(want) {
			t.Fatalf("%d blobs, reference %d", len(blobs), len(want))
		}
		var wantContent []byte
		for i := range want {
			if blobs[i] != want[i] {
				t.Fatalf("blob %d = %+v, reference %+v", i, blobs[i], want[i])
			}
			wantContent = append(wantContent, data[want[i].Offset:want[i].Offset+want[i].Size]...)
		}
		if (cut == nil) != (wantCut == nil) || cut != nil && (cut.Reason != wantCut.Reason || cut.Offset != wantCut.Offset) {
			t.Fatalf("cutoff %v, reference %v", cut, wantCut)
		}
		// A truncated last blob may add its partial bytes after the blobs.
		if !bytes.HasPrefix(content, wantContent) || cut == nil && len(content) != len(wantContent) {
			t.Fatalf("content differs from the blobs (%d vs %d bytes)", len(content), len(wantContent))
		}
	}
}
