package pgcopy

import (
	"cmp"
	"context"
	"encoding/binary"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/backfill-dev/backfill/pipeline/collisions"
	"github.com/backfill-dev/backfill/pipeline/ooid"
	"github.com/backfill-dev/backfill/pipeline/stamped"
)

// copyReport is a kept report whose measurement rows are to be COPYed.
type copyReport struct {
	ts, base, n uint32
	seq         int32
}

// segment is a run of a report's measurement rows whose counters do not
// wrap: counters lo, lo+1, ..., lo+n-1 for ndx0, ndx0+1, ...
type segment struct {
	ts, lo, n, ndx0 uint32
	seq             int32
}

// segments returns the rows of reports as runs sorted by OOID: a report
// whose counters wrap past 2^bits - 1 is two runs. Rows COPYed in key
// order reach the primary key's btree at one place after another, which
// costs the server about a third less than the order of the reports.
func segments(reports []copyReport, bits int) []segment {
	out := make([]segment, 0, len(reports))
	for _, r := range reports {
		first, second, wraps := collisions.Range{TS: r.ts, Base: r.base, N: r.n}.Spans(bits)
		n1 := first[1] - first[0]
		out = append(out, segment{ts: r.ts, lo: first[0], n: n1, seq: r.seq})
		if wraps {
			out = append(out, segment{ts: r.ts, lo: second[0], n: second[1] - second[0], ndx0: n1, seq: r.seq})
		}
	}
	slices.SortFunc(out, func(a, b segment) int { return cmp.Or(cmp.Compare(a.ts, b.ts), cmp.Compare(a.lo, b.lo)) })
	return out
}

// copyMeasurements COPYs the measurement rows of reports in PostgreSQL's
// binary COPY format, made as the server reads them, in OOID order. When
// ctx ends the rows stop and the COPY is aborted (CopyFail), so the server
// rolls it back at once.
func (s *Sink) copyMeasurements(ctx context.Context, tx pgx.Tx, bucket string, bits int, reports []copyReport) error {
	if len(reports) == 0 {
		return nil
	}
	day, err := time.Parse(time.DateOnly, bucket)
	if err != nil {
		return err
	}
	src := &measurementRows{chunks: chunks{ctx: ctx}, segs: segments(reports, bits), day: pgDay(day)}
	return s.copyBinary(ctx, tx, "measurements", measurementColumns, src)
}

