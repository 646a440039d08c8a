package ooid

import (
	"crypto/sha1"
	"encoding/binary"
	"errors"
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

// NoSHA1Offset is the SHA1Offset of a keyed scheme, which reads no SHA-1.
const NoSHA1Offset = -1

// Scheme is the set of parameters that, with a textname and ndx, fixes a
// backfilled OOID. Two outputs made under different schemes are different
// ID spaces; record the scheme with every output.
//
// A scheme takes its counter base either from a 7-hex-digit window of the
// textname's SHA-1 (ooni-uuid's scheme; Table is empty) or from SipHash-2-4
// of the textname under a key chosen by the report's timestamp from a key
// table ([KeyedScheme]). Compare schemes with [Scheme.Equal].
type Scheme struct {
	// CounterBits is the counter width, MinCounterBits..MaxCounterBits.
	CounterBits int
	// SHA1Offset is the hex digit where the 7-digit window of the textname's
	// SHA-1 hexdigest starts, 0..MaxSHA1Offset; NoSHA1Offset for a keyed
	// scheme.
	SHA1Offset int
	// Table names the key table of a keyed scheme ([KeyTable.ID]), "" for
	// the SHA-1 window. A scheme read back from an output's records has
	// the name but not the keys until its scheme file is loaded.
	Table string
	keys  *KeyTable
}

// KeyedScheme returns the scheme whose counter base is SipHash-2-4 of the
// textname under the table's key for its timestamp, modulo 2^bits.
func KeyedScheme(bits int, t *KeyTable) Scheme {
	return Scheme{CounterBits: bits, SHA1Offset: NoSHA1Offset, Table: t.ID(), keys: t}
}

// Keyed reports whether the scheme is keyed rather than a SHA-1 window.
func (s Scheme) Keyed() bool { return s.Table != "" }

// Keys returns the key table of a keyed scheme, nil for a SHA-1 window or
// a keyed scheme whose keys are not loaded.
func (s Scheme) Keys() *KeyTable { return s.keys }

// Equal reports whether two schemes give the same IDs: the same width and
// hash, and for keyed schemes the same key table.
func (s Scheme) Equal(o Scheme) bool {
	return s.CounterBits == o.CounterBits && s.SHA1Offset == o.SHA1Offset && s.Table == o.Table
}

// DefaultScheme is the scheme of ooni-uuid: 28 bits, the last 7 hex
// digits of the SHA-1.
var DefaultScheme = Scheme{CounterBits: DefaultCounterBits, SHA1Offset: DefaultSHA1Offset}

// Validate reports a parameter out of range.
func (s Scheme) Validate() error {
	if s.CounterBits < MinCounterBits || s.CounterBits > MaxCounterBits {
		return fmt.Errorf("counter bits %d: %w (%d..%d)", s.CounterBits, ErrRange, MinCounterBits, MaxCounterBits)
	}
	if s.Keyed() {
		if s.SHA1Offset != NoSHA1Offset {
			return fmt.Errorf("keyed scheme with sha1 offset %d: %w", s.SHA1Offset, ErrRange)
		}
		if s.keys == nil {
			return fmt.Errorf("%w: key table %s is not loaded; pass its scheme file", ErrNoKeys, s.Table)
		}
		return nil
	}
	if s.SHA1Offset < 0 || s.SHA1Offset > MaxSHA1Offset {
		return fmt.Errorf("sha1 offset %d: %w (0..%d)", s.SHA1Offset, ErrRange, MaxSHA1Offset)
	}
	return nil
}

// ErrNoKeys is returned (wrapped) for a keyed scheme known only by name.
var ErrNoKeys = errors.New("keyed scheme without its keys")

// String returns the scheme as recorded in outputs, e.g.
// "ooid-backfill counter_bits=28 sha1_offset=33" or
// "ooid-backfill counter_bits=24 siphash-2-4 key_table=9f2c4e1a0b3d5f67".
func (s Scheme) String() string {
	if s.Keyed() {
		return fmt.Sprintf("ooid-backfill counter_bits=%d %s key_table=%s", s.CounterBits, HashSipHash, s.Table)
	}
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
	mask := s.Mask()
	if s.keys != nil {
		return ReportIDs{Textname: t, base: uint32(SipHash24(s.keys.KeyFor(t.TS), textname)) & mask, mask: mask}, nil
	}
	sum := sha1.Sum([]byte(textname))
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
