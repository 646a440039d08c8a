package cumulusdb

import (
	"maps"
	"math"
	"slices"
	"strconv"

	"github.com/backfill-dev/backfill/cumulus/jsvalue"
)

// The API granule schema of Cumulus v21 (api/lib/schemas.js), checked as
// its recordIsValid does: every object node refuses properties it does not
// name (except error and queryFields), the record is checked with its null
// values removed, and the first error is reported, as Ajv 6 reports it.

type prop struct {
	name string
	typ  string   // string, boolean, number, integer, object, array
	enum []string // allowed values
}

var granuleProps = []prop{
	{name: "archived", typ: "boolean"},
	{name: "granuleId", typ: "string"},
	{name: "producerGranuleId", typ: "string"},
	{name: "pdrName", typ: "string"},
	{name: "collectionId", typ: "string"},
	{name: "status", typ: "string", enum: []string{"running", "completed", "failed", "queued"}},
	{name: "execution", typ: "string"},
	{name: "cmrLink", typ: "string"},
	{name: "published", typ: "boolean"},
	{name: "duration", typ: "number"},
	{name: "files", typ: "array"},
	{name: "error", typ: "object"},
	{name: "productVolume", typ: "string"},
	{name: "timeToPreprocess", typ: "number"},
	{name: "beginningDateTime", typ: "string"},
	{name: "endingDateTime", typ: "string"},
	{name: "processingStartDateTime", typ: "string"},
	{name: "processingEndDateTime", typ: "string"},
	{name: "lastUpdateDateTime", typ: "string"},
	{name: "timeToArchive", typ: "number"},
	{name: "productionDateTime", typ: "string"},
	{name: "timestamp", typ: "integer"},
	{name: "createdAt", typ: "integer"},
	{name: "updatedAt", typ: "integer"},
	{name: "provider", typ: "string"},
	{name: "queryFields", typ: "object"},
}

var granuleRequired = []string{"granuleId", "collectionId", "producerGranuleId", "status", "updatedAt"}

var fileProps = []prop{
	{name: "bucket", typ: "string"},
	{name: "checksum", typ: "string"},
	{name: "checksumType", typ: "string"},
	{name: "createdAt", typ: "integer"},
	{name: "fileName", typ: "string"},
	{name: "key", typ: "string"},
	{name: "size", typ: "integer"},
	{name: "source", typ: "string"},
	{name: "type", typ: "string"},
	{name: "updatedAt", typ: "integer"},
}

// ajvError is one error as Ajv 6 reports it.
type ajvError struct {
	Keyword    string         `json:"keyword"`
	DataPath   string         `json:"dataPath"`
	SchemaPath string         `json:"schemaPath"`
	Params     map[string]any `json:"params"`
	Message    string         `json:"message"`
}

// A SchemaError is Cumulus's SchemaValidationError.
type SchemaError struct {
	Detail string // the Ajv errors as JSON
}

func (e *SchemaError) Error() string {
	return "SchemaValidationError: The record has validation errors: " + e.Detail
}

func typeOK(v any, typ string) bool {
	switch typ {
	case "string":
		_, ok := v.(string)
		return ok
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "number":
		_, ok := v.(float64)
		return ok
	case "integer":
		f, ok := v.(float64)
		return ok && !math.IsNaN(f) && (math.IsInf(f, 0) || f == math.Trunc(f))
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	}
	return false
}

func schemaErr(e ajvError) error {
	return &SchemaError{Detail: jsvalue.Stringify([]ajvError{e})}
}

// Validate checks an API granule record against the schema.
func Validate(rec map[string]any) error {
	r := make(map[string]any, len(rec))
	for k, v := range rec {
		if v != nil {
			r[k] = v
		}
	}
	for _, k := range granuleRequired {
		if _, ok := r[k]; !ok {
			return schemaErr(ajvError{"required", "", "#/required", map[string]any{"missingProperty": k}, "should have required property '" + k + "'"})
		}
	}
	if err := checkObject(r, granuleProps, "", "#"); err != nil {
		return err
	}
	for _, p := range granuleProps {
		v, ok := r[p.name]
		if !ok {
			continue
		}
		path := "." + p.name
		sp := "#/properties/" + p.name
		if !typeOK(v, p.typ) {
			return schemaErr(ajvError{"type", path, sp + "/type", map[string]any{"type": p.typ}, "should be " + p.typ})
		}
		if p.enum != nil && !slices.Contains(p.enum, v.(string)) {
			return schemaErr(ajvError{"enum", path, sp + "/enum", map[string]any{"allowedValues": p.enum}, "should be equal to one of the allowed values"})
		}
		if p.name == "files" {
			for i, f := range v.([]any) {
				fp := path + "[" + strconv.Itoa(i) + "]"
				fsp := sp + "/items"
				fo, isObj := f.(map[string]any)
				if !isObj {
					return schemaErr(ajvError{"type", fp, fsp + "/type", map[string]any{"type": "object"}, "should be object"})
				}
				if err := checkObject(fo, fileProps, fp, fsp); err != nil {
					return err
				}
				for _, q := range fileProps {
					if fv, ok := fo[q.name]; ok && !typeOK(fv, q.typ) {
						return schemaErr(ajvError{"type", fp + "." + q.name, fsp + "/properties/" + q.name + "/type", map[string]any{"type": q.typ}, "should be " + q.typ})
					}
				}
			}
		}
	}
	return nil
}

// checkObject refuses a property the schema does not name, in the
// object's own key order as Ajv walks it (insertion order in JavaScript;
// the builder's order here, which names only schema properties).
func checkObject(o map[string]any, props []prop, path, sp string) error {
	for _, k := range slices.Sorted(maps.Keys(o)) {
		known := false
		for _, p := range props {
			if p.name == k {
				known = true
				break
			}
		}
		if !known {
			return schemaErr(ajvError{"additionalProperties", path, sp + "/additionalProperties", map[string]any{"additionalProperty": k}, "should NOT have additional properties"})
		}
	}
	return nil
}
