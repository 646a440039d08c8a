// Package lines reads newline-terminated lines in constant memory, for
// the commands that stream standard input.
package lines

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
)

// Reader reads newline-terminated lines of at most MaxLine bytes in
// constant memory. A longer line is skipped whole and reported by Next.
type Reader struct {
	r       *bufio.Reader
	n       int // number of the line last returned
	tooLong bool
}

// MaxLine bounds an input line of the streaming commands.
const MaxLine = 64 << 10

// NewReader returns a Reader of r.
func NewReader(r io.Reader) *Reader {
	return &Reader{r: bufio.NewReaderSize(r, MaxLine)}
}

// ErrTooLong is returned by Next for a line longer than MaxLine; the
// reader then continues after that line.
var ErrTooLong = fmt.Errorf("longer than %d bytes", MaxLine)

// Next returns the next line without its "\n" or "\r\n", and its 1-based
// number. The slice is valid until the next call. At the end of input it
// returns io.EOF.
func (lr *Reader) Next() (line []byte, n int, err error) {
	for {
		line, err = lr.r.ReadSlice('\n')
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			if !lr.tooLong {
				lr.tooLong = true
				lr.n++
				return nil, lr.n, ErrTooLong
			}
			continue
		case err != nil && !errors.Is(err, io.EOF):
			return nil, lr.n, err
		case len(line) == 0:
			return nil, lr.n, io.EOF
		}
		if lr.tooLong { // the tail of a long line
			lr.tooLong = false
			continue
		}
		lr.n++
		line = bytes.TrimSuffix(line, []byte{'\n'})
		return bytes.TrimSuffix(line, []byte{'\r'}), lr.n, nil
	}
}

// Each calls fn with every line of r and its number; for a line longer
// than MaxLine it passes a nil line and ErrTooLong. It stops at the end
// of input, at the first error of fn, at a read error, or when ctx is done
// (checked every 65536 lines).
func Each(ctx context.Context, r io.Reader, fn func(line []byte, n int, tooLong error) error) error {
	lr := NewReader(r)
	for {
		line, n, err := lr.Next()
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case errors.Is(err, ErrTooLong):
		case err != nil:
			return fmt.Errorf("read standard input: %w", err)
		}
		if n&0xFFFF == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		if err := fn(line, n, err); err != nil {
			return err
		}
	}
}
