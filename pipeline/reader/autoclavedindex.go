package reader

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
)

// AutoclavedRow is the kind of an autoclaved index row (docs/formats.md
// §2.3).
type AutoclavedRow uint8

// The row kinds, in the order a file's rows nest.
const (
	RowFile AutoclavedRow = iota + 1
	RowFrame
	RowReport
	RowDatum
	RowBadblob
	RowEndReport
	RowEndFrame
	RowEndFile
)

var rowNames = map[string]AutoclavedRow{"file": RowFile, "frame": RowFrame, "report": RowReport, "datum": RowDatum,
	"badblob": RowBadblob, "/report": RowEndReport, "/frame": RowEndFrame, "/file": RowEndFile}

func (k AutoclavedRow) String() string {
	for n, v := range rowNames {
		if v == k {
			return n
		}
	}
	return fmt.Sprintf("row(%d)", uint8(k))
}

// AutoclavedEvent is one row of an autoclaved index. Only the fields of
// its kind are set.
type AutoclavedEvent struct {
	Kind AutoclavedRow
	Line int // 1-based, in the decompressed index

	Filename string // file
	Textname string // report

	FileOff, FileSize int64 // frame: compressed range in the file; /file: FileSize
	TextOff, TextSize int64 // frame, datum: uncompressed range, absolute in the file's stream
	SrcOff, SrcSize   int64 // badblob: range in the raw report; report: SrcSize

	SHA1  [20]byte // report, datum, badblob: orig_sha1; /file: file_sha1
	CRC32 int32    // /file

	Cutoff    int64 // /report: src_cutoff, when HasCutoff
	HasCutoff bool
	Info      string // badblob, /report
}

// MaxAutoclavedIndexLine bounds an index row; a longer one is an error,
// so a corrupt index cannot make the reader allocate without bound.
const MaxAutoclavedIndexLine = 1 << 20

// AutoclavedIndex reads the decompressed event stream of an autoclaved
// index.json.gz and checks that its rows nest as the writer emits them: a
// file holds frames; every other row lies inside a frame; datum and
// badblob rows lie inside a report, which may span frames.
//
// Next returns each row; a row that does not parse or is out of order is
// an *IndexError, after which Next goes on with the next row (the state
// stays as the good rows left it). Datum rows, 99.9 % of an index, are
// parsed by hand when they have the writer's exact form, and with
// encoding/json otherwise.
type AutoclavedIndex struct {
	r      *bufio.Reader
	line   int
	inFile bool
	frame  bool
	report bool
	eof    bool
}

// NewAutoclavedIndex reads rows from r (the decompressed index).
func NewAutoclavedIndex(r io.Reader) *AutoclavedIndex {
	return &AutoclavedIndex{r: bufio.NewReaderSize(r, 64<<10)}
}

// Next returns the next row, or io.EOF after the last one. An index that
// ends inside a file or report is an error before io.EOF.
func (x *AutoclavedIndex) Next() (AutoclavedEvent, error) {
	for {
		if x.eof {
			return AutoclavedEvent{}, io.EOF
		}
		line, err := x.readLine()
		if err == io.EOF {
			x.eof = true
			if x.inFile || x.frame || x.report {
				return AutoclavedEvent{}, x.errorf("the index ends inside a %s", x.open())
			}
			return AutoclavedEvent{}, io.EOF
		}
		if err != nil {
			if errors.Is(err, errLongLine) {
				return AutoclavedEvent{}, x.errorf("row longer than %d bytes", MaxAutoclavedIndexLine)
			}
			x.eof = true
			return AutoclavedEvent{}, &IndexError{Line: x.line, Err: err}
		}
		ev, ok := parseRowFast(line)
		if !ok {
			if len(bytes.TrimSpace(line)) == 0 {
				continue
			}
			if ev, err = parseAutoclavedRow(line); err != nil {
				return AutoclavedEvent{}, x.errorf("%v", err)
			}
		}
		ev.Line = x.line
		if err := x.advance(ev.Kind); err != nil {
			return AutoclavedEvent{}, err
		}
		return ev, nil
	}
}

func (x *AutoclavedIndex) open() string {
	switch {
	case x.report:
		return "report"
	case x.frame:
		return "frame"
	}
	return "file"
}

func (x *AutoclavedIndex) errorf(format string, args ...any) error {
	return &IndexError{Line: x.line, Err: fmt.Errorf(format, args...)}
}

