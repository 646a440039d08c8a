package index

import (
	"bufio"
	"bytes"
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

// Autoclaved reads the decompressed event stream of an autoclaved
// index.json.gz and checks that its rows nest as the writer emits them: a
// file holds frames; every other row lies inside a frame; datum and
// badblob rows lie inside a report, which may span frames.
//
// Next returns each row; a row that does not parse or is out of order is
// an *Error, after which Next goes on with the next row (the state
// stays as the good rows left it). Datum rows, 99.9 % of an index, are
// parsed by hand when they have the writer's exact form, and with
// encoding/json otherwise.
type Autoclaved struct {
	r      *bufio.Reader
	line   int
	inFile bool
	frame  bool
	report bool
	eof    bool
	ev     AutoclavedEvent
}

// NewAutoclaved reads rows from r (the decompressed index).
func NewAutoclaved(r io.Reader) *Autoclaved {
	return &Autoclaved{r: bufio.NewReaderSize(r, 64<<10)}
}

// Ended tells whether the index has been read to its end, or to an error
// that ends it: after an error, Next may go on to the next row only when
// Ended is false.
func (x *Autoclaved) Ended() bool { return x.eof }

// Next returns the next row, or io.EOF after the last one. An index that
// ends inside a file or report is an error before io.EOF. The row is the
// reader's own: it holds until the next call.
func (x *Autoclaved) Next() (*AutoclavedEvent, error) {
	for {
		if x.eof {
			return nil, io.EOF
		}
		line, err := x.readLine()
		if err == io.EOF {
			x.eof = true
			if x.inFile || x.frame || x.report {
				return nil, x.errorf("the index ends inside a %s", x.open())
			}
			return nil, io.EOF
		}
		if err != nil {
			if errors.Is(err, errLongLine) {
				return nil, x.errorf("row longer than %d bytes", MaxAutoclavedIndexLine)
			}
			x.eof = true
			return nil, &Error{Line: x.line, Err: err}
		}
		ev := &x.ev
		if !parseRowFast(line, ev) {
			if len(bytes.TrimSpace(line)) == 0 {
				continue
			}
			if *ev, err = parseAutoclavedRow(line); err != nil {
				return nil, x.errorf("%v", err)
			}
		}
		ev.Line = x.line
		if err := x.advance(ev.Kind); err != nil {
			return nil, err
		}
		return ev, nil
	}
}

func (x *Autoclaved) open() string {
	switch {
	case x.report:
		return "report"
	case x.frame:
		return "frame"
	}
	return "file"
}

func (x *Autoclaved) errorf(format string, args ...any) error {
	return &Error{Line: x.line, Err: fmt.Errorf(format, args...)}
}

// advance checks that a row of kind k may come now and records it.
func (x *Autoclaved) advance(k AutoclavedRow) error {
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

func (x *Autoclaved) readLine() ([]byte, error) {
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

// parseRowFast parses into ev a row of exactly the form the autoclaving writer
// gives it (docs/formats.md §2.3): its keys in sorted order, ", " and ": "
// between them, decimals without exponent or leading zero (of sizes up to
// 2^53), and strings of printable ASCII without escapes: the canned index
// reader's rowScan reads them. Anything else, and every row it does not take, is left to
// parseAutoclavedRow, which reads it with encoding/json.
func parseRowFast(b []byte, ev *AutoclavedEvent) bool {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	s := rowScan{b: b, ok: true}
	*ev = AutoclavedEvent{}
	switch {
	case s.lit(`{"orig_sha1": `):
		ev.SHA1 = s.sha1()
		if s.lit(`, "text_off": `) {
			ev.Kind = RowDatum
			ev.TextOff = s.offset(`, "text_size": `)
			ev.TextSize = s.offset(`, "type": "datum"}`)
		} else {
			ev.Kind = RowReport
			s.want(`, "src_size": `)
			ev.SrcSize = s.offset(`, "textname": `)
			ev.Textname = s.str()
			s.want(`, "type": "report"}`)
		}
	case s.lit(`{"file_off": `):
		ev.Kind = RowFrame
		ev.FileOff = s.offset(`, "file_size": `)
		ev.FileSize = s.offset(`, "text_off": `)
		ev.TextOff = s.offset(`, "text_size": `)
		ev.TextSize = s.offset(`, "type": "frame"}`)
	case s.lit(`{"type": "/frame"}`):
		ev.Kind = RowEndFrame
	case s.lit(`{"type": "/report"}`):
		ev.Kind = RowEndReport
	case s.lit(`{"filename": `):
		ev.Kind = RowFile
		ev.Filename = s.str()
		s.want(`, "type": "file"}`)
	case s.lit(`{"file_crc32": `):
		ev.Kind = RowEndFile
		ev.CRC32 = s.crc()
		s.want(`, "file_sha1": `)
		ev.SHA1 = s.sha1()
		s.want(`, "file_size": `)
		ev.FileSize = s.offset(`, "type": "/file"}`)
	case s.lit(`{"info": `):
		ev.Info = s.str()
		if s.lit(`, "src_cutoff": `) {
			ev.Kind, ev.HasCutoff = RowEndReport, true
			ev.Cutoff = s.offset(`, "type": "/report"}`)
		} else {
			ev.Kind = RowBadblob
			s.want(`, "orig_sha1": `)
			ev.SHA1 = s.sha1()
			s.want(`, "src_off": `)
			ev.SrcOff = s.offset(`, "src_size": `)
			ev.SrcSize = s.offset(`, "type": "badblob"}`)
		}
	default:
		return false
	}
	return s.ok && len(s.b) == 0 && (ev.Kind != RowFile || ev.Filename != "") && (ev.Kind != RowReport || ev.Textname != "")
}

// offset reads a size or offset of an autoclaved index, a decimal without
// sign or leading zero of at most 2^53 (as encoding/json, which reads
// numbers as float64, takes them), and then the literal after it.
func (s *rowScan) offset(after string) int64 {
	n := 0
	var v int64
	for n < len(s.b) && n < 17 && s.b[n] >= '0' && s.b[n] <= '9' {
		v = 10*v + int64(s.b[n]-'0')
		n++
	}
	if n == 0 || n > 1 && s.b[0] == '0' || v > 1<<53 {
		s.ok = false
		return 0
	}
	s.b = s.b[n:]
	s.want(after)
	return v
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

// decodeSHA1 decodes the 28-character base64 form of a SHA-1 (27
// characters and one "="), as base64.StdEncoding does, by table: the
// index holds one for every measurement.
func decodeSHA1(dst *[20]byte, b64 []byte) bool {
	if len(b64) != 28 || b64[27] != '=' {
		return false
	}
	var bad byte
	get := func(i int) uint32 {
		v := b64Value[b64[i]]
		bad |= v
		return uint32(v)
	}
	for g := range 6 {
		v := get(4*g)<<18 | get(4*g+1)<<12 | get(4*g+2)<<6 | get(4*g+3)
		dst[3*g], dst[3*g+1], dst[3*g+2] = byte(v>>16), byte(v>>8), byte(v)
	}
	v := get(24)<<18 | get(25)<<12 | get(26)<<6
	dst[18], dst[19] = byte(v>>16), byte(v>>8)
	return bad&0x80 == 0
}

// b64Value is the value of each base64 character, and 0xff for the rest.
var b64Value = func() (t [256]byte) {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	for i := range t {
		t[i] = 0xff
	}
	for i := range len(alphabet) {
		t[alphabet[i]] = byte(i)
	}
	return t
}()
