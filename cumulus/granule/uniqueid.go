// Package granule reproduces NASA Cumulus unique granule IDs (the
// "entropy expansion" of @cumulus/ingest generateUniqueGranuleId, v21) and
// the AddUniqueGranuleId task that applies them to a payload.
//
// A unique granule ID is "<id>_<hash>": hash is the MD5 of the UTF-8
// collection ID (or of "<collectionId>_<monotonic nanoseconds>"), encoded
// as base64url without padding, with every '_' removed, cut to hashLength
// characters. The id itself is not hashed, so without the timestamp the
// suffix is a per-collection constant.
//
// The output is byte-identical to the Node.js, Python and Java reference
// implementations for every hash length 1..22; other lengths, where those
// implementations disagree, are rejected.
package granule

import (
	"crypto/md5"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// Hash length limits. 22 is the length of a base64url MD5.
const (
	MinHashLength     = 1
	MaxHashLength     = 22
	DefaultHashLength = 8
)

// ErrHashLength is wrapped by the error for a hash length outside
// MinHashLength..MaxHashLength.
var ErrHashLength = errors.New("hash length out of range")

// ErrInvalidUTF8 is returned for an id or collection ID that is not valid
// UTF-8: the reference implementations would each replace the bad bytes
// differently.
var ErrInvalidUTF8 = errors.New("not valid UTF-8")

// CheckHashLength reports a hash length the function does not accept.
func CheckHashLength(n int) error {
	if n < MinHashLength || n > MaxHashLength {
		return fmt.Errorf("%w: %d (want %d..%d)", ErrHashLength, n, MinHashLength, MaxHashLength)
	}
	return nil
}

// UniqueGranuleID returns "<id>_<hash>" for collectionID as Cumulus v21
// generateUniqueGranuleId does. With includeTimestamp the hash input is
// "<collectionID>_<nanoseconds>" from a per-process clock that never
// returns the same value twice, so two calls never hash the same input.
func UniqueGranuleID(id, collectionID string, hashLength int, includeTimestamp bool) (string, error) {
	if err := CheckHashLength(hashLength); err != nil {
		return "", err
	}
	if !utf8.ValidString(id) || !utf8.ValidString(collectionID) {
		return "", ErrInvalidUTF8
	}
	var suffix [MaxHashLength]byte
	var n int
	if includeTimestamp {
		n = timestampedSuffix(&suffix, collectionID, hashLength)
	} else {
		n = hashSuffix(&suffix, []byte(collectionID), hashLength)
	}
	return id + "_" + string(suffix[:n]), nil
}

// hashSuffix writes the first hashLength characters of the cleaned
// base64url MD5 of input to dst and returns how many there are (fewer when
// '_' characters were removed).
func hashSuffix(dst *[MaxHashLength]byte, input []byte, hashLength int) int {
	sum := md5.Sum(input)
	var enc [MaxHashLength]byte // base64url of 16 bytes without padding is 22 characters
	base64.RawURLEncoding.Encode(enc[:], sum[:])
	n := 0
	for _, c := range enc {
		if c == '_' {
			continue
		}
		if n == hashLength {
			break
		}
		dst[n] = c
		n++
	}
	return n
}

func timestampedSuffix[T ~string | ~[]byte](dst *[MaxHashLength]byte, collectionID T, hashLength int) int {
	var buf [256]byte
	in := append(buf[:0], collectionID...)
	in = append(in, '_')
	in = strconv.AppendInt(in, Nanotime(), 10)
	return hashSuffix(dst, in, hashLength)
}

var (
	clockBase = time.Now()
	clockWall = clockBase.UnixNano()
	lastNanos atomic.Int64
)

// Nanotime returns nanoseconds from a monotonic clock (wall-clock origin at
// process start, monotonic after), strictly increasing across calls from
// any goroutine: a call in the same nanosecond as the last one gets the
// next value. It plays the part of Node's process.hrtime.bigint().
func Nanotime() int64 {
	now := clockWall + int64(time.Since(clockBase))
	for {
		last := lastNanos.Load()
		next := max(now, last+1)
		if lastNanos.CompareAndSwap(last, next) {
			return next
		}
	}
}

// Generator computes unique granule IDs for one hash length and timestamp
// setting, remembering the suffix of the last collection ID so that a batch
// of one collection hashes it once. A Generator is not safe for concurrent
// use.
type Generator struct {
	hashLength       int
	includeTimestamp bool
	lastCollection   []byte
	lastSuffix       [MaxHashLength]byte
	lastN            int
	cached           bool
}

// NewGenerator checks hashLength and returns a Generator.
func NewGenerator(hashLength int, includeTimestamp bool) (*Generator, error) {
	if err := CheckHashLength(hashLength); err != nil {
		return nil, err
	}
	return &Generator{hashLength: hashLength, includeTimestamp: includeTimestamp}, nil
}

// Append appends "<id>_<hash>" to dst. id and collectionID must be valid
// UTF-8 (it returns ErrInvalidUTF8 otherwise).
func (g *Generator) Append(dst, id, collectionID []byte) ([]byte, error) {
	if !utf8.Valid(id) || !utf8.Valid(collectionID) {
		return dst, ErrInvalidUTF8
	}
	var suffix [MaxHashLength]byte
	var n int
	switch {
	case g.includeTimestamp:
		n = timestampedSuffix(&suffix, collectionID, g.hashLength)
	case g.cached && string(collectionID) == string(g.lastCollection):
		suffix, n = g.lastSuffix, g.lastN
	default:
		n = hashSuffix(&suffix, collectionID, g.hashLength)
		g.lastCollection = append(g.lastCollection[:0], collectionID...)
		g.lastSuffix, g.lastN, g.cached = suffix, n, true
	}
	dst = append(dst, id...)
	dst = append(dst, '_')
	return append(dst, suffix[:n]...), nil
}
