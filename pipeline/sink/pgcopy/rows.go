package pgcopy

import (
	"cmp"
	"context"
	"encoding/binary"
	"io"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/backfill-dev/backfill/pipeline/collisions"
	"github.com/backfill-dev/backfill/pipeline/ooid"
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
	src := &measurementRows{ctx: ctx, segs: segments(reports, bits), day: pgDay(day)}
	// The rows stop when ctx ends; the CopyFail that follows gets
	// lastWords to be answered.
	cctx, cancel := afterEnd(ctx)
	defer cancel()
	_, err = tx.Conn().PgConn().CopyFrom(cctx, src,
		`COPY `+s.q("measurements")+` (ooid, bucket, report, ndx) FROM STDIN (FORMAT binary)`)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// pgDay is a date as binary COPY holds it: days since 2000-01-01.
func pgDay(t time.Time) int32 { return int32((t.Unix() - 946684800) / 86400) }

// rowSize is one binary row: a field count, then four fields, each a
// length and a value (bigint, date, integer, integer).
const rowSize = 2 + 4 + 8 + 3*(4+4)

// measurementRows is an io.Reader of the binary COPY stream of the rows
// of segs.
type measurementRows struct {
	ctx     context.Context
	segs    []segment
	day     int32
	i       int    // segment
	k       uint32 // row in segs[i]
	started bool
	done    bool
	buf     []byte
	off     int
}

var copyHeader = []byte("PGCOPY\n\xff\r\n\x00\x00\x00\x00\x00\x00\x00\x00\x00")

func (m *measurementRows) Read(p []byte) (int, error) {
	if m.off == len(m.buf) {
		if m.done {
			return 0, io.EOF
		}
		if err := m.ctx.Err(); err != nil {
			return 0, err
		}
		m.fill()
	}
	n := copy(p, m.buf[m.off:])
	m.off += n
	return n, nil
}

// fill makes the next 64 KiB or so of the stream.
func (m *measurementRows) fill() {
	if m.buf == nil {
		m.buf = make([]byte, 0, 64<<10)
	}
	b := m.buf[:0]
	if !m.started {
		b = append(b, copyHeader...)
		m.started = true
	}
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
	m.buf, m.off = b, 0
}
