package pgcopy

import (
	"context"
	"encoding/binary"
	"io"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/backfill-dev/backfill/pipeline/ooid"
)

// copyReport is a kept report whose measurement rows are to be COPYed.
type copyReport struct {
	ts, base, n uint32
	seq         int32
}

// copyMeasurements COPYs the measurement rows of reports in PostgreSQL's
// binary COPY format, made as the server reads them. When ctx ends the
// rows stop and the COPY is aborted (CopyFail), so the server rolls it
// back at once.
func (s *Sink) copyMeasurements(ctx context.Context, tx pgx.Tx, bucket string, bits int, reports []copyReport) error {
	if len(reports) == 0 {
		return nil
	}
	day, err := time.Parse(time.DateOnly, bucket)
	if err != nil {
		return err
	}
	src := &measurementRows{ctx: ctx, reports: reports, mask: uint32(1)<<uint(bits) - 1, day: pgDay(day)}
	_, err = tx.Conn().PgConn().CopyFrom(context.WithoutCancel(ctx), src,
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

// measurementRows is an io.Reader of the binary COPY stream of reports'
// measurement rows.
type measurementRows struct {
	ctx     context.Context
	reports []copyReport
	mask    uint32
	day     int32
	i       int    // report
	ndx     uint32 // in reports[i]
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
	for len(b)+rowSize <= cap(b) && m.i < len(m.reports) {
		r := &m.reports[m.i]
		top := uint64(ooid.NewBackfilledID(r.ts, 0))
		for ; m.ndx < r.n && len(b)+rowSize <= cap(b); m.ndx++ {
			b = binary.BigEndian.AppendUint16(b, 4)
			b = binary.BigEndian.AppendUint32(b, 8)
			b = binary.BigEndian.AppendUint64(b, top|uint64((r.base+m.ndx)&m.mask))
			b = binary.BigEndian.AppendUint32(b, 4)
			b = binary.BigEndian.AppendUint32(b, uint32(m.day))
			b = binary.BigEndian.AppendUint32(b, 4)
			b = binary.BigEndian.AppendUint32(b, uint32(r.seq))
			b = binary.BigEndian.AppendUint32(b, 4)
			b = binary.BigEndian.AppendUint32(b, m.ndx)
		}
		if m.ndx >= r.n {
			m.i++
			m.ndx = 0
		}
	}
	if m.i == len(m.reports) && len(b)+2 <= cap(b) {
		b = binary.BigEndian.AppendUint16(b, 0xFFFF)
		m.done = true
	}
	m.buf, m.off = b, 0
}
