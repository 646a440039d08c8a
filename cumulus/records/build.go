package records

import (
	"errors"
	"fmt"
	"math/big"

	"github.com/backfill-dev/backfill/cumulus/cmr"
	"github.com/backfill-dev/backfill/cumulus/granulefiles"
	"github.com/backfill-dev/backfill/cumulus/jsurl"
	"github.com/backfill-dev/backfill/cumulus/jsvalue"
)

// A MessageError is what Cumulus throws as CumulusMessageError.
type MessageError struct{ Msg string }

func (e *MessageError) Error() string { return "CumulusMessageError: " + e.Msg }

// msgContext is what Cumulus computes once per message before its
// granules (write-granules.js, writeGranulesFromMessage).
type msgContext struct {
	executionURL      string
	processingStart   string // ISO, "" when there is no start date
	processingEnd     string
	provider          any
	providerPresent   bool
	errorObj          any    // parseException(message.exception)
	errorText         string // JSON.stringify of errorObj, in the message's key order
	workflowStatus    any
	statusPresent     bool
	collectionID      string // "" when meta.collection lacks name or version
	pdrName           any
	pdrPresent        bool
	queryFields       any
	queryPresent      bool
	workflowStartTime any
}

func executionURL(arn string, region string) string {
	return "https://console.aws.amazon.com/states/home?region=" + region + "#/executions/details/" + arn
}

// collectionID is name___version from meta.collection, "" when either is
// falsy.
func collectionID(m map[string]any) string {
	c := jsvalue.Obj(jsvalue.Obj(m["meta"])["collection"])
	if !jsvalue.Truthy(c["name"]) || !jsvalue.Truthy(c["version"]) {
		return ""
	}
	return jsvalue.String(c["name"], true) + "___" + jsvalue.String(c["version"], true)
}

// parseException is Cumulus's parseException.
func parseException(v any, present bool) any {
	if !present || v == nil {
		return map[string]any{}
	}
	switch v.(type) {
	case map[string]any, []any:
		return v
	}
	return map[string]any{"Error": "Unknown Error", "Cause": v}
}

// granuleRecord builds one granule's API record as Cumulus's message path
// does (write-granules.js and @cumulus/message Granules.js). now is the
// granule's Date.now().
func (w *Writer) granuleRecord(mc *msgContext, granule any, now int64) (map[string]any, error) {
	g, isObj := granule.(map[string]any)
	if !isObj {
		return nil, fmt.Errorf("TypeError: a granule is %s, not an object", jsvalue.String(granule, true))
	}
	filesV, filesPresent := g["files"]
	if filesPresent && filesV == nil {
		return nil, &MessageError{"granule.files must not be null"}
	}
	var files []any
	built := false
	if jsvalue.Truthy(filesV) {
		if !mc.providerPresent || mc.provider == nil {
			return nil, errors.New("TypeError: Cannot destructure properties of meta.provider, which is " + jsvalue.String(mc.provider, mc.providerPresent))
		}
		providerURL, err := jsurl.ProviderURL(jsvalue.Obj(mc.provider))
		if err != nil {
			return nil, err
		}
		if files, err = w.databaseFiles(providerURL, filesV); err != nil {
			return nil, err
		}
		built = true
	}
	timeToArchive := secondsOf(g, "post_to_cmr_duration")
	timeToPreprocess := secondsOf(g, "sync_granule_duration")
	startMs := jsvalue.Number(mc.workflowStartTime, true)
	duration := (float64(now) - startMs) / 1000
	status, statusPresent := mc.workflowStatus, mc.statusPresent
	if !jsvalue.Truthy(status) {
		status, statusPresent = g["status"]
	}
	published, pubPresent := g["published"]
	if !pubPresent || published == nil {
		published = false
	}
	createdAt := g["createdAt"]
	if !jsvalue.Truthy(createdAt) {
		createdAt = mc.workflowStartTime
	}
	producer := g["producerGranuleId"]
	if !jsvalue.Truthy(producer) {
		producer = g["granuleId"]
	}
	if !mc.providerPresent || mc.provider == nil {
		return nil, errors.New("TypeError: Cannot read properties of " + jsvalue.String(mc.provider, mc.providerPresent) + " (reading 'id')")
	}
	granuleID, idPresent := g["granuleId"]
	if !jsvalue.Truthy(granuleID) {
		return nil, &MessageError{"Could not create granule record, invalid granuleId: " + jsvalue.String(granuleID, idPresent)}
	}
	if mc.collectionID == "" {
		return nil, &MessageError{"collectionId required to generate a granule record"}
	}
	rec := map[string]any{
		"granuleId":         granuleID,
		"collectionId":      mc.collectionID,
		"execution":         mc.executionURL,
		"error":             mc.errorObj,
		"published":         published,
		"createdAt":         createdAt,
		"timestamp":         float64(now),
		"updatedAt":         float64(now),
		"duration":          duration,
		"producerGranuleId": producer,
		"timeToPreprocess":  timeToPreprocess,
		"timeToArchive":     timeToArchive,
	}
	set := func(k string, v any, present bool) {
		if present {
			rec[k] = v
		}
	}
	set("pdrName", mc.pdrName, mc.pdrPresent)
	set("status", status, statusPresent)
	if p, ok := jsvalue.Obj(mc.provider)["id"]; ok {
		rec["provider"] = p
	}
	if v, ok := g["cmrLink"]; ok {
		rec["cmrLink"] = v
	}
	if built {
		rec["files"] = files
		rec["productVolume"] = productVolume(files)
	}
	if mc.processingStart != "" {
		rec["processingStartDateTime"] = mc.processingStart
		rec["processingEndDateTime"] = mc.processingEnd
	}
	withStatus := make(map[string]any, len(g)+1)
	for k, v := range g {
		withStatus[k] = v
	}
	withStatus["status"] = status
	dates, err := granulefiles.Temporal(w.files, withStatus, w.warn)
	if err != nil {
		return nil, err
	}
	if dates != nil {
		for i, d := range [4]cmr.Date{dates.BeginningDateTime, dates.EndingDateTime, dates.ProductionDateTime, dates.LastUpdateDateTime} {
			switch {
			case !d.Set:
			case d.Null:
				rec[cmr.Fields[i]] = nil
			default:
				rec[cmr.Fields[i]] = d.ISO
			}
		}
	} else {
		for _, k := range cmr.Fields {
			if v, ok := g[k]; ok {
				rec[k] = v
			}
		}
	}
	set("queryFields", mc.queryFields, mc.queryPresent)
	return rec, nil
}

