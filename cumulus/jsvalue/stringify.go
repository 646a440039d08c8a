package jsvalue

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"sort"
	"strconv"
	"strings"
)

// JSON.stringify writes an object's keys in the order JSON.parse met them,
// except that keys which are array indexes ("0", "1", …) come first, in
// ascending order. Go's maps keep no order, so a value whose text must be
// Node's is written again from its text (StringifyText); one known only
// decoded has its keys sorted (Stringify).

// ordered is a JSON object with its keys in JavaScript's order.
type ordered struct {
	keys []string
	vals map[string]any
}

// maxOrderedDepth bounds the nesting parseOrdered follows.
const maxOrderedDepth = 512

// StringifyText is JSON.stringify(JSON.parse(text)).
func StringifyText(text []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(text))
	v, err := parseOrdered(dec, 0)
	if err != nil {
		return "", err
	}
	if _, err := dec.Token(); err != io.EOF {
		return "", errors.New("data after the JSON value")
	}
	var b strings.Builder
	stringify(&b, v)
	return b.String(), nil
}

func parseOrdered(dec *json.Decoder, depth int) (any, error) {
	if depth > maxOrderedDepth {
		return nil, errors.New("JSON nested too deep")
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	d, isDelim := tok.(json.Delim)
	if !isDelim {
		return tok, nil
	}
	switch d {
	case '{':
		o := &ordered{vals: map[string]any{}}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			k, _ := kt.(string)
			v, err := parseOrdered(dec, depth+1)
			if err != nil {
				return nil, err
			}
			if _, seen := o.vals[k]; !seen {
				o.keys = append(o.keys, k)
			}
			o.vals[k] = v // the last of a repeated key, at the first one's place
		}
		_, err := dec.Token()
		sortIndexKeys(o.keys)
		return o, err
	case '[':
		a := []any{}
		for dec.More() {
			v, err := parseOrdered(dec, depth+1)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		_, err := dec.Token()
		return a, err
	}
	return nil, errors.New("unexpected " + d.String())
}

// sortIndexKeys moves the array-index keys to the front in ascending
// order, the rest keeping theirs: JavaScript's property order.
func sortIndexKeys(keys []string) {
	sort.SliceStable(keys, func(i, j int) bool {
		a, aok := arrayIndex(keys[i])
		b, bok := arrayIndex(keys[j])
		if aok && bok {
			return a < b
		}
		return aok && !bok
	})
}

// arrayIndex tells a canonical array index: "0" or no leading zero, below
// 2³²−1.
func arrayIndex(k string) (uint64, bool) {
	if k == "" || len(k) > 10 || (len(k) > 1 && k[0] == '0') {
		return 0, false
	}
	n, err := strconv.ParseUint(k, 10, 64)
	return n, err == nil && n < 1<<32-1
}

// Stringify is JSON.stringify(v) of a decoded value, an object's keys
// sorted.
func Stringify(v any) string {
	var b strings.Builder
	stringify(&b, v)
	return b.String()
}

// stringify writes v as JSON.stringify does: an ordered object in its
// order, a Go map (whose order is lost) with its index keys first and the
// rest sorted.
func stringify(b *strings.Builder, v any) {
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case float64:
		b.WriteString(FormatNumber(x))
	case string:
		quote(b, x)
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			stringify(b, e)
		}
		b.WriteByte(']')
	case *ordered:
		members(b, x.keys, x.vals)
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		sortIndexKeys(keys)
		members(b, keys, x)
	default:
		b.WriteString(encodeJSON(x))
	}
}

func members(b *strings.Builder, keys []string, vals map[string]any) {
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		quote(b, k)
		b.WriteByte(':')
		stringify(b, vals[k])
	}
	b.WriteByte('}')
}

// quote is JSON.stringify of a string: only the quote, the backslash and
// the control characters are escaped.
func quote(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if r < 0x20 {
				b.WriteString(`\u00`)
				b.WriteByte("0123456789abcdef"[r>>4])
				b.WriteByte("0123456789abcdef"[r&0xf])
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}

// encodeJSON is encoding/json's text of v, with no HTML escaping, as
// JSON.stringify writes a number, a boolean or null.
func encodeJSON(v any) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // the values given are decoded JSON, which encodes
	return strings.TrimSuffix(b.String(), "\n")
}
