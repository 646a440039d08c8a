// Package jsvalue gives JavaScript's answers on JSON values, for the
// Cumulus code that must give the same text and values as Node: Boolean,
// Number and String of a value, lodash's get, isEmpty and isInteger, and
// numbers to and from text.
//
// A value is what encoding/json decodes into any: objects are
// map[string]any, arrays []any, numbers float64 (as JavaScript reads them),
// JSON null is nil. A key that is absent is JavaScript's undefined, which
// the functions take as present false, and lookups return as (nil, false).
package jsvalue

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Get walks keys through nested objects, as lodash's get does; anything
// that is not an object on the way gives undefined.
func Get(v any, keys ...string) (any, bool) {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[k]; !ok {
			return nil, false
		}
	}
	return v, true
}

// Obj returns v as an object, or nil.
func Obj(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// Truthy is JavaScript's Boolean(v) (undefined is nil, as null is).
func Truthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case float64:
		return x != 0 && !math.IsNaN(x)
	case string:
		return x != ""
	}
	return true
}

// Empty is lodash's isEmpty: an object or array without members, an empty
// string, and anything that is none of these.
func Empty(v any) bool {
	switch x := v.(type) {
	case map[string]any:
		return len(x) == 0
	case []any:
		return len(x) == 0
	case string:
		return x == ""
	}
	return true
}

// IsInteger is lodash's isInteger.
func IsInteger(v any) bool {
	f, ok := v.(float64)
	return ok && f == math.Trunc(f) && !math.IsInf(f, 0)
}

// String is JavaScript's String(v).
func String(v any, present bool) string {
	if !present {
		return "undefined"
	}
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return x
	case bool:
		return strconv.FormatBool(x)
	case float64:
		return FormatNumber(x)
	case []any:
		// Array.prototype.join: null and undefined elements are "".
		parts := make([]string, len(x))
		for i, e := range x {
			if e != nil {
				parts[i] = String(e, true)
			}
		}
		return strings.Join(parts, ",")
	}
	return "[object Object]"
}

// Number is JavaScript's Number(v).
func Number(v any, present bool) float64 {
	if !present {
		return math.NaN()
	}
	switch x := v.(type) {
	case nil:
		return 0
	case bool:
		if x {
			return 1
		}
		return 0
	case float64:
		return x
	case string:
		return ParseNumber(x)
	case []any:
		return ParseNumber(String(x, true)) // the array's primitive is its String
	}
	return math.NaN()
}

// Decode is JSON.parse of one JSON value; an empty raw value is undefined
// (present false). A number beyond float64's range is ±Infinity, as
// JSON.parse gives it, where encoding/json refuses it.
func Decode(raw []byte) (v any, present bool, err error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil, false, nil
	}
	if v, ok := decodePlain(raw); ok {
		return v, true, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, false, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, false, errors.New("jsvalue: more than one JSON value")
	}
	return numbers(v), true, nil
}

// decodePlain decodes, without a decoder, the values a granule's fields
// mostly hold: the three literals, and a string without escapes, control
// characters or invalid UTF-8. Anything else is not ok, for the decoder.
func decodePlain(raw []byte) (any, bool) {
	switch string(raw) {
	case "null":
		return nil, true
	case "true":
		return true, true
	case "false":
		return false, true
	}
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return nil, false
	}
	body := raw[1 : len(raw)-1]
	for _, c := range body {
		if c < 0x20 || c == '"' || c == '\\' {
			return nil, false
		}
	}
	if !utf8.Valid(body) {
		return nil, false
	}
	return string(body), true
}

// numbers turns the json.Numbers of a decoded value into float64s.
func numbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		f, _ := strconv.ParseFloat(string(x), 64) // valid JSON: ±Inf when out of range
		return f
	case []any:
		for i := range x {
			x[i] = numbers(x[i])
		}
	case map[string]any:
		for k := range x {
			x[k] = numbers(x[k])
		}
	}
	return v
}
