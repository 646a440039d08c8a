package records

import (
	"math"
	"strconv"
	"strings"
)

// Messages are decoded with encoding/json into any: objects are
// map[string]any, arrays []any, numbers float64 (as JavaScript reads them),
// JSON null is nil. A key that is absent is JavaScript's undefined; lookups
// return it as (nil, false).

// get walks keys through nested objects, as lodash's get does; anything
// that is not an object on the way gives undefined.
func get(v any, keys ...string) (any, bool) {
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

// obj returns v as an object, or nil.
func obj(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// truthy is JavaScript's Boolean(v) for a decoded JSON value.
func truthy(v any) bool {
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

// str returns v when it is a string.
func str(v any) (string, bool) {
	s, ok := v.(string)
	return s, ok
}

// isInteger is lodash's isInteger.
func isInteger(v any) bool {
	f, ok := v.(float64)
	return ok && f == math.Trunc(f) && !math.IsInf(f, 0)
}

// jsString is String(v) for the values messages carry where Cumulus
// interpolates them into text.
func jsString(v any, present bool) string {
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
		return jsNumber(x)
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			if e != nil {
				parts[i] = jsString(e, true)
			}
		}
		return strings.Join(parts, ",")
	}
	return "[object Object]"
}

// jsNumber formats a number as JavaScript's String(n) does.
func jsNumber(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case f == 0:
		return "0"
	}
	a := math.Abs(f)
	if a >= 1e21 || a < 1e-6 {
		s := strconv.FormatFloat(f, 'e', -1, 64)
		// Go writes e+21 / e-07; JavaScript e+21 / e-7.
		if i := strings.IndexByte(s, 'e'); i >= 0 {
			exp := s[i+2:]
			exp = strings.TrimLeft(exp, "0")
			s = s[:i+2] + exp
		}
		return s
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}

// toNumber is JavaScript's Number(v) for decoded JSON values.
func toNumber(v any, present bool) float64 {
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
		s := strings.TrimSpace(x)
		if s == "" {
			return 0
		}
		if f, err := strconv.ParseFloat(s, 64); err == nil && !strings.ContainsAny(s, "xXpP_") {
			return f
		}
		if strings.HasPrefix(s, "0x") || strings.HasPrefix(s, "0X") {
			if n, err := strconv.ParseUint(s[2:], 16, 64); err == nil {
				return float64(n)
			}
		}
		switch s {
		case "Infinity", "+Infinity":
			return math.Inf(1)
		case "-Infinity":
			return math.Inf(-1)
		}
		return math.NaN()
	case []any:
		if len(x) == 0 {
			return 0
		}
		if len(x) == 1 {
			return toNumber(jsString(x[0], true), true)
		}
	}
	return math.NaN()
}
