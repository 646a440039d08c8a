package granule

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"

	"github.com/backfill-dev/backfill/internal/jsnum"
)

// The AddUniqueGranuleId task reads its config and granules with
// JavaScript's conversions. These helpers give the same answers on raw JSON
// values; a nil value stands for undefined (a missing key).

// jsKind returns the first byte of a JSON value, or 0 for undefined.
func jsKind(v json.RawMessage) byte {
	v = bytes.TrimLeft(v, " \t\r\n")
	if len(v) == 0 {
		return 0
	}
	return v[0]
}

// jsTruthy is JavaScript's Boolean(v).
func jsTruthy(v json.RawMessage) bool {
	switch jsKind(v) {
	case 0, 'n', 'f':
		return false
	case 't', '[', '{':
		return true
	case '"':
		var s string
		return json.Unmarshal(v, &s) == nil && s != ""
	default:
		f, err := strconv.ParseFloat(string(bytes.TrimSpace(v)), 64)
		return (err == nil || math.IsInf(f, 0)) && f != 0 && !math.IsNaN(f)
	}
}

// jsNumber is JavaScript's Number(v).
func jsNumber(v json.RawMessage) float64 {
	switch jsKind(v) {
	case 0, '{':
		return math.NaN()
	case 'n', 'f':
		return 0
	case 't':
		return 1
	case '"':
		var s string
		if json.Unmarshal(v, &s) != nil {
			return math.NaN()
		}
		return jsnum.Parse(s)
	case '[':
		// Number(array) is Number(String(array)): elements joined by ",".
		var elems []json.RawMessage
		if json.Unmarshal(v, &elems) != nil {
			return math.NaN()
		}
		switch len(elems) {
		case 0:
			return 0
		case 1:
			if k := jsKind(elems[0]); k == 'n' {
				return 0 // String([null]) is ""
			} else if k == 't' || k == 'f' || k == '{' {
				return math.NaN()
			}
			return jsNumber(elems[0])
		}
		return math.NaN() // "a,b" is never a number
	default:
		f, err := strconv.ParseFloat(string(bytes.TrimSpace(v)), 64)
		if err != nil && !math.IsInf(f, 0) {
			return math.NaN()
		}
		return f
	}
}

// jsString is JavaScript's String(v) for the primitive values a template
// literal may meet in a granule; ok is false for objects and arrays.
func jsString(v json.RawMessage) (s string, ok bool) {
	switch jsKind(v) {
	case 0:
		return "undefined", true
	case 'n':
		return "null", true
	case 't':
		return "true", true
	case 'f':
		return "false", true
	case '"':
		return s, json.Unmarshal(v, &s) == nil
	case '[', '{':
		return "", false
	default:
		return jsnum.Format(jsNumber(v)), true
	}
}

// hashLengthFrom applies the task's "Number(config.hashLength) || 8" and
// the integer conversion of String.prototype.slice.
func hashLengthFrom(v json.RawMessage) (int, error) {
	f := jsNumber(v)
	if math.IsNaN(f) || f == 0 {
		return DefaultHashLength, nil
	}
	if math.IsInf(f, 0) || math.Abs(f) > 1<<31 {
		return 0, &hashLengthError{v: string(v)}
	}
	n := int(math.Trunc(f))
	if err := CheckHashLength(n); err != nil {
		return 0, err
	}
	return n, nil
}

type hashLengthError struct{ v string }

func (e *hashLengthError) Error() string {
	return "hash length " + e.v + ": out of range (want 1..22)"
}

func (e *hashLengthError) Unwrap() error { return ErrHashLength }
