package reader

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"io/fs"

	"github.com/klauspost/compress/gzip"

	"github.com/backfill-dev/backfill/internal/store"
)

// indexFile is a bucket's index file, opened once. Its raw bytes go to the
// fingerprint as they are read, and whatever is left of them when it is
// closed, so the fingerprint covers the whole file however far it was
// parsed.
type indexFile struct {
	f   fs.File
	err error         // of opening it; os.ErrNotExist when there is none
	raw *bufio.Reader // the raw bytes, through the fingerprint
	fp  io.Writer
}

// indexBuffer is the raw read buffer; the layout is told from the first
// row decompressed from what it holds.
const indexBuffer = 256 << 10

func openIndex(ctx context.Context, fsys store.Store, date string, fp io.Writer) *indexFile {
	f, err := fsys.Open(ctx, date+"/"+IndexName)
	ix := &indexFile{f: f, err: err, fp: fp}
	if err == nil {
		ix.raw = bufio.NewReaderSize(io.TeeReader(f, fp), indexBuffer)
	}
	return ix
}

// firstRow returns the first row of the decompressed index, at most 4096
// bytes of it, trimmed, without consuming anything: ok is false when
// there is no index, or no row to tell the layout by; a nil row with ok
// means a gzip header that does not parse.
func (ix *indexFile) firstRow() (row []byte, ok bool) {
	if ix.err != nil {
		return nil, false
	}
	prefix, _ := ix.raw.Peek(indexBuffer)
	var r io.Reader = bytes.NewReader(prefix)
	if bytes.HasPrefix(prefix, []byte{0x1f, 0x8b}) {
		gz, err := gzip.NewReader(r)
		if err != nil {
			return nil, true
		}
		r = gz
	}
	line, _ := bufio.NewReaderSize(r, 4096).ReadSlice('\n')
	line = bytes.TrimSpace(line)
	return line, len(line) > 0
}

// close feeds the fingerprint what was not read, and closes the file. It
// may be called more than once.
func (ix *indexFile) close() {
	if ix.f == nil {
		return
	}
	_, _ = io.Copy(ix.fp, ix.f) // the fingerprint only: a file that cannot be read fails its bucket's read
	ix.f.Close()
	ix.f = nil
}
