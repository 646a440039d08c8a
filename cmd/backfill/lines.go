package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// lineReader reads newline-terminated lines of at most maxLine bytes in
// constant memory. A longer line is skipped whole and reported by Next.
type lineReader struct {
	r       *bufio.Reader
	n       int // number of the line last returned
	tooLong bool
}

// maxLine bounds an input line of the streaming commands.
const maxLine = 64 << 10

func newLineReader(r io.Reader) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, maxLine)}
}

// errLineTooLong is returned by Next for a line longer than maxLine; the
// reader then continues after that line.
var errLineTooLong = fmt.Errorf("longer than %d bytes", maxLine)

// Next returns the next line without its "\n" or "\r\n", and its 1-based
// number. The slice is valid until the next call. At the end of input it
// returns io.EOF.
func (lr *lineReader) Next() (line []byte, n int, err error) {
	for {
		line, err = lr.r.ReadSlice('\n')
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			if !lr.tooLong {
				lr.tooLong = true
				lr.n++
				return nil, lr.n, errLineTooLong
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