// advance checks that a row of kind k may come now and records it.
func (x *AutoclavedIndex) advance(k AutoclavedRow) error {
	bad := func(why string) error { return x.errorf("%s row %s", k, why) }
	switch k {
	case RowFile:
		if x.inFile {
			return bad("inside a file (no /file before it)")
		}
		x.inFile = true
	case RowEndFile:
		if !x.inFile || x.frame {
			return bad("outside a file or inside a frame")
		}
		if x.report {
			x.report = false
			return bad("inside a report (no /report before it)")
		}
		x.inFile = false
	case RowFrame:
		if !x.inFile || x.frame {
			return bad("outside a file or inside a frame")
		}
		x.frame = true
	case RowEndFrame:
		if !x.frame {
			return bad("outside a frame")
		}
		x.frame = false
	case RowReport:
		if !x.frame || x.report {
			return bad("outside a frame or inside a report")
		}
		x.report = true
	case RowEndReport, RowDatum, RowBadblob:
		if !x.frame || !x.report {
			return bad("outside a report or a frame")
		}
		if k == RowEndReport {
			x.report = false
		}
	}
	return nil
}

var errLongLine = errors.New("line too long")

func (x *AutoclavedIndex) readLine() ([]byte, error) {
	line, err := x.r.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		// Skip the rest of the row without keeping it.
		for err == bufio.ErrBufferFull {
			_, err = x.r.ReadSlice('\n')
		}
		x.line++
		if err == nil || err == io.EOF {
			return nil, errLongLine
		}
		return nil, err
	}
	if len(line) == 0 && err != nil {
		return nil, err
	}
	x.line++
	if err != nil && err != io.EOF {
		return nil, err
	}
	return line, nil
}

// parseRowFast parses the rows that make up nearly all of an index, when
// they are of exactly the writer's form: datum, frame, /frame and /report
// without a cutoff. Anything else is left to parseAutoclavedRow.
func parseRowFast(b []byte) (AutoclavedEvent, bool) {
	b = bytes.TrimRight(b, "\r\n")
	switch {
	case bytes.HasPrefix(b, []byte(`{"orig_sha1": "`)):
		return parseDatumFast(b)
	case bytes.HasPrefix(b, []byte(`{"file_off": `)):
		return parseFrameFast(b)
	case string(b) == `{"type": "/frame"}`:
		return AutoclavedEvent{Kind: RowEndFrame}, true
	case string(b) == `{"type": "/report"}`:
		return AutoclavedEvent{Kind: RowEndReport}, true
	}
	return AutoclavedEvent{}, false
}

// parseFrameFast parses a frame row of exactly the writer's form:
// {"file_off": N, "file_size": N, "text_off": N, "text_size": N, "type": "frame"}
func parseFrameFast(b []byte) (AutoclavedEvent, bool) {
	ev := AutoclavedEvent{Kind: RowFrame}
	var ok bool
	if ev.FileOff, b, ok = cutField(b, `{"file_off": `); !ok {
		return ev, false
	}
	if ev.FileSize, b, ok = cutField(b, `, "file_size": `); !ok {
		return ev, false
	}
	if ev.TextOff, b, ok = cutField(b, `, "text_off": `); !ok {
		return ev, false
	}
	if ev.TextSize, b, ok = cutField(b, `, "text_size": `); !ok {
		return ev, false
	}
	return ev, string(b) == `, "type": "frame"}`
}

// cutField cuts prefix and the decimal after it from b.
func cutField(b []byte, prefix string) (int64, []byte, bool) {
	b, ok := bytes.CutPrefix(b, []byte(prefix))
	if !ok {
		return 0, b, false
	}
	return cutUint(b)
}

// parseDatumFast parses a datum row (without its line end) of exactly the
// writer's form:
// {"orig_sha1": "<28 b64>", "text_off": N, "text_size": N, "type": "datum"}
func parseDatumFast(b []byte) (AutoclavedEvent, bool) {
	const (
		p1 = `{"orig_sha1": "`
		p2 = `", "text_off": `
		p3 = `, "text_size": `
		p4 = `, "type": "datum"}`
	)
	ev := AutoclavedEvent{Kind: RowDatum}
	if !bytes.HasPrefix(b, []byte(p1)) || len(b) < len(p1)+28+len(p2) {
		return ev, false
	}
	b = b[len(p1):]
	if !decodeSHA1(&ev.SHA1, b[:28]) {
		return ev, false
	}
	b = b[28:]
	var ok bool
	if b, ok = bytes.CutPrefix(b, []byte(p2)); !ok {
		return ev, false
	}
	if ev.TextOff, b, ok = cutUint(b); !ok {
		return ev, false
	}
	if b, ok = bytes.CutPrefix(b, []byte(p3)); !ok {
		return ev, false
	}
	if ev.TextSize, b, ok = cutUint(b); !ok {
		return ev, false
	}
	return ev, string(b) == p4
}

// cutUint reads a decimal without sign or leading zeros, up to 2^53.
func cutUint(b []byte) (int64, []byte, bool) {
	i := 0
	var v int64
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		if v > (1<<53)/10 {
			return 0, b, false
		}
		v = v*10 + int64(b[i]-'0')
		i++
	}
	if i == 0 || (i > 1 && b[0] == '0') || v > 1<<53 {
		return 0, b, false
	}
	return v, b[i:], true
}

