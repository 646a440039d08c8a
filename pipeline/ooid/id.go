package ooid

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// ID is a 64-bit OOID. The zero value is not a valid OOID of either layout
// that the backfill produces, but it formats and decodes like any other.
type ID uint64

// TextLen is the length of the canonical text form of an ID.
const TextLen = 16

const (
	// MaxCollectorID is the largest collector id a collector-stamped OOID
	// may carry; larger ids would alias the backfilled 0xF nibble.
	MaxCollectorID = 0xEF
	// MaxCollectorCounter is the largest per-second counter of a
	// collector-stamped OOID.
	MaxCollectorCounter = 1<<24 - 1

	backfillNibble = 0xF << 28
)

var (
	// ErrSyntax is returned (wrapped) by Parse for text that is not 16 hex
	// digits.
	ErrSyntax = errors.New("not an OOID")
	// ErrRange is returned (wrapped) when a field does not fit its layout.
	ErrRange = errors.New("value out of range")
)

const hexDigits = "0123456789abcdef"

// AppendText appends the canonical form, 16 lowercase hex digits, to dst.
func (id ID) AppendText(dst []byte) []byte {
	n := len(dst)
	dst = slices.Grow(dst, TextLen)[:n+TextLen]
	b := dst[n : n+TextLen]
	v := uint64(id)
	for i := TextLen - 2; i >= 0; i -= 2 {
		b[i], b[i+1] = hexDigits[v>>4&0xF], hexDigits[v&0xF]
		v >>= 8
	}
	return dst
}

// String returns the canonical form, 16 lowercase hex digits.
func (id ID) String() string {
	var b [TextLen]byte
	return string(id.AppendText(b[:0]))
}

// MarshalText implements encoding.TextMarshaler, so that JSON carries an
// OOID as its hex string and never as a number.
func (id ID) MarshalText() ([]byte, error) { return id.AppendText(nil), nil }

// UnmarshalText implements encoding.TextUnmarshaler with [Parse].
func (id *ID) UnmarshalText(b []byte) error {
	v, err := parse(b)
	if err != nil {
		return err
	}
	*id = v
	return nil
}

// Parse reads an OOID in text form: exactly 16 hex digits. Upper-case
// digits are accepted; [ID.String] always gives lower case.
func Parse(s string) (ID, error) { return parse([]byte(s)) }

// ParseBytes is Parse for a byte slice.
func ParseBytes(b []byte) (ID, error) { return parse(b) }

func parse(b []byte) (ID, error) {
	if len(b) != TextLen {
		return 0, fmt.Errorf("%w: %q has %d characters, not 16 hex digits", ErrSyntax, clip(b), len(b))
	}
	var v uint64
	for i, c := range b {
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, fmt.Errorf("%w: %q has %q at position %d", ErrSyntax, clip(b), c, i)
		}
		v = v<<4 | uint64(d)
	}
	return ID(v), nil
}

// ParseAny reads an OOID as users paste it, spaces and tabs around it
// ignored (psql's aligned output pads numbers on the left):
//
//   - the text form, exactly 16 hex digits (50bef44df29c69e2);
//   - hex with a 0x prefix, 1 to 16 digits: leading zeros may be missing,
//     as PostgreSQL's to_hex leaves them out;
//   - the signed decimal that PostgreSQL's bigint and Parquet's INT64 show
//     (5818356384229255650; negative from 2038), or the unsigned decimal
//     of the same 64 bits (up to 18446744073709551615); a "+" or "-" sign
//     is allowed.
//
// The one ambiguous case is 16 characters that are all decimal digits: they
// are read as the text form (hex). No real OOID is hurt by the rule: its
// decimal form has 19 or 20 digits (ts >= 2^28, from 1978); a "+" in front
// makes such a string a decimal.
func ParseAny(b []byte) (ID, error) {
	b = trimSpace(b)
	if len(b) == TextLen {
		if id, err := parse(b); err == nil {
			return id, nil
		}
	}
	if len(b) > 2 && b[0] == '0' && (b[1] == 'x' || b[1] == 'X') {
		hex := b[2:]
		if len(hex) > TextLen {
			return 0, fmt.Errorf("%w: %q has more than 16 hex digits", ErrSyntax, clip(b))
		}
		padded := append(bytes.Repeat([]byte{'0'}, TextLen-len(hex)), hex...)
		id, err := parse(padded)
		if err != nil {
			return 0, fmt.Errorf("%w: %q is not hex after its 0x", ErrSyntax, clip(b))
		}
		return id, nil
	}
	digits, neg := b, false
	if len(digits) > 0 && (digits[0] == '-' || digits[0] == '+') {
		digits, neg = digits[1:], digits[0] == '-'
	}
	bad := fmt.Errorf("%w: %q is none of 16 hex digits, 0x and hex digits, or a 64-bit decimal", ErrSyntax, clip(b))
	if len(digits) == 0 || len(digits) > 20 {
		return 0, bad
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, bad
		}
	}
	if neg {
		v, err := strconv.ParseInt("-"+string(digits), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%w: %q is below the signed 64-bit range", ErrSyntax, clip(b))
		}
		return FromInt64(v), nil
	}
	v, err := strconv.ParseUint(string(digits), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %q is above the unsigned 64-bit range", ErrSyntax, clip(b))
	}
	return ID(v), nil
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\r') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

