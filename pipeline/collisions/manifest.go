package collisions

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/backfill-dev/backfill/pipeline/ooid"
)

// MaxManifestLine bounds a manifest line: a textname of at most
// ooid.MaxTextnameLen bytes, a tab and a count.
const MaxManifestLine = ooid.MaxTextnameLen + 16

// ManifestError is a manifest line that is not TEXTNAME<TAB>N.
type ManifestError struct {
	Line int64
	Msg  string
}

func (e *ManifestError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Msg) }

// ReadManifest reads a report manifest: one TEXTNAME<TAB>N line per
// report, N the number of measurements (0..2^32-1); a trailing "\r" and
// empty lines are allowed. It calls fn for every good line (the textname
// is only valid during the call) and bad for every other one, with a
// [*ManifestError], and goes on. The error is for reading itself, or the
// first error fn returns. Memory stays bounded whatever the input: an
// overlong line is skipped to its end.
func ReadManifest(r io.Reader, fn func(line int64, textname []byte, n uint32) error, bad func(error)) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var line int64
	for {
		b, err := br.ReadSlice('\n')
		line++
		if errors.Is(err, bufio.ErrBufferFull) {
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = br.ReadSlice('\n')
			}
			bad(&ManifestError{line, fmt.Sprintf("longer than %d bytes", MaxManifestLine)})
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			continue
		}
		if err != nil && err != io.EOF {
			return err
		}
		if len(b) > 0 {
			if e := parseManifestLine(line, b, fn, bad); e != nil {
				return e
			}
		}
		if err == io.EOF {
			return nil
		}
	}
}

func parseManifestLine(line int64, b []byte, fn func(int64, []byte, uint32) error, bad func(error)) error {
	b = bytes.TrimSuffix(b, []byte{'\n'})
	b = bytes.TrimSuffix(b, []byte{'\r'})
	if len(b) == 0 {
		return nil
	}
	if len(b) > MaxManifestLine {
		bad(&ManifestError{line, fmt.Sprintf("longer than %d bytes", MaxManifestLine)})
		return nil
	}
	name, num, ok := bytes.Cut(b, []byte{'\t'})
	if !ok {
		bad(&ManifestError{line, "no tab: want TEXTNAME<TAB>N"})
		return nil
	}
	n, err := strconv.ParseUint(string(num), 10, 32)
	if err != nil || len(name) == 0 {
		bad(&ManifestError{line, fmt.Sprintf("want TEXTNAME<TAB>N with N a count of measurements, got %q", b)})
		return nil
	}
	return fn(line, name, uint32(n))
}