// copyBinary COPYs src, a stream in PostgreSQL's binary COPY format, into
// the columns of table. src ends with ctx's error once ctx ends; the COPY
// is then aborted (CopyFail), and that gets lastWords to be answered.
func (s *Sink) copyBinary(ctx context.Context, tx pgx.Tx, table string, columns []string, src io.Reader) error {
	cols := make([]string, len(columns))
	for i, c := range columns {
		cols[i] = pgx.Identifier{c}.Sanitize()
	}
	cctx, cancel := afterEnd(ctx)
	defer cancel()
	_, err := tx.Conn().PgConn().CopyFrom(cctx, src,
		`COPY `+s.q(table)+` (`+strings.Join(cols, ", ")+`) FROM STDIN (FORMAT binary)`)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// reportRows is the binary COPY stream of a bucket's rows of reports
// (reportColumns): the report of seq i, rejected by winners[i] where that
// is set. Made here in one buffer rather than value by value through
// pgx's type map, which took 30 ms of the tool's processor a bucket of
// 9,600 reports (a twentieth of its time in a per-bucket load) while the
// server waited.
func reportRows(day int32, reports []stamped.Report, winners []string, bits int) []byte {
	size := len(copyHeader) + 2
	for i := range reports {
		r := &reports[i]
		// The count of fields, each field's length, the fixed-size
		// values, a span of two ranges at most, then the texts.
		size += 2 + len(reportColumns)*4 + 4 + 4 + 8 + 4 + 4 + 8 + 8 + 20 + 4 + 2*(4+rangeSize) +
			len(r.Textname) + len(r.ID.Source.String()) + len(r.Container) + len(winners[i])
	}
	b := make([]byte, 0, size)
	b = append(b, copyHeader...)
	for i := range reports {
		r := &reports[i]
		b = binary.BigEndian.AppendUint16(b, uint16(len(reportColumns)))
		b = fieldInt32(b, day)
		b = fieldInt32(b, int32(i))
		b = fieldText(b, r.Textname)
		b = fieldInt64(b, int64(r.ID.TS))
		b = fieldText(b, r.ID.Source.String())
		b = fieldInt32(b, int32(r.ID.CounterBase()))
		b = fieldInt32(b, int32(r.N))
		b = fieldSpan(b, collisions.RangeOf(r.ID, r.N), bits)
		b = fieldText(b, r.Container)
		b = fieldInt64(b, r.Offset)
		b = fieldInt64(b, r.Size)
		if r.SHA1 != nil {
			b = fieldBytes(b, r.SHA1[:])
		} else {
			b = fieldNull(b)
		}
		if winners[i] != "" {
			b = fieldText(b, winners[i])
		} else {
			b = fieldNull(b)
		}
	}
	return binary.BigEndian.AppendUint16(b, 0xFFFF)
}

// identityRows is an io.Reader of the binary COPY stream of the
// identities of reports' measurements (identityColumns), made as the
// server reads them: a bucket holds one row a measurement.
type identityRows struct {
	chunks
	day     int32
	reports []stamped.Report
	i, ndx  int // the next row: measurement ndx of reports[i]
}

func (m *identityRows) Read(p []byte) (int, error) { return m.read(p, m.fill) }

// fill makes the next 64 KiB or so of the stream.
func (m *identityRows) fill() {
	b := m.begin(72 << 10)
	for len(b) < 64<<10 && m.i < len(m.reports) {
		ids := m.reports[m.i].IDs
		for ; m.ndx < len(ids) && len(b) < 64<<10; m.ndx++ {
			id := &ids[m.ndx]
			b = binary.BigEndian.AppendUint16(b, uint16(len(identityColumns)))
			b = fieldInt32(b, m.day)
			b = fieldInt32(b, int32(m.i))
			b = fieldInt32(b, int32(m.ndx))
			if id.Hash.Known() {
				b = fieldBytes(b, id.Hash[:])
			} else {
				b = fieldNull(b)
			}
			if id.UID != "" {
				b = fieldText(b, id.UID[2:len(id.UID)-2*len(id.Hash)])
			} else {
				b = fieldNull(b)
			}
		}
		if m.ndx >= len(ids) {
			m.i++
			m.ndx = 0
		}
	}
	if m.i == len(m.reports) {
		b = binary.BigEndian.AppendUint16(b, 0xFFFF)
		m.done = true
	}
	m.buf = b
}

// The fields of a binary COPY row: each a length, -1 for NULL, and the
// value as the type's binary form has it.
func fieldNull(b []byte) []byte { return binary.BigEndian.AppendUint32(b, 0xFFFFFFFF) }

func fieldInt32(b []byte, v int32) []byte {
	return binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(b, 4), uint32(v))
}

func fieldInt64(b []byte, v int64) []byte {
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint32(b, 8), uint64(v))
}

func fieldText(b []byte, v string) []byte {
	return append(binary.BigEndian.AppendUint32(b, uint32(len(v))), v...)
}

func fieldBytes(b []byte, v []byte) []byte {
	return append(binary.BigEndian.AppendUint32(b, uint32(len(v))), v...)
}

// rangeSize is an int4range [lo, hi) in binary: its flags (lower bound
// included), then each bound, a length and an int4.
const rangeSize = 1 + 2*(4+4)

// fieldSpan is a report's counters as an int4multirange: the ranges
// spans gives, the one past the wrap first (so in order), none empty.
func fieldSpan(b []byte, rg collisions.Range, bits int) []byte {
	l1, h1, l2, h2 := spans(rg, bits)
	n := 0
	if h2 > l2 {
		n++
	}
	if h1 > l1 {
		n++
	}
	b = binary.BigEndian.AppendUint32(b, uint32(4+n*(4+rangeSize)))
	b = binary.BigEndian.AppendUint32(b, uint32(n))
	if h2 > l2 {
		b = appendRange(b, l2, h2)
	}
	if h1 > l1 {
		b = appendRange(b, l1, h1)
	}
	return b
}