// clip shortens garbage for error messages.
func clip(b []byte) string {
	const max = 40
	if len(b) > max {
		return string(b[:max]) + "..."
	}
	return string(b)
}

// Int64 returns the same 64 bits as a signed integer, as stored in a
// PostgreSQL bigint. IDs whose ts is 2^31 or more are negative.
func (id ID) Int64() int64 { return int64(id) }

// FromInt64 is the inverse of [ID.Int64].
func FromInt64(v int64) ID { return ID(v) }

// TS returns the 32-bit Unix time in the high word.
func (id ID) TS() uint32 { return uint32(id >> 32) }

// Namespace tells which layout an ID uses.
type Namespace uint8

const (
	// Backfilled IDs have 0xF in the top nibble of the low word.
	Backfilled Namespace = iota
	// Collector IDs carry a collector id 0x00..0xEF in the top byte of the
	// low word.
	Collector
)

// String returns "backfilled" or "collector".
func (n Namespace) String() string {
	if n == Collector {
		return "collector"
	}
	return "backfilled"
}

// Decoded holds the fields of an OOID.
type Decoded struct {
	ID        ID
	Namespace Namespace
	// Unix is the ts of the high word, seconds since the epoch.
	Unix uint32
	// Counter is the low 28 bits of a backfilled ID (the counter, whatever
	// the counter width of its scheme, since unused bits are zero) or the
	// low 24 bits of a collector ID.
	Counter uint32
	// CollectorID is set for collector IDs only.
	CollectorID uint8
}

// Time returns Unix as a UTC time.
func (d Decoded) Time() time.Time { return time.Unix(int64(d.Unix), 0).UTC() }

// Decode splits an ID into its fields. Every 64-bit value decodes: a low
// word whose top nibble is 0xF is backfilled, anything else is a collector
// ID.
func (id ID) Decode() Decoded {
	low := uint32(id)
	d := Decoded{ID: id, Unix: id.TS()}
	if low>>28 == 0xF {
		d.Namespace = Backfilled
		d.Counter = low & (1<<28 - 1)
		return d
	}
	d.Namespace = Collector
	d.CollectorID = uint8(low >> 24)
	d.Counter = low & MaxCollectorCounter
	return d
}

// NewBackfilledID builds a backfilled OOID (32:4:28) from its ts and counter;
// counter must fit the scheme's width (at most 28 bits).
func NewBackfilledID(ts, counter uint32) ID {
	return ID(uint64(ts)<<32 | backfillNibble | uint64(counter))
}

// NewCollectorID builds a collector-stamped OOID (32:8:24). It fails when
// collector exceeds [MaxCollectorID] or counter exceeds
// [MaxCollectorCounter].
func NewCollectorID(ts uint32, collector uint8, counter uint32) (ID, error) {
	if collector > MaxCollectorID {
		return 0, fmt.Errorf("collector id %#02x: %w (max %#02x)", collector, ErrRange, MaxCollectorID)
	}
	if counter > MaxCollectorCounter {
		return 0, fmt.Errorf("collector counter %d: %w (max %d)", counter, ErrRange, MaxCollectorCounter)
	}
	return ID(uint64(ts)<<32 | uint64(collector)<<24 | uint64(counter)), nil
}
