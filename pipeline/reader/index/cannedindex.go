// Package index parses the index of an OONI bucket, in either layout, one
// row at a time: a canned index.json.gz (a container per row, its reports'
// sizes and sums) and an autoclaved index (files, frames, reports, datums
// and badblobs, as events), each with a fast path for the rows the
// archive's writers wrote and the full JSON parse for any other. It reads
// rows and knows no container or folder.
package index

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/klauspost/compress/gzip"
)

// Text is one report as the canned index describes it: its textname and
// the size, SHA-1 and signed CRC-32 of the raw report.
type Text struct {
	Textname string
	Size     int64
	SHA1     [20]byte
	CRC32    int32 // Python 2 zlib.crc32: int32(crc32.ChecksumIEEE(raw))
}

// CannedFile is one row of a canned index.json.gz: a container file with
// the reports it holds.
type CannedFile struct {
	Filename string // "YYYY-MM-DD/<test_name>.<N>.tar.lz4" or "YYYY-MM-DD/<basename>.lz4"
	Size     int64  // of the .lz4 file
	SHA1     [20]byte
	CRC32    int32
	// TextSize is the uncompressed size: of the tar for a tar row, of the
	// report for an as-is row.
	TextSize int64
	// Tar is true for tar rows; Texts then follows the member order.
	Tar   bool
	Texts []Text
}

// ErrIndex is wrapped by every index error.
var ErrIndex = errors.New("bad index")

// Error locates a bad index row.
type Error struct {
	Line int // 1-based line of the decompressed index; 0 for the container
	Err  error
}

func (e *Error) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("index: %v", e.Err)
	}
	return fmt.Sprintf("index line %d: %v", e.Line, e.Err)
}

func (e *Error) Unwrap() []error { return []error{ErrIndex, e.Err} }

// MaxIndexRow bounds one row of an index. A tar row lists every report of
// a slice of at most 64 MiB of reports; each report takes at least 1 KiB
// of the tar (a header block and a data block; 1.5 KiB with the LongLink
// of a real textname) and under 250 bytes of the row, so a real row stays
// under 16 MiB. A longer row is skipped without being kept: a hostile
// index costs no more memory than this.
const MaxIndexRow = 16 << 20

// CannedReader reads the rows of a canned index: gzip-compressed JSON
// lines, or (for indexes written by shovel 0.0.13 and earlier) plain JSON
// lines, possibly under a .gz name, possibly ending with an empty line.
type CannedReader struct {
	// MaxRow bounds one row; NewCannedReader sets MaxIndexRow.
	MaxRow int

	br   *bufio.Reader
	gz   *gzip.Reader
	line int
	buf  []byte
	done bool
}

// NewCannedReader sniffs the gzip magic and returns a reader of r.
func NewCannedReader(r io.Reader) (*CannedReader, error) {
	ir := &CannedReader{MaxRow: MaxIndexRow}
	if err := ir.Reset(r); err != nil {
		return nil, err
	}
	return ir, nil
}

// Reset makes ir read r, reusing its buffers and decompressor.
func (ir *CannedReader) Reset(r io.Reader) error {
	src := bufio.NewReaderSize(r, 64<<10)
	magic, err := src.Peek(2)
	ir.line, ir.done, ir.buf = 0, false, ir.buf[:0]
	if err != nil && !errors.Is(err, io.EOF) {
		return &Error{Err: err}
	}
	if bytes.Equal(magic, []byte{0x1f, 0x8b}) {
		if ir.gz == nil {
			ir.gz, err = gzip.NewReader(src)
		} else {
			err = ir.gz.Reset(src)
		}
		if err != nil {
			return &Error{Err: fmt.Errorf("gzip header: %w", err)}
		}
		ir.br = bufio.NewReaderSize(ir.gz, 64<<10)
		return nil
	}
	ir.br = src
	return nil
}

// Next returns the next row. It returns io.EOF after the last row, an
// *Error for a bad row (the next call goes on with the row after it),
// and an *Error followed by io.EOF when the container itself is
// broken (truncated gzip, CRC error).
func (ir *CannedReader) Next() (CannedFile, error) {
	if ir.done {
		return CannedFile{}, io.EOF
	}
	line, err := ir.readLine()
	var long *longRowError
	if errors.As(err, &long) {
		return CannedFile{}, &Error{Line: ir.line, Err: err}
	}
	if err != nil {
		ir.done = true
		if errors.Is(err, io.EOF) {
			return CannedFile{}, io.EOF
		}
		return CannedFile{}, &Error{Line: ir.line, Err: err}
	}
	if len(bytes.TrimSpace(line)) == 0 {
		// The explicit empty-line EOF of old plain indexes: it must be
		// the last line.
		if _, err := ir.br.Peek(1); errors.Is(err, io.EOF) {
			ir.done = true
			return CannedFile{}, io.EOF
		}
		return CannedFile{}, &Error{Line: ir.line, Err: errors.New("empty line before the end of the index")}
	}
	f, err := parseCannedRow(line)
	if err != nil {
		return CannedFile{}, &Error{Line: ir.line, Err: err}
	}
	return f, nil
}