// appendRange appends the int4range [lo, hi) in binary, its length first.
func appendRange(b []byte, lo, hi int32) []byte {
	b = binary.BigEndian.AppendUint32(b, rangeSize)
	b = append(b, 0x02) // lower bound inclusive, upper exclusive
	return fieldInt32(fieldInt32(b, lo), hi)
}

// pgDay is a date as binary COPY holds it: days since 2000-01-01.
func pgDay(t time.Time) int32 { return int32((t.Unix() - 946684800) / 86400) }

// rowSize is one binary row: a field count, then four fields, each a
// length and a value (bigint, date, integer, integer).
const rowSize = 2 + 4 + 8 + 3*(4+4)

// chunks is the reading side of a binary COPY stream made a chunk at a
// time, as the server reads it: the next chunk is made once the last is
// read, and the stream ends with ctx's error once ctx ends.
type chunks struct {
	ctx     context.Context
	started bool // the stream's header is made
	done    bool // the last chunk is made
	buf     []byte
	off     int
}

// begin returns buf emptied for the next chunk; at first, made with room
// for size bytes and holding the stream's header.
func (c *chunks) begin(size int) []byte {
	if c.buf == nil {
		c.buf = make([]byte, 0, size)
	}
	b := c.buf[:0]
	if !c.started {
		b = append(b, copyHeader...)
		c.started = true
	}
	return b
}

// whole is the reading side of a stream made whole beforehand: b, which
// holds its header and its end.
func whole(ctx context.Context, b []byte) *chunks {
	return &chunks{ctx: ctx, buf: b, started: true, done: true}
}

// Read reads a stream held whole (whole): its one chunk in buf, done.
func (c *chunks) Read(p []byte) (int, error) { return c.read(p, nil) }

// read reads p from the chunks that next makes into buf.
func (c *chunks) read(p []byte, next func()) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	if c.off == len(c.buf) {
		if c.done {
			return 0, io.EOF
		}
		next()
		c.off = 0
	}
	n := copy(p, c.buf[c.off:])
	c.off += n
	return n, nil
}

// measurementRows is an io.Reader of the binary COPY stream of the rows
// of segs.
type measurementRows struct {
	chunks
	segs []segment
	day  int32
	i    int    // segment
	k    uint32 // row in segs[i]
}

var copyHeader = []byte("PGCOPY\n\xff\r\n\x00\x00\x00\x00\x00\x00\x00\x00\x00")

func (m *measurementRows) Read(p []byte) (int, error) { return m.read(p, m.fill) }

// fill makes the next 64 KiB or so of the stream.
func (m *measurementRows) fill() {
	b := m.begin(64 << 10)
	for len(b)+rowSize <= cap(b) && m.i < len(m.segs) {
		sg := &m.segs[m.i]
		top := uint64(ooid.NewBackfilledID(sg.ts, 0))
		for ; m.k < sg.n && len(b)+rowSize <= cap(b); m.k++ {
			b = binary.BigEndian.AppendUint16(b, 4)
			b = binary.BigEndian.AppendUint32(b, 8)
			b = binary.BigEndian.AppendUint64(b, top|uint64(sg.lo+m.k))
			b = binary.BigEndian.AppendUint32(b, 4)
			b = binary.BigEndian.AppendUint32(b, uint32(m.day))
			b = binary.BigEndian.AppendUint32(b, 4)
			b = binary.BigEndian.AppendUint32(b, uint32(sg.seq))
			b = binary.BigEndian.AppendUint32(b, 4)
			b = binary.BigEndian.AppendUint32(b, sg.ndx0+m.k)
		}
		if m.k >= sg.n {
			m.i++
			m.k = 0
		}
	}
	if m.i == len(m.segs) && len(b)+2 <= cap(b) {
		b = binary.BigEndian.AppendUint16(b, 0xFFFF)
		m.done = true
	}
	m.buf = b
}
