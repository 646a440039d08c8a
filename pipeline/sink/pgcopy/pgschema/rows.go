package pgschema

import (
	"encoding/binary"
	"errors"
	"time"
)

// Day is a bucket date as the measurements table holds it: days since
// 2000-01-01.
func Day(bucket string) (int32, error) {
	t, err := time.Parse(time.DateOnly, bucket)
	if err != nil {
		return 0, err
	}
	return int32(t.Sub(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)) / (24 * time.Hour)), nil
}

// MeasurementRows parses COPY's binary format of the rows (bucket date, report
// int4, ndx int4, ooid int8) as the server sends it, in pieces of any size.
type MeasurementRows struct {
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

func (c *MeasurementRows) Write(p []byte) (int, error) {
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

// NewMeasurementRows parses rows for fn, which is called with each.
func NewMeasurementRows(fn func(day, report, ndx int32, ooid int64) error) *MeasurementRows {
	return &MeasurementRows{fn: fn}
}

// Err is fn's error, which stopped the rows.
func (c *MeasurementRows) Err() error { return c.err }

// Ended tells whether the rows' end came.
func (c *MeasurementRows) Ended() bool { return c.ended }