// readLine returns the next line without its "\n"; a last line without
// "\n" is returned too. A line over MaxRow is read to its end without
// being kept and is an *Error of its own; the next call goes on after
// it.
func (ir *CannedReader) readLine() ([]byte, error) {
	ir.buf = ir.buf[:0]
	ir.line++
	for {
		chunk, err := ir.br.ReadSlice('\n')
		if len(ir.buf)+len(chunk) > ir.MaxRow {
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = ir.br.ReadSlice('\n')
			}
			if err != nil && !errors.Is(err, io.EOF) {
				return nil, err
			}
			ir.buf = nil // do not keep what a hostile row made it grow to
			return nil, &longRowError{max: ir.MaxRow}
		}
		if need := len(ir.buf) + len(chunk); need > cap(ir.buf) && need > 1<<20 {
			// A row past 1 MiB gets room for MaxRow at once: doubling on
			// the way there would leave as much again behind as garbage.
			ir.buf = slices.Grow(ir.buf, ir.MaxRow-len(ir.buf))
		}
		ir.buf = append(ir.buf, chunk...)
		switch {
		case err == nil:
			return ir.buf[:len(ir.buf)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			if len(ir.buf) == 0 {
				return nil, io.EOF
			}
			return ir.buf, nil
		default:
			return nil, err
		}
	}
}

// longRowError is a row over MaxRow, skipped.
type longRowError struct{ max int }

func (e *longRowError) Error() string { return fmt.Sprintf("row longer than %d bytes; skipped", e.max) }

type rawText struct {
	CRC32    *json.Number `json:"text_crc32"`
	SHA1     *string      `json:"text_sha1"`
	Size     *json.Number `json:"text_size"`
	Textname *string      `json:"textname"`
}

type rawRow struct {
	FileCRC32 *json.Number `json:"file_crc32"`
	FileSHA1  *string      `json:"file_sha1"`
	FileSize  *json.Number `json:"file_size"`
	Filename  *string      `json:"filename"`
	TextSize  *json.Number `json:"text_size"`
	Canned    *[]rawText   `json:"canned"`
	rawText
}

func parseCannedRow(line []byte) (CannedFile, error) {
	if f, ok := parseCannedRowFast(line); ok {
		return f, nil
	}
	return parseCannedRowJSON(line)
}

// parseCannedRowJSON reads any row, as JSON.
func parseCannedRowJSON(line []byte) (CannedFile, error) {
	var r rawRow
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	if err := dec.Decode(&r); err != nil {
		return CannedFile{}, fmt.Errorf("not a JSON object: %w", err)
	}
	if dec.More() {
		return CannedFile{}, errors.New("data after the JSON object")
	}
	// oonipl/can.py requires these in every row.
	if r.FileCRC32 == nil || r.FileSHA1 == nil || r.FileSize == nil || r.Filename == nil {
		return CannedFile{}, errors.New("missing one of file_crc32, file_sha1, file_size, filename")
	}
	var f CannedFile
	var err error
	f.Filename = *r.Filename
	if f.Size, err = size("file_size", *r.FileSize); err != nil {
		return f, err
	}
	if f.CRC32, err = crc("file_crc32", *r.FileCRC32); err != nil {
		return f, err
	}
	if f.SHA1, err = sha("file_sha1", *r.FileSHA1); err != nil {
		return f, err
	}
	if r.TextSize == nil {
		return f, errors.New("missing text_size")
	}
	if f.TextSize, err = size("text_size", *r.TextSize); err != nil {
		return f, err
	}
	switch {
	case r.Canned != nil:
		if !strings.HasSuffix(f.Filename, ".tar.lz4") {
			return f, fmt.Errorf("tar row for %q, which is not a .tar.lz4", f.Filename)
		}
		f.Tar = true
		f.Texts = make([]Text, 0, len(*r.Canned))
		for i, rt := range *r.Canned {
			if rt.Size == nil {
				return f, fmt.Errorf("canned[%d]: missing text_size", i)
			}
			t, err := text(rt, *rt.Size)
			if err != nil {
				return f, fmt.Errorf("canned[%d]: %w", i, err)
			}
			f.Texts = append(f.Texts, t)
		}
	case r.Textname != nil:
		if !strings.HasSuffix(f.Filename, ".lz4") || strings.HasSuffix(f.Filename, ".tar.lz4") {
			return f, fmt.Errorf("as-is row for %q, which is not a report .lz4", f.Filename)
		}
		t, err := text(r.rawText, *r.TextSize)
		if err != nil {
			return f, err
		}
		f.Texts = []Text{t}
	default:
		return f, errors.New("neither a tar row (canned) nor an as-is row (textname)")
	}
	return f, nil
}

func text(rt rawText, sz json.Number) (Text, error) {
	if rt.Textname == nil || rt.SHA1 == nil || rt.CRC32 == nil {
		return Text{}, errors.New("missing one of textname, text_sha1, text_crc32")
	}
	t := Text{Textname: *rt.Textname}
	var err error
	if t.Size, err = size("text_size", sz); err != nil {
		return t, err
	}
	if t.CRC32, err = crc("text_crc32", *rt.CRC32); err != nil {
		return t, err
	}
	t.SHA1, err = sha("text_sha1", *rt.SHA1)
	return t, err
}

func size(key string, n json.Number) (int64, error) {
	v, err := n.Int64()
	if err != nil || v < 0 {
		return 0, fmt.Errorf("%s %s: not a size", key, n)
	}
	return v, nil
}

func crc(key string, n json.Number) (int32, error) {
	v, err := n.Int64()
	if err != nil || v < math.MinInt32 || v > math.MaxInt32 {
		return 0, fmt.Errorf("%s %s: not a signed 32-bit CRC", key, n)
	}
	return int32(v), nil
}

func sha(key, s string) ([20]byte, error) {
	var out [20]byte
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b) != len(out) {
		return out, fmt.Errorf("%s %q: not a base64 SHA-1", key, s)
	}
	copy(out[:], b)
	return out, nil
}
