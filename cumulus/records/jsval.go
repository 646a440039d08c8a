package records

import (
	"math"
	"strconv"
	"strings"

	"github.com/backfill-dev/backfill/internal/jsnum"
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

// jsEmpty is lodash's isEmpty for a decoded JSON value: an object or
// array without members, and anything that is neither.
func jsEmpty(v any) bool {
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
func jsNumber(f float64) string { return jsnum.Format(f) }

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
		return jsnum.Parse(x)
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
