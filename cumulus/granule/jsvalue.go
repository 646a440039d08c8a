package granule

import (
	"encoding/json"
	"math"

	"github.com/backfill-dev/backfill/cumulus/jsvalue"
)

// The AddUniqueGranuleId task reads its config and granules with
// JavaScript's conversions. These helpers give the same answers on raw JSON
// values, decoded as JSON.parse decodes them (cumulus/jsvalue); a nil
// value stands for undefined (a missing key), and so does one that does
// not decode, which a value cut from a parsed document never is.

// jsTruthy is JavaScript's Boolean(v).
func jsTruthy(raw json.RawMessage) bool {
	v, _, _ := jsvalue.Decode(raw)
	return jsvalue.Truthy(v)
}

// jsNumber is JavaScript's Number(v).
func jsNumber(raw json.RawMessage) float64 {
	v, present, _ := jsvalue.Decode(raw)
	return jsvalue.Number(v, present)
}

// jsString is JavaScript's String(v) for the primitive values a template
// literal may meet in a granule; ok is false for objects and arrays.
func jsString(raw json.RawMessage) (s string, ok bool) {
	v, present, err := jsvalue.Decode(raw)
	switch v.(type) {
	case map[string]any, []any:
		return "", false
	}
	return jsvalue.String(v, present), err == nil
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
