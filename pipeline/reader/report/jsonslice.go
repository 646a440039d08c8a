package report

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/backfill-dev/backfill/pipeline/deadletter"
)

// Blob is one measurement document of a raw report: its byte range in the
// report. For JSON reports the range excludes the line's "\n".
type Blob struct {
	Offset int64
	Size   int64
}

// Why a slicer gave up on the rest of a report, as the OONI pipeline named
// it.
const (
	ReasonBrokenFrame     = deadletter.BrokenFrame     // garbage between documents (BrokenFrameError)
	ReasonTruncatedReport = deadletter.TruncatedReport // unterminated last document (TruncatedReportError)
)

// ErrSlice is wrapped by every SliceError.
var ErrSlice = errors.New("report cut off")

// SliceError ends a report early: the blobs before Offset were read, the
// bytes from Offset on are not measurements.
type SliceError struct {
	Reason string // ReasonBrokenFrame or ReasonTruncatedReport
	Offset int64  // the cutoff (src_cutoff)
	Detail string
}

func (e *SliceError) Error() string {
	return fmt.Sprintf("%s at byte %d: %s", e.Reason, e.Offset, e.Detail)
}

func (e *SliceError) Unwrap() error { return ErrSlice }

// JSONSlicer cuts a JSON-lines report into blobs as the autoclaving step
// did: a blob starts with '{' and ends at the first "}\n"; anything else
// where a blob should start (a blank line, say) is a broken frame, and a
// last blob without its "}\n" is a truncated report. It reads in constant
// memory whatever the size of a blob: a blob that fits its buffer is found
// there and given to Content in one piece; a longer one is streamed.
type JSONSlicer struct {
	r   *bufio.Reader
	off int64
	// Content, when set, receives the bytes of each blob (without the
	// "\n") as they are read, e.g. to hash or validate it.
	Content io.Writer
	done    bool
	// streamedCut is set when the report ended inside a blob streamed to
	// Content: the bytes from the cut on went there, not to the buffer.
	streamedCut bool
	// Joined tells whether the last blob Next returned holds a newline:
	// it spans lines.
	Joined bool
}

// NewJSONSlicer returns a slicer of r.
func NewJSONSlicer(r io.Reader) *JSONSlicer {
	return &JSONSlicer{r: bufio.NewReaderSize(r, 64<<10)}
}

// Reset makes s slice r from its start, keeping its buffer and Content.
func (s *JSONSlicer) Reset(r io.Reader) {
	s.r.Reset(r)
	s.off, s.done, s.streamedCut = 0, false, false
}

// Rest returns a reader of the report from a cut on (the offset of the
// *SliceError Next returned), and false when those bytes were streamed to
// Content instead (the report ended inside a blob longer than the
// buffer).
func (s *JSONSlicer) Rest() (*bufio.Reader, bool) { return s.r, !s.streamedCut }

// Next returns the next blob. At the end of the report it returns io.EOF;
// when the rest of the report is not blobs it returns a *SliceError, and
// io.EOF after that. Errors of the underlying reader are returned as they
// are.
func (s *JSONSlicer) Next() (Blob, error) {
	if s.done {
		return Blob{}, io.EOF
	}
	buf, err := s.r.Peek(s.r.Buffered())
	if len(buf) == 0 {
		buf, err = s.r.Peek(1)
	}
	switch {
	case len(buf) == 0 && errors.Is(err, io.EOF):
		s.done = true
		return Blob{}, io.EOF
	case len(buf) == 0:
		return Blob{}, err
	case buf[0] != '{':
		s.done = true
		return Blob{}, &SliceError{Reason: ReasonBrokenFrame, Offset: s.off, Detail: fmt.Sprintf("a document starts with %q, not '{'", buf[0])}
	}
	// The blob in the buffer: in what is buffered, else in a full buffer.
	searched := 0
	s.Joined = false
	for {
		n, joined := jsonEnd(buf, searched)
		s.Joined = s.Joined || joined
		if n > 0 {
			if err := s.emit(buf[:n]); err != nil {
				return Blob{}, err
			}
			start := s.off
			s.discard(n + 1)
			return Blob{Offset: start, Size: int64(n)}, nil
		}
		switch {
		case errors.Is(err, io.EOF):
			s.done = true
			return Blob{}, &SliceError{Reason: ReasonTruncatedReport, Offset: s.off, Detail: truncatedJSON}
		case err != nil:
			return Blob{}, err
		case len(buf) == s.r.Size():
			return s.stream()
		}
		searched = len(buf)
		buf, err = s.r.Peek(s.r.Size())
		if errors.Is(err, bufio.ErrBufferFull) {
			err = nil
		}
	}
}

// jsonEnd is the length of the blob at the start of buf (the index of the
// "\n" of its "}\n"), 0 when buf does not hold its end; the first from
// bytes of buf are known to hold none. joined tells whether it passed a
// newline of the blob's own.
func jsonEnd(buf []byte, from int) (n int, joined bool) {
	i := max(from, 1)
	for {
		j := bytes.IndexByte(buf[i:], '\n')
		if j < 0 {
			return 0, joined
		}
		i += j
		if buf[i-1] == '}' {
			return i, joined
		}
		joined = true
		i++
	}
}

func (s *JSONSlicer) discard(n int) {
	d, _ := s.r.Discard(n)
	s.off += int64(d)
}

// stream reads the blob that starts at the reader's position ('{', as Next
// checked) piece by piece: it is longer than the buffer (and the report
// may end or fail inside it).
func (s *JSONSlicer) stream() (Blob, error) {
	start := s.off
	prev := byte('{')
	if err := s.emit(openBrace); err != nil {
		return Blob{}, err
	}
	s.discard(1)
	for {
		chunk, err := s.r.ReadSlice('\n')
		if len(chunk) > 0 && chunk[len(chunk)-1] == '\n' {
			last := prev
			if len(chunk) > 1 {
				last = chunk[len(chunk)-2]
			}
			s.off += int64(len(chunk))
			if err := s.emit(chunk[:len(chunk)-1]); err != nil {
				return Blob{}, err
			}
			if last == '}' {
				return Blob{Offset: start, Size: s.off - 1 - start}, nil
			}
			// A newline inside the document: it goes on, and the newline is
			// part of it.
			s.Joined = true
			if err := s.emit(newline); err != nil {
				return Blob{}, err
			}
			prev = '\n'
			continue
		}
		s.off += int64(len(chunk))
		if err := s.emit(chunk); err != nil {
			return Blob{}, err
		}
		if len(chunk) > 0 {
			prev = chunk[len(chunk)-1]
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			s.done, s.streamedCut = true, true
			return Blob{}, &SliceError{Reason: ReasonTruncatedReport, Offset: start, Detail: truncatedJSON}
		default:
			return Blob{}, err
		}
	}
}

var openBrace, newline = []byte{'{'}, []byte{'\n'}

const truncatedJSON = "the last document has no closing \"}\\n\""

func (s *JSONSlicer) emit(p []byte) error {
	if s.Content == nil || len(p) == 0 {
		return nil
	}
	_, err := s.Content.Write(p)
	return err
}
