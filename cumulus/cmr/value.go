package cmr

import (
	"fmt"
	"strings"
)

// Kind is the JavaScript type of a value read from a CMR file.
type Kind uint8

const (
	Undefined Kind = iota // no such field
	Null                  // JSON null
	String
	Number
	Bool
	Object
	Array
)

var kindNames = [...]string{"undefined", "null", "string", "number", "boolean", "object", "array"}

func (k Kind) String() string { return kindNames[k] }

// Value is a temporal value as Cumulus's code sees it: what xml2js (with
// ignoreAttrs and explicitArray off) or JSON.parse makes of the element or
// field. Str holds a string, a boolean ("true"/"false"), or an array's
// String() when its elements are strings; Num a number.
type Value struct {
	Kind Kind
	Str  string
	Num  float64
	// Joinable is set for an array whose String() is Str.
	Joinable bool
}

func str(s string) Value { return Value{Kind: String, Str: s} }

// truthy is JavaScript's Boolean(v).
func (v Value) truthy() bool {
	switch v.Kind {
	case Undefined, Null:
		return false
	case String:
		return v.Str != ""
	case Number:
		return v.Num != 0 && v.Num == v.Num
	case Bool:
		return v.Str == "true"
	}
	return true
}

// Date is a normalised temporal value: absent (the field stays
// undefined), null, or an ISO string with milliseconds and Z.
type Date struct {
	Set  bool   // false: absent
	Null bool   // null
	ISO  string // when Set and not Null
}

// Normalize is what Cumulus's write path does to each value found in the
// CMR file: undefined and null stay, "" becomes null, anything else goes
// through new Date(v).toISOString(), an error when that throws.
func (v Value) Normalize() (Date, error) {
	switch v.Kind {
	case Undefined:
		return Date{}, nil
	case Null:
		return Date{Set: true, Null: true}, nil
	case String:
		if v.Str == "" {
			return Date{Set: true, Null: true}, nil
		}
		ms, err := parseJSDate(v.Str)
		if err != nil {
			return Date{}, err
		}
		return Date{Set: true, ISO: formatISO(ms)}, nil
	case Number, Bool:
		n := v.Num
		if v.Kind == Bool && v.Str == "true" {
			n = 1
		}
		ms, ok := jsNumberTime(n)
		if !ok {
			return Date{}, fmt.Errorf("%v: %w", v.Num, ErrDate)
		}
		return Date{Set: true, ISO: formatISO(ms)}, nil
	case Array:
		if v.Joinable {
			ms, err := parseJSDate(v.Str)
			if err != nil {
				return Date{}, fmt.Errorf("an array of several values: %w", err)
			}
			return Date{Set: true, ISO: formatISO(ms)}, nil
		}
		return Date{}, fmt.Errorf("an array of several values: %w", ErrDate)
	}
	return Date{}, fmt.Errorf("an element with child elements or a JSON object: %w", ErrDate)
}

// String shows v for messages.
func (v Value) String() string {
	switch v.Kind {
	case String:
		return fmt.Sprintf("%q", v.Str)
	case Number:
		return fmt.Sprint(v.Num)
	case Bool:
		return v.Str
	case Array:
		if v.Joinable {
			return fmt.Sprintf("array %q", strings.Split(v.Str, ","))
		}
	}
	return v.Kind.String()
}
