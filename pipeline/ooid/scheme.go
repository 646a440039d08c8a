package ooid

import (
	"crypto/sha1"
	"encoding/binary"
	"fmt"
)

// Limits of the backfilled counter parameters.
const (
	MinCounterBits     = 20
	MaxCounterBits     = 28
	DefaultCounterBits = 28
	MaxSHA1Offset      = 33 // the window is 7 of the 40 hex digits
	DefaultSHA1Offset  = 33
)

// Scheme is the set of parameters that, with a textname and ndx, fixes a
// backfilled OOID. Two outputs made under different schemes are different
// ID spaces; record the scheme with every output.
type Scheme struct {
	// CounterBits is the counter width, MinCounterBits..MaxCounterBits.
	CounterBits int
	// SHA1Offset is the hex digit where the 7-digit window of the textname's
	// SHA-1 hexdigest starts, 0..MaxSHA1Offset.
	SHA1Offset int
}

// DefaultScheme is the scheme of ooni-uuid: 28 bits, the last 7 hex
// digits of the SHA-1.
var DefaultScheme = Scheme{CounterBits: DefaultCounterBits, SHA1Offset: DefaultSHA1Offset}

// Validate reports a parameter out of range.
func (s Scheme) Validate() error {
	if s.CounterBits < MinCounterBits || s.CounterBits > MaxCounterBits {
		return fmt.Errorf("counter bits %d: %w (%d..%d)", s.CounterBits, ErrRange, MinCounterBits, MaxCounterBits)
	}
	if s.SHA1Offset < 0 || s.SHA1Offset > MaxSHA1Offset {
		return fmt.Errorf("sha1 offset %d: %w (0..%d)", s.SHA1Offset, ErrRange, MaxSHA1Offset)
	}
	return nil
}

// String returns the scheme as recorded in outputs, e.g.
// "ooid-backfill counter_bits=28 sha1_offset=33".
func (s Scheme) String() string {
	return fmt.Sprintf("ooid-backfill counter_bits=%d sha1_offset=%d", s.CounterBits, s.SHA1Offset)
}

// Mask returns the largest counter value, 2^CounterBits - 1.
func (s Scheme) Mask() uint32 { return 1<<uint(s.CounterBits) - 1 }

// Window returns the 28-bit value of the 7 hex digits of a SHA-1 hexdigest
// that start at hex offset off (0..MaxSHA1Offset), read from the raw digest.
// It is int(hexdigest[off:off+7], 16).
func Window(sum *[sha1.Size]byte, off int) uint32 {
	v := binary.BigEndian.Uint32(sum[off/2:])
	if off%2 == 0 {
		return v >> 4
	}
	return v & (1<<28 - 1)
}

// ReportIDs carries the per-report part of a backfilled OOID: everything but
// the ndx. Build it once per report with [Scheme.Report]; [ReportIDs.ID] is then
// an add and a mask.
type ReportIDs struct {
	Textname
	base uint32 // counter of ndx 0
	mask uint32
}

// Report parses textname (see [ParseTextname]) and hashes it. It fails for
// an invalid scheme or textname.
func (s Scheme) Report(textname string) (ReportIDs, error) { return reportOf(s, textname) }

// ReportBytes is Report for a byte slice; it does not allocate unless it
// fails.
func (s Scheme) ReportBytes(textname []byte) (ReportIDs, error) { return reportOf(s, textname) }

func reportOf[T text](s Scheme, textname T) (ReportIDs, error) {
	if err := s.Validate(); err != nil {
		return ReportIDs{}, err
	}
	t, err := parseTextname(textname)
	if err != nil {
		return ReportIDs{}, err
	}
	sum := sha1.Sum([]byte(textname))
	mask := s.Mask()
	return ReportIDs{Textname: t, base: Window(&sum, s.SHA1Offset) & mask, mask: mask}, nil
}

// CounterBase returns the counter of measurement 0. The report's counters
// are the range [CounterBase, CounterBase+n) modulo 2^CounterBits.
func (r ReportIDs) CounterBase() uint32 { return r.base }

// ID returns the OOID of measurement ndx (0-based) of the report. An ndx of
// 2^CounterBits or more wraps around onto the IDs of smaller ndx values;
// callers that may see such reports must reject them.
func (r ReportIDs) ID(ndx uint32) ID {
	return NewBackfilledID(r.TS, (r.base+ndx)&r.mask)
}
