// Package ooniuid computes OONI's own identifiers of a legacy measurement
// from its raw bytes, so that a backfilled OOID can be joined to the rows
// OONI's databases hold: the content hash (the first 15 bytes of SHAKE128
// of the raw bytes) and the measurement_uid OONI's fastpath derives from
// it ("01", the measurement's date as YYYYMMDD, the hash in hex).
//
// The raw bytes of a JSON report's measurement are its line with its
// "\n"; of a YAML report's, its document from "---\n" through "\n...\n".
// The date of a JSON measurement is its measurement_start_time as
// Python's datetime.strptime(t, "%Y-%m-%d %H:%M:%S") reads it, else
// 00000000; a line that OONI's JSON decoder (ujson) refuses gets no uid.
// The date of a YAML measurement is that of OONI's normalisation of the
// entry (YAMLReport).
package ooniuid

import (
	"crypto/sha3"
	"encoding/hex"
)

// Hash is the content hash of a measurement: SHAKE128 of its raw bytes,
// its first 15 bytes.
type Hash [15]byte

// Sum returns the hash of the concatenation of parts (a JSON line and its
// "\n", say).
func Sum(parts ...[]byte) Hash {
	h := sha3.NewSHAKE128()
	for _, p := range parts {
		h.Write(p)
	}
	var out Hash
	h.Read(out[:])
	return out
}

// Known reports whether h is a hash of raw bytes. The zero Hash stands
// for none: a measurement whose raw bytes were not read (an autoclaved
// report whose canned form is missing or differs). SHAKE128 gives the
// zero value with probability 2^-120.
func (h Hash) Known() bool { return h != Hash{} }

// String is the hash as 30 lowercase hex digits, as OONI writes it.
func (h Hash) String() string { return hex.EncodeToString(h[:]) }

// ID is OONI's identity of one measurement: its content hash (the zero
// Hash where its raw bytes were not read), and its measurement_uid (""
// where OONI's code gives none, or the raw bytes were not read).
type ID struct {
	Hash Hash
	UID  string
}

// NoDate is the date of a measurement whose measurement_start_time does
// not parse.
const NoDate = "00000000"

// UID is OONI's legacy measurement_uid of a measurement of that date
// (YYYYMMDD, or NoDate) and hash.
func UID(date string, h Hash) string { return "01" + date + h.String() }