// autoclavedRow is a row as encoding/json reads it.
type autoclavedRow struct {
	Type      *string  `json:"type"`
	Filename  *string  `json:"filename"`
	Textname  *string  `json:"textname"`
	FileOff   *float64 `json:"file_off"`
	FileSize  *float64 `json:"file_size"`
	TextOff   *float64 `json:"text_off"`
	TextSize  *float64 `json:"text_size"`
	SrcOff    *float64 `json:"src_off"`
	SrcSize   *float64 `json:"src_size"`
	SrcCutoff *float64 `json:"src_cutoff"`
	OrigSHA1  *string  `json:"orig_sha1"`
	FileSHA1  *string  `json:"file_sha1"`
	FileCRC32 *float64 `json:"file_crc32"`
	Info      *string  `json:"info"`
}

func parseAutoclavedRow(b []byte) (AutoclavedEvent, error) {
	var r autoclavedRow
	if err := json.Unmarshal(b, &r); err != nil {
		return AutoclavedEvent{}, fmt.Errorf("row does not parse as JSON: %v", err)
	}
	if r.Type == nil {
		return AutoclavedEvent{}, fmt.Errorf(`row without "type"`)
	}
	k, ok := rowNames[*r.Type]
	if !ok {
		return AutoclavedEvent{}, fmt.Errorf("unknown row type %q", *r.Type)
	}
	ev := AutoclavedEvent{Kind: k}
	var errs []error
	need := func(name string, p *float64, dst *int64) {
		switch {
		case p == nil:
			errs = append(errs, fmt.Errorf("%s row without %q", k, name))
		case *p < 0 || *p > 1<<53 || *p != math.Trunc(*p):
			errs = append(errs, fmt.Errorf("%s row: %s %v is not a size", k, name, *p))
		default:
			*dst = int64(*p)
		}
	}
	text := func(name string, p *string, dst *string) {
		if p == nil || *p == "" {
			errs = append(errs, fmt.Errorf("%s row without %q", k, name))
			return
		}
		*dst = *p
	}
	sha := func(name string, p *string) {
		if p == nil {
			errs = append(errs, fmt.Errorf("%s row without %q", k, name))
			return
		}
		if !decodeSHA1(&ev.SHA1, []byte(*p)) {
			errs = append(errs, fmt.Errorf("%s row: %s %q is not a base64 SHA-1", k, name, *p))
		}
	}
	switch k {
	case RowFile:
		text("filename", r.Filename, &ev.Filename)
	case RowFrame:
		need("file_off", r.FileOff, &ev.FileOff)
		need("file_size", r.FileSize, &ev.FileSize)
		need("text_off", r.TextOff, &ev.TextOff)
		need("text_size", r.TextSize, &ev.TextSize)
	case RowReport:
		text("textname", r.Textname, &ev.Textname)
		need("src_size", r.SrcSize, &ev.SrcSize)
		sha("orig_sha1", r.OrigSHA1)
	case RowDatum:
		need("text_off", r.TextOff, &ev.TextOff)
		need("text_size", r.TextSize, &ev.TextSize)
		sha("orig_sha1", r.OrigSHA1)
	case RowBadblob:
		need("src_off", r.SrcOff, &ev.SrcOff)
		need("src_size", r.SrcSize, &ev.SrcSize)
		sha("orig_sha1", r.OrigSHA1)
		if r.Info != nil {
			ev.Info = *r.Info
		}
	case RowEndReport:
		if r.SrcCutoff != nil {
			need("src_cutoff", r.SrcCutoff, &ev.Cutoff)
			ev.HasCutoff = true
		}
		if r.Info != nil {
			ev.Info = *r.Info
		}
	case RowEndFile:
		need("file_size", r.FileSize, &ev.FileSize)
		sha("file_sha1", r.FileSHA1)
		switch c := r.FileCRC32; {
		case c == nil:
			errs = append(errs, fmt.Errorf(`/file row without "file_crc32"`))
		case *c < math.MinInt32 || *c > math.MaxInt32 || *c != math.Trunc(*c):
			errs = append(errs, fmt.Errorf("/file row: file_crc32 %v is not a signed 32-bit CRC", *c))
		default:
			ev.CRC32 = int32(*c)
		}
	}
	return ev, errors.Join(errs...)
}

// decodeSHA1 decodes the 28-character base64 form of a SHA-1.
func decodeSHA1(dst *[20]byte, b64 []byte) bool {
	var buf [21]byte // 28 characters without padding decode to 21 bytes
	if len(b64) != 28 {
		return false
	}
	n, err := base64.StdEncoding.Decode(buf[:], b64)
	if err != nil || n != 20 {
		return false
	}
	copy(dst[:], buf[:20])
	return true
}
