// Package lines reads newline-terminated lines in bounded memory, for
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

// MaxLine bounds an input line of the streaming commands by default.
const MaxLine = 64 << 10

// TooLongError is returned by Reader.Next for a line longer than the
// reader's bound; the reader then continues after that line.
type TooLongError struct{ Max int }

func (e *TooLongError) Error() string { return fmt.Sprintf("longer than %d bytes", e.Max) }

// Is makes every TooLongError match ErrTooLong.
func (e *TooLongError) Is(target error) bool { return target == ErrTooLong }

// ErrTooLong is the error of a line longer than MaxLine; errors.Is
// matches it for any bound.
var ErrTooLong error = &TooLongError{MaxLine}

// Reader reads newline-terminated lines of at most a bound in memory
// that grows with the longest line read, up to that bound. A longer line
// is skipped whole (copied to the overflow writer, if any) and reported
// by Next.
type Reader struct {
	r        *bufio.Reader
	max      int
	overflow io.Writer // where a too-long line goes, or nil
	acc      []byte    // the line so far, when longer than r's buffer
	n        int       // number of the line last returned
	skipping bool      // discarding the rest of a too-long line
	err      error     // the overflow writer's error
}

// Buffered is how many bytes are read and not yet handed out: 0 when the
// next Next reads, and so may wait.
func (lr *Reader) Buffered() int { return lr.r.Buffered() }

// NewReader returns a Reader of r for lines of at most MaxLine bytes.
func NewReader(r io.Reader) *Reader { return NewReaderLimit(r, MaxLine, nil) }

// NewReaderLimit returns a Reader of r for lines of at most max bytes.
// A longer line, with its end of line, is copied to overflow (if not nil)
// as it is skipped, so no line is lost, however long.
func NewReaderLimit(r io.Reader, max int, overflow io.Writer) *Reader {
	return &Reader{r: bufio.NewReaderSize(r, min(max+2, MaxLine)), max: max, overflow: overflow}
}

// Next returns the next line without its "\n" or "\r\n", and its 1-based
// number. The slice is valid until the next call. At the end of input it
// returns io.EOF; for a line over the bound, a nil line and a
// *TooLongError.
func (lr *Reader) Next() (line []byte, n int, err error) {
	lr.acc = lr.acc[:0]
	for {
		chunk, err := lr.r.ReadSlice('\n')
		full := errors.Is(err, bufio.ErrBufferFull)
		if err != nil && !full && !errors.Is(err, io.EOF) {
			return nil, lr.n, err
		}
		if lr.skipping {
			lr.spill(chunk)
			if !full { // the too-long line ends here
				lr.skipping = false
				if len(chunk) == 0 || chunk[len(chunk)-1] != '\n' {
					lr.spill([]byte{'\n'})
				}
			}
			if lr.err != nil {
				return nil, lr.n, lr.err
			}
			continue
		}
		if full {
			if len(lr.acc)+len(chunk) > lr.max+2 { // +2: a "\r\n" may follow
				lr.n++
				lr.spill(lr.acc)
				lr.spill(chunk)
				lr.skipping = true
				return nil, lr.n, lr.tooLong()
			}
			lr.acc = append(lr.acc, chunk...)
			continue
		}
		if len(lr.acc) == 0 && len(chunk) == 0 {
			return nil, lr.n, io.EOF
		}
		lr.n++
		line = chunk
		if len(lr.acc) > 0 {
			lr.acc = append(lr.acc, chunk...)
			line = lr.acc
		}
		raw := line
		line = trimEOL(line)
		if len(line) > lr.max {
			lr.spill(raw)
			if raw[len(raw)-1] != '\n' { // the input ended without one
				lr.spill([]byte{'\n'})
			}
			return nil, lr.n, lr.tooLong()
		}
		return line, lr.n, nil
	}
}

func (lr *Reader) tooLong() error {
	if lr.err != nil {
		return lr.err
	}
	if lr.max == MaxLine {
		return ErrTooLong
	}
	return &TooLongError{lr.max}
}

func (lr *Reader) spill(b []byte) {
	if lr.overflow != nil && lr.err == nil && len(b) > 0 {
		if _, err := lr.overflow.Write(b); err != nil {
			lr.err = fmt.Errorf("write a line too long to keep: %w", err)
		}
	}
}

func trimEOL(line []byte) []byte {
	line = bytes.TrimSuffix(line, []byte{'\n'})
	return bytes.TrimSuffix(line, []byte{'\r'})
}

// Each calls fn with every line of r and its number; for a line longer
// than MaxLine it passes a nil line and ErrTooLong. It stops at the end
// of input, at the first error of fn, at a read error, or when ctx is done
// (checked every 65536 lines).
func Each(ctx context.Context, r io.Reader, fn func(line []byte, n int, tooLong error) error) error {
	return EachOf(ctx, NewReader(r), fn)
}

// EachOf is Each over the lines of lr.
func EachOf(ctx context.Context, lr *Reader, fn func(line []byte, n int, tooLong error) error) error {
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
