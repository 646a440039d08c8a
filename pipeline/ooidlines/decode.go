package ooidlines

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/backfill-dev/backfill/internal/lines"
	"github.com/backfill-dev/backfill/pipeline/ooid"
)

// Decoder decodes (and with verify checks) OOIDs one at a time, writing a
// JSON line for each and counting those it could not, each told to
// reject with where it was and why.
type Decoder struct {
	out    *bufio.Writer
	reject func(where, why string)
	verify bool
	scheme ooid.Scheme
	Bad    int // OOIDs not decoded, or not verified
	buf    []byte
}

// NewDecoder decodes to w; with verify, lines OOID<TAB>TEXTNAME<TAB>NDX
// are checked against the scheme.
func NewDecoder(w io.Writer, verify bool, scheme ooid.Scheme, reject func(where, why string)) *Decoder {
	return &Decoder{out: bufio.NewWriter(w), reject: reject, verify: verify, scheme: scheme}
}

// Lines decodes every line of r.
func (d *Decoder) Lines(ctx context.Context, r io.Reader) error {
	return lines.Each(ctx, r, func(line []byte, n int, tooLong error) error {
		where := "line " + strconv.Itoa(n)
		if tooLong != nil {
			d.Bad++
			d.reject(where, tooLong.Error())
			return nil
		}
		return d.Decode(line, where)
	})
}

// Flush writes what is buffered.
func (d *Decoder) Flush() error { return d.out.Flush() }

// Decode decodes the OOID of text (or, with verify, of the OOID TEXTNAME
// NDX line text); where names it in messages. Its error is the output's.
func (d *Decoder) Decode(text []byte, where string) error {
	var v verdict
	if d.verify {
		var ok bool
		if text, v, ok = d.verifyLine(text, where); !ok {
			d.Bad++
			return nil
		}
	}
	id, err := ooid.ParseAny(text)
	if err != nil {
		d.Bad++
		d.reject(where, err.Error())
		return nil
	}
	buf := appendDecoded(d.buf[:0], id.Decode())
	if d.verify {
		buf = buf[:len(buf)-2] // "}\n"
		if id == v.want {
			buf = append(buf, `,"verified":true}`+"\n"...)
		} else {
			d.Bad++
			d.reject(where, fmt.Sprintf("%s is not measurement %d of %s under %s (that is %s)", id, v.ndx, v.textname, d.scheme, v.want))
			buf = append(buf, `,"verified":false,"expected":"`...)
			buf = v.want.AppendText(buf)
			buf = append(buf, "\"}\n"...)
		}
	}
	d.buf = buf
	_, err = d.out.Write(buf)
	return err
}

type verdict struct {
	textname string
	ndx      uint32
	want     ooid.ID
}

// verifyLine splits OOID<TAB>TEXTNAME<TAB>NDX and computes the OOID the
// measurement has under the scheme. A line that cannot be checked is
// reported.
func (d *Decoder) verifyLine(line []byte, where string) ([]byte, verdict, bool) {
	scheme := d.scheme
	f := bytes.Split(line, []byte{'\t'})
	if len(f) != 3 {
		d.reject(where, fmt.Sprintf("want OOID<TAB>TEXTNAME<TAB>NDX, got %d fields", len(f)))
		return nil, verdict{}, false
	}
	ndx, err := ParseNDX(f[2], scheme)
	if err != nil {
		d.reject(where, fmt.Sprintf("NDX %q: %v", f[2], err))
		return nil, verdict{}, false
	}
	r, err := scheme.ReportBytes(f[1])
	if err != nil {
		d.reject(where, err.Error())
		return nil, verdict{}, false
	}
	return f[0], verdict{textname: string(f[1]), ndx: ndx, want: r.ID(ndx)}, true
}

// appendDecoded appends d as one JSON line. Every value is a number or a
// string of hex digits, letters and ASCII punctuation, so none needs escaping.
func appendDecoded(b []byte, d ooid.Decoded) []byte {
	b = append(b, `{"ooid":"`...)
	b = d.ID.AppendText(b)
	b = append(b, `","namespace":"`...)
	b = append(b, d.Namespace.String()...)
	b = append(b, `","unix":`...)
	b = strconv.AppendUint(b, uint64(d.Unix), 10)
	b = append(b, `,"time":"`...)
	b = d.Time().AppendFormat(b, time.RFC3339)
	b = append(b, `","counter":`...)
	b = strconv.AppendUint(b, uint64(d.Counter), 10)
	if d.Namespace == ooid.Collector {
		b = append(b, `,"collector_id":`...)
		b = strconv.AppendUint(b, uint64(d.CollectorID), 10)
	}
	return append(b, "}\n"...)
}
