package report

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// YAMLSlicer cuts a multi-document YAML report into blobs as the
// autoclaving step did (stream_yaml_blobs): a blob starts with "---\n" at
// a line start and ends at the first "\n...\n", both markers included.
// Between documents, lines starting with '#' and extra "...\n" trailers
// are skipped; anything else is a broken frame, and a document without its
// "...\n" (or fewer than four bytes left over) is a truncated report. The
// header document is returned like any other: telling it apart, and
// skipping documents that load as a falsy value, is the caller's business.
// It reads in constant memory whatever the size of a document: one that
// fits its buffer is found there and given to Content in one piece; a
// longer one is streamed.
type YAMLSlicer struct {
	r   *bufio.Reader
	off int64
	// Content, when set, receives the bytes of each blob, markers included,
	// as they are read.
	Content io.Writer
	done    bool
}

// NewYAMLSlicer returns a slicer of r.
func NewYAMLSlicer(r io.Reader) *YAMLSlicer {
	return &YAMLSlicer{r: bufio.NewReaderSize(r, 64<<10)}
}

// Reset makes s slice r from its start, keeping its buffer and Content.
func (s *YAMLSlicer) Reset(r io.Reader) {
	s.r.Reset(r)
	s.off, s.done = 0, false
}

var (
	docStart = []byte("---\n")
	docEnd   = []byte("...\n")
)

// Next returns the next blob. At the end of the report it returns io.EOF;
// when the rest of the report is not blobs it returns a *SliceError, and
// io.EOF after that. Errors of the underlying reader are returned as they
// are.
func (s *YAMLSlicer) Next() (Blob, error) {
	if s.done {
		return Blob{}, io.EOF
	}
	for {
		prefix, err := s.r.Peek(4)
		switch {
		case len(prefix) == 0 && errors.Is(err, io.EOF):
			s.done = true
			return Blob{}, io.EOF
		case len(prefix) < 4 && errors.Is(err, io.EOF):
			return Blob{}, s.cut(ReasonTruncatedReport, s.off, fmt.Sprintf("%d bytes left over after the last document", len(prefix)))
		case err != nil && len(prefix) < 4:
			return Blob{}, err
		case bytes.Equal(prefix, docStart):
			return s.document()
		case bytes.Equal(prefix, docEnd):
			s.discard(4)
		case prefix[0] == '#':
			start := s.off
			for {
				line, err := s.r.ReadSlice('\n')
				s.off += int64(len(line))
				if err == nil {
					break
				}
				if errors.Is(err, bufio.ErrBufferFull) {
					continue
				}
				if errors.Is(err, io.EOF) {
					return Blob{}, s.cut(ReasonTruncatedReport, start, "a comment line has no newline")
				}
				return Blob{}, err
			}
		default:
			return Blob{}, s.cut(ReasonBrokenFrame, s.off, fmt.Sprintf("a document starts with %q, not \"---\\n\"", prefix))
		}
	}
}

// docEndLine is the end marker with the newline before it.
var docEndLine = []byte("\n...\n")

// document reads one blob from its "---\n" to its "\n...\n": in what is
// buffered, else in a full buffer, else streamed.
func (s *YAMLSlicer) document() (Blob, error) {
	buf, err := s.r.Peek(s.r.Buffered())
	// The "\n" of "---\n" may begin the end marker: "---\n...\n" is a
	// whole (empty) document.
	from := len(docStart) - 1
	for {
		if i := endMarker(buf, from); i >= 0 {
			n := i + len(docEndLine)
			if err := s.emit(buf[:n]); err != nil {
				return Blob{}, err
			}
			start := s.off
			s.discard(n)
			return Blob{Offset: start, Size: int64(n)}, nil
		}
		switch {
		case errors.Is(err, io.EOF):
			return Blob{}, s.cut(ReasonTruncatedReport, s.off, truncatedYAML)
		case err != nil:
			return Blob{}, err
		case len(buf) == s.r.Size():
			return s.stream()
		}
		from = max(from, len(buf)-len(docEndLine)+1)
		buf, err = s.r.Peek(s.r.Size())
		if errors.Is(err, bufio.ErrBufferFull) {
			err = nil
		}
	}
}

// endMarker is the index of the first "\n...\n" of buf that starts at
// from or later, -1 when there is none. It looks for the dots: a YAML
// report has about half as many as newlines, and a search for the marker
// itself stops at every newline.
func endMarker(buf []byte, from int) int {
	i := from + 1 // the first dot of a marker that starts at from
	for i+3 < len(buf) {
		j := bytes.IndexByte(buf[i:len(buf)-3], '.')
		if j < 0 {
			return -1
		}
		i += j
		if buf[i-1] == '\n' && buf[i+1] == '.' && buf[i+2] == '.' && buf[i+3] == '\n' {
			return i - 1
		}
		i++
	}
	return -1
}

const truncatedYAML = "the last document has no closing \"...\\n\""

// stream reads the document that starts at the reader's position piece by
// piece: it is longer than the buffer (and the report may end or fail
// inside it).
func (s *YAMLSlicer) stream() (Blob, error) {
	start := s.off
	// The "\n" of "---\n" may begin the end marker: "---\n...\n" is a
	// whole (empty) document, so every line after the first is checked.
	atLineStart := false
	for {
		line, err := s.r.ReadSlice('\n')
		s.off += int64(len(line))
		if werr := s.emit(line); werr != nil {
			return Blob{}, werr
		}
		if err == nil {
			if atLineStart && bytes.Equal(line, docEnd) {
				return Blob{Offset: start, Size: s.off - start}, nil
			}
			atLineStart = true
			continue
		}
		atLineStart = false
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			return Blob{}, s.cut(ReasonTruncatedReport, start, truncatedYAML)
		default:
			return Blob{}, err
		}
	}
}

func (s *YAMLSlicer) discard(n int) {
	d, _ := s.r.Discard(n)
	s.off += int64(d)
}

func (s *YAMLSlicer) cut(reason string, off int64, detail string) error {
	s.done = true
	return &SliceError{Reason: reason, Offset: off, Detail: detail}
}

func (s *YAMLSlicer) emit(p []byte) error {
	if s.Content == nil || len(p) == 0 {
		return nil
	}
	_, err := s.Content.Write(p)
	return err
}
