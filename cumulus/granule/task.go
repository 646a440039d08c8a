package granule

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// TaskConfig is the config of the AddUniqueGranuleId task as raw JSON
// values; nil stands for a missing key. The task's own conversions apply:
// hashLength is Number(hashLength) || 8 and must then be 1..22;
// includeTimestampHashKey is includeTimestampHashKey ?? false, taken by
// its JavaScript truthiness (so the string "false" is true).
type TaskConfig struct {
	HashLength              json.RawMessage `json:"hashLength"`
	IncludeTimestampHashKey json.RawMessage `json:"includeTimestampHashKey"`
}

// Settings resolves the config to a hash length and timestamp switch.
func (c TaskConfig) Settings() (hashLength int, includeTimestamp bool, err error) {
	hashLength, err = hashLengthFrom(c.HashLength)
	if err != nil {
		return 0, false, fmt.Errorf("config hashLength: %w", err)
	}
	return hashLength, jsTruthy(c.IncludeTimestampHashKey), nil
}

// ErrPayload is wrapped by every payload rejection.
var ErrPayload = errors.New("bad payload")

// GranuleError says which granule of a payload is bad and why.
type GranuleError struct {
	Index  int
	Reason string
}

func (e *GranuleError) Error() string { return fmt.Sprintf("granules[%d]: %s", e.Index, e.Reason) }

// Unwrap returns [ErrPayload].
func (e *GranuleError) Unwrap() error { return ErrPayload }

// AddUniqueGranuleIDs applies the AddUniqueGranuleId task to a payload
// {"granules": [...], ...}: every other payload key and granule field is
// kept, in order; a granule with a truthy producerGranuleId passes
// unchanged; any other gets producerGranuleId = its granuleId and
// granuleId = UniqueGranuleID(granuleId, collectionId, ...), where
// collectionId is the granule's collectionId or, when that is falsy,
// "<dataType>___<version>". Duplicates are not removed.
//
// A payload that is not such an object, or a granule without a string
// granuleId or without a collection, is rejected whole: the error joins
// one [*GranuleError] per bad granule.
func AddUniqueGranuleIDs(payload []byte, cfg TaskConfig) ([]byte, error) {
	hashLength, includeTimestamp, err := cfg.Settings()
	if err != nil {
		return nil, err
	}
	top, err := parseObject(payload)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrPayload, err)
	}
	rawGranules, ok := top.get("granules")
	if !ok || rawKind(rawGranules) != '[' {
		return nil, fmt.Errorf("%w: no \"granules\" array", ErrPayload)
	}
	var granules []json.RawMessage
	if err := json.Unmarshal(rawGranules, &granules); err != nil {
		return nil, fmt.Errorf("%w: granules: %v", ErrPayload, err)
	}
	var errs []error
	out := make([]json.RawMessage, len(granules))
	for i, raw := range granules {
		g, err := addUniqueID(raw, hashLength, includeTimestamp)
		if err != nil {
			errs = append(errs, &GranuleError{Index: i, Reason: err.Error()})
			continue
		}
		out[i] = g
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	var buf bytes.Buffer
	buf.WriteByte('[')
	for i, g := range out {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.Write(g)
	}
	buf.WriteByte(']')
	top.set("granules", buf.Bytes())
	return top.marshal()
}

func addUniqueID(raw json.RawMessage, hashLength int, includeTimestamp bool) (json.RawMessage, error) {
	g, err := parseObject(raw)
	if err != nil {
		return nil, err
	}
	if p, _ := g.get("producerGranuleId"); jsTruthy(p) {
		return raw, nil
	}
	rawID, _ := g.get("granuleId")
	var id string
	if rawKind(rawID) != '"' || json.Unmarshal(rawID, &id) != nil {
		return nil, errors.New("granuleId is missing or not a string")
	}
	collectionID, err := granuleCollection(g)
	if err != nil {
		return nil, err
	}
	unique, err := UniqueGranuleID(id, collectionID, hashLength, includeTimestamp)
	if err != nil {
		return nil, err
	}
	g.set("producerGranuleId", rawID)
	g.set("granuleId", jsonString(unique))
	return g.marshal()
}

// granuleCollection is granule.collectionId || `${dataType}___${version}`.
func granuleCollection(g object) (string, error) {
	if c, _ := g.get("collectionId"); jsTruthy(c) {
		s, ok := jsString(c)
		if !ok {
			return "", errors.New("collectionId is not a string")
		}
		return s, nil
	}
	dt, hasDT := g.get("dataType")
	ver, hasVer := g.get("version")
	if !hasDT || !hasVer {
		return "", errors.New("no collectionId, and no dataType and version to build one")
	}
	dts, ok1 := jsString(dt)
	vs, ok2 := jsString(ver)
	if !ok1 || !ok2 {
		return "", errors.New("dataType or version is an object or array")
	}
	return dts + "___" + vs, nil
}

// object is a JSON object that keeps its key order, as JavaScript objects
// do for string keys.
type object []member

type member struct {
	key   string
	value json.RawMessage
}

func parseObject(raw []byte) (object, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errors.New("not a JSON object")
	}
	var o object
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		o.set(key, v) // a repeated key keeps its first place and last value, as JSON.parse does
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("data after the JSON object")
	}
	return o, nil
}

func (o object) get(key string) (json.RawMessage, bool) {
	for _, m := range o {
		if m.key == key {
			return m.value, true
		}
	}
	return nil, false
}

func (o *object) set(key string, v json.RawMessage) {
	for i := range *o {
		if (*o)[i].key == key {
			(*o)[i].value = v
			return
		}
	}
	*o = append(*o, member{key, v})
}

func (o object) marshal() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, m := range o {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.Write(jsonString(m.key))
		buf.WriteByte(':')
		if err := json.Compact(&buf, m.value); err != nil {
			return nil, err
		}
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// jsonString encodes s as JSON.stringify does for the characters that
// matter here (no HTML escaping).
func jsonString(s string) json.RawMessage {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'})
}

// rawKind is the first byte of a raw JSON value, which tells its JSON type
// ('[' an array, '"' a string), or 0 when there is none (undefined).
func rawKind(v json.RawMessage) byte {
	v = bytes.TrimLeft(v, " \t\r\n")
	if len(v) == 0 {
		return 0
	}
	return v[0]
}
