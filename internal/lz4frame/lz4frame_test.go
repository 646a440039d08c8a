package lz4frame

import (
	"bytes"
	"io"
	"testing"

	"github.com/pierrec/lz4/v4"
)

// HeaderChecksum gives the checksum byte the LZ4 writer puts in its frame
// headers, with and without the content size; a frame whose blocks
// SetLinked marks linked, then independent again, still decodes.
func TestHeaderChecksum(t *testing.T) {
	for _, opts := range [][]lz4.Option{
		{lz4.ChecksumOption(true)},
		{lz4.ChecksumOption(true), lz4.SizeOption(12345)},
		{lz4.BlockSizeOption(lz4.Block64Kb), lz4.SizeOption(1 << 40)},
		{lz4.BlockSizeOption(lz4.Block256Kb), lz4.ChecksumOption(false)},
	} {
		var b bytes.Buffer
		zw := lz4.NewWriter(&b)
		if err := zw.Apply(opts...); err != nil {
			t.Fatal(err)
		}
		zw.Write([]byte("x"))
		_ = zw.Close() // claims 12345 bytes and was given one: its header is what is tested
		h := b.Bytes()
		n := HeaderLen(h[4])
		if got := HeaderChecksum(h[4 : n-1]); got != h[n-1] {
			t.Errorf("descriptor %x: checksum %#x, the writer's %#x", h[4:n-1], got, h[n-1])
		}
		if h[4]&0x08 != 0 {
			continue // SizeOption claims more than "x"
		}
		for _, linked := range []bool{true, false} {
			SetLinked(h, linked)
			out, err := io.ReadAll(lz4.NewReader(bytes.NewReader(h)))
			if err != nil || string(out) != "x" {
				t.Errorf("linked %v: %q, %v", linked, out, err)
			}
		}
	}
}
