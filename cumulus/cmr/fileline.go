package cmr

import (
	"encoding/json"
	"fmt"

	"github.com/backfill-dev/backfill/internal/store"
)

// FileLine reads the CMR file name (of format f, or the one its name
// says when f is empty) and returns its temporal fields as one JSON
// object: the file, its format, the dates as Cumulus stores them, and
// under "raw" the values as the file gives them.
func FileLine(name string, f Format, maxSize int64) ([]byte, error) {
	if f == "" {
		var ok bool
		if f, ok = FormatOf(name); !ok {
			return nil, fmt.Errorf("not a CMR file name (*xml, *json, *cmr_iso.xml); give --format")
		}
	}
	file, err := store.OpenRegular(name)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	t, err := Read(file, f, maxSize)
	if err != nil {
		return nil, err
	}
	d, err := t.Normalize()
	if err != nil {
		return nil, err
	}
	out := []kv{{"file", name}, {"format", f}}
	raw := []kv{}
	stored := [4]Date{d.BeginningDateTime, d.EndingDateTime, d.ProductionDateTime, d.LastUpdateDateTime}
	found := [4]Value{t.BeginningDateTime, t.EndingDateTime, t.ProductionDateTime, t.LastUpdateDateTime}
	for i, field := range Fields {
		switch s := stored[i]; {
		case !s.Set:
		case s.Null:
			out = append(out, kv{field, nil})
		default:
			out = append(out, kv{field, s.ISO})
		}
		switch v := found[i]; v.Kind {
		case Undefined:
		case Null:
			raw = append(raw, kv{field, nil})
		case String:
			raw = append(raw, kv{field, v.Str})
		case Number:
			raw = append(raw, kv{field, v.Num})
		default:
			raw = append(raw, kv{field, v.String()})
		}
	}
	line := jsonObject(out)
	line = append(line[:len(line)-1], `,"raw":`...)
	return append(append(line, jsonObject(raw)...), '}'), nil
}

// kv is a member of a JSON object.
type kv struct {
	k string
	v any
}

// jsonObject is the JSON object of kvs, its members in their order.
func jsonObject(kvs []kv) []byte {
	b := []byte{'{'}
	for i, e := range kvs {
		if i > 0 {
			b = append(b, ',')
		}
		k, _ := json.Marshal(e.k)
		v, _ := json.Marshal(e.v)
		b = append(append(append(b, k...), ':'), v...)
	}
	return append(b, '}')
}