// secondsOf is (granule[k] ?? 0) / 1000 with JavaScript's arithmetic.
func secondsOf(g map[string]any, k string) float64 {
	v, ok := g[k]
	if !ok {
		return 0
	}
	return jsvalue.Number(v, true) / 1000
}

// productVolume sums the integer sizes as a BigInt, as a decimal string.
func productVolume(files []any) string {
	sum := new(big.Int)
	for _, f := range files {
		if s, ok := jsvalue.Obj(f)["size"]; ok && jsvalue.IsInteger(s) {
			v, _ := big.NewFloat(s.(float64)).Int(nil)
			sum.Add(sum, v)
		}
	}
	return sum.String()
}

// fileKeys are the file properties of the granule schema.
var fileKeys = []string{"bucket", "checksum", "checksumType", "createdAt", "fileName", "key", "size", "source", "type", "updatedAt"}

// databaseFiles is Cumulus's buildDatabaseFiles (api/lib/FileUtils.js).
func (w *Writer) databaseFiles(providerURL string, v any) ([]any, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, errors.New("TypeError: files.map is not a function")
	}
	out := make([]any, 0, len(list))
	for _, e := range list {
		in, _ := e.(map[string]any)
		f := make(map[string]any, len(in)+4)
		for k, v := range in {
			f[k] = v
		}
		var err error
		if f["bucket"], err = fromFilename(f, "bucket"); err != nil {
			return nil, err
		}
		if f["key"], err = fromFilename(f, "key"); err != nil {
			return nil, err
		}
		f["checksum"] = firstTruthy(f, "checksum", "checksumValue")
		f["fileName"] = firstTruthy(f, "fileName", "name")
		if providerURL != "" && jsvalue.Truthy(f["path"]) {
			// url-join throws on a part that is not a string (a file
			// without a name, a numeric path), and the granule fails.
			for _, part := range []any{f["path"], f["fileName"]} {
				if _, isString := part.(string); !isString {
					return nil, errors.New("TypeError: Url must be a string. Received " + jsvalue.String(part, part != nil))
				}
			}
			f["source"] = jsurl.Join(providerURL, f["path"].(string), f["fileName"].(string))
		}
		if !jsvalue.IsInteger(f["size"]) {
			if jsvalue.IsInteger(f["fileSize"]) {
				f["size"] = f["fileSize"]
			} else if w.files != nil {
				if n, err := w.files.Size(jsvalue.String(f["bucket"], true), jsvalue.String(f["key"], true)); err == nil {
					f["size"] = float64(n)
				}
			}
		}
		clean := make(map[string]any, len(fileKeys))
		for _, k := range fileKeys {
			if v, ok := f[k]; ok && v != nil {
				clean[k] = v
			}
		}
		out = append(out, clean)
	}
	return out, nil
}

// fromFilename is getBucket/getKey: the file's own value when truthy, else
// parsed from its filename (an error when that is not an s3:// URI), else
// undefined (nil here: undefined and null both go at the end).
func fromFilename(f map[string]any, k string) (any, error) {
	if jsvalue.Truthy(f[k]) {
		return f[k], nil
	}
	if jsvalue.Truthy(f["filename"]) {
		b, key, err := granulefiles.ParseS3URI(jsvalue.String(f["filename"], true))
		if err != nil {
			return nil, err
		}
		if k == "bucket" {
			return b, nil
		}
		return key, nil
	}
	return nil, nil
}

func firstTruthy(f map[string]any, keys ...string) any {
	for _, k := range keys {
		if jsvalue.Truthy(f[k]) {
			return f[k]
		}
	}
	return nil
}
