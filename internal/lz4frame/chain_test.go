package lz4frame

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/backfill-dev/backfill/internal/testutil"
)

// A chain of frames, one of them empty, decompresses to the
// concatenation, and each frame's ranges are reported.
func TestFrameChain(t *testing.T) {
	parts := [][]byte{bytes.Repeat([]byte("a"), 300000), {}, []byte("tail\n"), bytes.Repeat([]byte("xyz"), 5<<20/3)}
	var file, want []byte
	var frames []Frame
	for _, p := range parts {
		f := testutil.LZ4Frame(t, p)
		frames = append(frames, Frame{FileOff: int64(len(file)), FileSize: int64(len(f)), TextOff: int64(len(want)), TextSize: int64(len(p))})
		file = append(file, f...)
		want = append(want, p...)
	}
	fc := NewChain()
	var got []Frame
	fc.OnFrame = func(f Frame) { got = append(got, f) }
	fc.Reset(bytes.NewReader(file))
	out, err := io.ReadAll(fc)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, want) {
		t.Fatalf("decompressed %d bytes, want %d", len(out), len(want))
	}
	if len(got) != len(frames) {
		t.Fatalf("frames %v, want %v", got, frames)
	}
	for i := range got {
		if got[i] != frames[i] {
			t.Errorf("frame %d: %+v, want %+v", i, got[i], frames[i])
		}
	}
	// Cut anywhere inside a frame: a truncated-frame error naming it.
	for _, cut := range []int{3, 20, int(frames[1].FileOff) + 2, len(file) - 1} {
		fc.Reset(bytes.NewReader(file[:cut]))
		_, err := io.ReadAll(fc)
		var fe *FrameError
		if !errors.As(err, &fe) || !fe.Truncated {
			t.Errorf("cut at %d: %v, want a truncated frame", cut, err)
		}
	}
	// A flipped byte in the data: an error, never a panic.
	bad := append([]byte(nil), file...)
	bad[frames[0].FileOff+40] ^= 0xff
	fc.Reset(bytes.NewReader(bad))
	if _, err := io.ReadAll(fc); err == nil {
		t.Error("corrupt frame: no error")
	}
}

// The frame reader never panics, hangs or allocates without bound; what
// it accepts is a chain whose frames tile the input.
func FuzzFrameChain(f *testing.F) {
	f.Add(testutil.LZ4Frame(f, []byte("hello\n")))
	f.Add(append(testutil.LZ4Frame(f, bytes.Repeat([]byte("ab"), 1000)), testutil.LZ4Frame(f, nil)...))
	f.Add(testutil.LZ4Frame(f, nil)[:9])
	fc := NewChain()
	f.Fuzz(func(t *testing.T, data []byte) {
		var in, out int64
		fc.OnFrame = func(fr Frame) {
			if fr.FileOff != in || fr.TextOff != out {
				t.Fatalf("frame %+v does not follow %d, %d", fr, in, out)
			}
			in, out = fr.FileOff+fr.FileSize, fr.TextOff+fr.TextSize
		}
		fc.Reset(bytes.NewReader(data))
		n, err := io.Copy(io.Discard, io.LimitReader(fc, 64<<20))
		if err == nil && n < 64<<20 && (in != int64(len(data)) || out != n) {
			t.Fatalf("accepted: frames end at %d, %d; input %d, output %d", in, out, len(data), n)
		}
	})
}

// Frames marked as linked blocks, as autoclaved frames are, decode the
// same: a single-block one is passed to the decoder as independent, the
// two-block one as it is.
func TestFrameChain_Linked(t *testing.T) {
	var file, want []byte
	for _, p := range [][]byte{bytes.Repeat([]byte("ab"), 100000), {}, bytes.Repeat([]byte("xyz"), 5<<20/3), []byte("end\n")} {
		f := testutil.LZ4Frame(t, p)
		SetLinked(f, true)
		file = append(file, f...)
		want = append(want, p...)
	}
	fc := NewChain()
	fc.Reset(bytes.NewReader(file))
	out, err := io.ReadAll(fc)
	if err != nil || !bytes.Equal(out, want) {
		t.Fatalf("decompressed %d bytes of %d, %v", len(out), len(want), err)
	}
}
