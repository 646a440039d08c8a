package cmr

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// readUMMG reads a UMM-G file as Cumulus does after JSON.parse. Only the
// top-level object is split into its fields; the three fields read are
// decoded further, the rest only checked for syntax.
func readUMMG(r io.Reader) (Temporal, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return Temporal{}, err
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) || bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
			return Temporal{}, errors.New("UMM-G: the file is not a JSON object")
		}
		return Temporal{}, fmt.Errorf("UMM-G: %w", err)
	}
	if top == nil {
		return Temporal{}, errors.New("UMM-G: the file is not a JSON object")
	}
	var t Temporal
	t.BeginningDateTime = jsonGet(top, "TemporalExtent", "RangeDateTime", "BeginningDateTime")
	t.EndingDateTime = jsonGet(top, "TemporalExtent", "RangeDateTime", "EndingDateTime")
	if !t.BeginningDateTime.truthy() {
		single := jsonGet(top, "TemporalExtent", "SingleDateTime")
		t.BeginningDateTime, t.EndingDateTime = single, single
	}
	t.ProductionDateTime = jsonGet(top, "DataGranule", "ProductionDateTime")
	t.LastUpdateDateTime, err = lastProviderDate(top["ProviderDates"])
	return t, err
}

// lastProviderDate is the Date of the first ProviderDates entry of Type
// "Update", else "Insert", else "Create", by array order (Array.find: a
// null entry met before a match throws).
func lastProviderDate(raw json.RawMessage) (Value, error) {
	var entries []json.RawMessage
	if raw == nil || json.Unmarshal(raw, &entries) != nil || entries == nil {
		return Value{}, errors.New("UMM-G: ProviderDates is missing or not an array")
	}
	for _, typ := range []string{"Update", "Insert", "Create"} {
		for i, e := range entries {
			if bytes.Equal(e, []byte("null")) {
				return Value{}, fmt.Errorf("UMM-G: ProviderDates[%d] is null", i)
			}
			var obj map[string]json.RawMessage
			if json.Unmarshal(e, &obj) != nil {
				continue // a number, string or array: its .Type is undefined
			}
			if v := jsonValue(obj["Type"]); v.Kind == String && v.Str == typ {
				return jsonGet(obj, "Date"), nil
			}
		}
	}
	return Value{}, nil
}

// jsonGet follows names through JSON objects, as lodash's get does.
func jsonGet(obj map[string]json.RawMessage, names ...string) Value {
	for i, name := range names {
		raw, ok := obj[name]
		if !ok {
			return Value{}
		}
		if i == len(names)-1 {
			return jsonValue(raw)
		}
		obj = nil
		if json.Unmarshal(raw, &obj) != nil || obj == nil {
			return Value{}
		}
	}
	return Value{}
}

// jsonValue is the JavaScript value of a JSON value.
func jsonValue(raw json.RawMessage) Value {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return Value{}
	}
	switch raw[0] {
	case 'n':
		return Value{Kind: Null}
	case 't', 'f':
		return Value{Kind: Bool, Str: string(raw)}
	case '"':
		var s string
		_ = json.Unmarshal(raw, &s) // raw is a valid JSON string: the caller's document parsed
		return str(s)
	case '{':
		return Value{Kind: Object}
	case '[':
		// String(array) joins its elements' strings with ","; null is "".
		var elems []json.RawMessage
		_ = json.Unmarshal(raw, &elems) // raw is a valid JSON array: the caller's document parsed
		parts := make([]string, len(elems))
		for i, e := range elems {
			switch v := jsonValue(e); v.Kind {
			case String:
				parts[i] = v.Str
			case Null:
			default:
				return Value{Kind: Array}
			}
		}
		return Value{Kind: Array, Str: strings.Join(parts, ","), Joinable: true}
	}
	n, _ := strconv.ParseFloat(string(raw), 64) // ±Inf beyond float64, as JSON.parse
	return Value{Kind: Number, Num: n}
}
