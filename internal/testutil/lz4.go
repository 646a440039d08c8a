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
	return LZ4(t, data, lz4.BlockSizeOption(lz4.Block4Mb), lz4.ChecksumOption(true), lz4.SizeOption(uint64(len(data))), lz4.ConcurrencyOption(1))
}

// LZ4 compresses data with pierrec/lz4's writer under the options.
func LZ4(t testing.TB, data []byte, opts ...lz4.Option) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := lz4.NewWriter(&b)
	if err := zw.Apply(opts...); err != nil {
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
