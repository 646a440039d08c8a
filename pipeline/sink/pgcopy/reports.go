package pgcopy

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// EachReport calls fn for every report of the committed buckets, rejected
// ones included, by bucket and in the order they were written: the
// schema's report manifests, as backfill audit reads them. The textname
// is only valid during the call. A report whose n is negative (not a
// count) is an error. Nothing is retried: fn may have seen part of the
// rows.
func (s *Sink) EachReport(ctx context.Context, fn func(textname []byte, n uint32) error) error {
	rows, err := s.conn.Query(ctx, `SELECT r.textname, r.n FROM `+s.q("reports")+` r
		JOIN `+s.q("ledger")+` l ON l.bucket = r.bucket AND l.status = 'committed'
		ORDER BY r.bucket, r.seq`)
	if err != nil {
		return s.clean(err)
	}
	defer rows.Close()
	var name []byte
	var n int32
	for rows.Next() {
		if err := rows.Scan(&name, &n); err != nil {
			return s.clean(err)
		}
		if n < 0 {
			return fmt.Errorf("report %s: n = %d", name, n)
		}
		if err := fn(name, uint32(n)); err != nil {
			return err
		}
	}
	return s.clean(rows.Err())
}

// StoredReport is a report row as verify reads it.
type StoredReport struct {
	Seq        int32
	Textname   string
	N          int32
	RejectedBy string // "" when kept
}

// BucketReports returns the reports of a bucket, in seq order.
func (s *Sink) BucketReports(ctx context.Context, bucket string) ([]StoredReport, error) {
	var out []StoredReport
	err := s.retry(ctx, "reading the reports of "+bucket, func(ctx context.Context, conn *pgx.Conn) error {
		rows, err := conn.Query(ctx, `SELECT seq, textname, n, coalesce(rejected_by, '') FROM `+s.q("reports")+`
			WHERE bucket = $1::date ORDER BY seq`, bucket)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (r StoredReport, err error) {
			err = row.Scan(&r.Seq, &r.Textname, &r.N, &r.RejectedBy)
			return r, err
		})
		return err
	})
	return out, err
}

// EachMeasurement calls fn with every row of the measurements table, in
// the order the table holds them (one sequential read, no sort, no
// index): its bucket as days since 2000-01-01 (see Day), its report's seq,
// its ndx and its ID. Nothing is retried: fn may have seen part of the
// rows. It takes the sink's first connection: call it from one goroutine,
// with no other call under way.
func (s *Sink) EachMeasurement(ctx context.Context, fn func(day, report, ndx int32, ooid int64) error) error {
	if err := s.connect(ctx, &s.conn); err != nil { // a retry before may have closed it
		return s.named(err)
	}
	r := &copyRows{fn: fn}
	_, err := s.conn.PgConn().CopyTo(ctx, r, `COPY `+s.q("measurements")+` (bucket, report, ndx, ooid) TO STDOUT (FORMAT binary)`)
	switch {
	case r.err != nil:
		return r.err // fn's
	case err == nil && !r.ended:
		err = errors.New("the rows ended early")
	case err == nil:
		return nil
	}
	return s.named(fmt.Errorf("reading %s: %w", s.q("measurements"), s.clean(err)))
}

// Day is a bucket date as EachMeasurement gives it: days since 2000-01-01.
func Day(bucket string) (int32, error) {
	t, err := time.Parse(time.DateOnly, bucket)
	if err != nil {
		return 0, err
	}
	return int32(t.Sub(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)) / (24 * time.Hour)), nil
}

// copyRows parses COPY's binary format of the rows (bucket date, report
// int4, ndx int4, ooid int8) as the server sends it, in pieces of any size.
type copyRows struct {
	fn     func(day, report, ndx int32, ooid int64) error
	buf    []byte
	header bool
	ended  bool
	err    error // fn's
}

// copySignature starts COPY's binary format.
const copySignature = "PGCOPY\n\xff\r\n\x00"

// A row: its field count (2 bytes), then each field's length (4) and value.
const copyRowSize = 2 + (4 + 4) + (4 + 4) + (4 + 4) + (4 + 8)

func (c *copyRows) Write(p []byte) (int, error) {
	c.buf = append(c.buf, p...)
	b := c.buf
	if !c.header {
		if len(b) < len(copySignature)+8 {
			return len(p), nil
		}
		if string(b[:len(copySignature)]) != copySignature {
			return 0, errors.New("COPY sent no binary header")
		}
		ext := binary.BigEndian.Uint32(b[len(copySignature)+4:])
		if uint64(len(b)) < uint64(len(copySignature))+8+uint64(ext) {
			return len(p), nil
		}
		b, c.header = b[len(copySignature)+8+int(ext):], true
	}
	for len(b) >= 2 && !c.ended {
		if int16(binary.BigEndian.Uint16(b)) == -1 {
			b, c.ended = b[2:], true
			break
		}
		if len(b) < copyRowSize {
			break
		}
		if binary.BigEndian.Uint16(b) != 4 || binary.BigEndian.Uint32(b[2:]) != 4 || binary.BigEndian.Uint32(b[10:]) != 4 ||
			binary.BigEndian.Uint32(b[18:]) != 4 || binary.BigEndian.Uint32(b[26:]) != 8 {
			return 0, errors.New("a row of the measurements table is not (bucket, report, ndx, ooid), each not null")
		}
		err := c.fn(int32(binary.BigEndian.Uint32(b[6:])), int32(binary.BigEndian.Uint32(b[14:])), int32(binary.BigEndian.Uint32(b[22:])),
			int64(binary.BigEndian.Uint64(b[30:])))
		if err != nil {
			c.err = err
			return 0, err
		}
		b = b[copyRowSize:]
	}
	c.buf = append(c.buf[:0], b...)
	return len(p), nil
}
