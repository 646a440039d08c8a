package testutil

import (
	"bytes"
	"testing"

	"github.com/pierrec/lz4/v4"
)

// LZ4Frame compresses data into one LZ4 frame with the content size and
// checksum set, 4 MiB blocks.
func LZ4Frame(t testing.TB, data []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := lz4.NewWriter(&b)
	if err := zw.Apply(lz4.BlockSizeOption(lz4.Block4Mb), lz4.ChecksumOption(true), lz4.SizeOption(uint64(len(data))), lz4.ConcurrencyOption(1)); err != nil {
		t.Fatal(err)
	}
	if _, err := zw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}
