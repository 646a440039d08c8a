package records

import (
	"errors"
	"fmt"
	"math/big"
	"regexp"
	"strconv"
	"strings"

	"github.com/backfill-dev/backfill/cumulus/cmr"
	"github.com/backfill-dev/backfill/cumulus/granulefiles"
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
		providerURL, err := buildProviderURL(jsvalue.Obj(mc.provider))
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

// buildProviderURL is @cumulus/common's buildURL of meta.provider: new
// URL(protocol + "://" + host), its port set to the provider's port (not
// for s3), serialized without a trailing slash. The URL is parsed as the
// WHATWG URL standard (Node's URL) parses it, for what provider hosts hold:
// a special scheme's host is lowercased, ends at "/", "\\", "?" or "#", and
// loses its scheme's default port (https://h:443 is https://h); a host
// that is itself a URL (http + "https://h:40521") has the host "https" and
// the path "//h:40521", as Cumulus writes it.
func buildProviderURL(p map[string]any) (string, error) {
	proto, ok := p["protocol"]
	if !ok || proto == nil {
		return "", errors.New("TypeError: protocol is required")
	}
	host, ok := p["host"]
	if !ok || host == nil {
		return "", errors.New("TypeError: host is required")
	}
	scheme, h := jsvalue.String(proto, true), jsvalue.String(host, true)
	u, err := parseURL(scheme, h)
	if err != nil {
		return "", fmt.Errorf("TypeError: Invalid URL: %s://%s", scheme, h)
	}
	if port, ok := p["port"]; ok && jsvalue.Truthy(port) && scheme != "s3" {
		u.setPort(jsvalue.String(port, true))
	}
	return strings.TrimSuffix(u.String(), "/"), nil
}

// defaultPorts are the WHATWG special schemes' default ports.
var defaultPorts = map[string]string{"http": "80", "https": "443", "ftp": "21", "ws": "80", "wss": "443", "file": ""}

// whatwgURL is a URL as the WHATWG standard holds it, for buildURL.
type whatwgURL struct {
	scheme, host, port, rest string // rest: the path, query and fragment, as given
}

// parseURL parses scheme + "://" + hostAndRest. It covers what provider
// hosts hold (a name, a port, a path, a URL); user info and IPv6 hosts are
// refused, as they never name a provider.
func parseURL(scheme, hostAndRest string) (*whatwgURL, error) {
	if scheme == "" || strings.ContainsAny(scheme, ":/?#@[] ") {
		return nil, errors.New("bad scheme")
	}
	scheme = strings.ToLower(scheme)
	_, special := defaultPorts[scheme]
	ends := "/?#"
	if special {
		ends += "\\"
	}
	auth, rest := hostAndRest, ""
	if i := strings.IndexAny(hostAndRest, ends); i >= 0 {
		auth, rest = hostAndRest[:i], hostAndRest[i:]
	}
	if strings.ContainsAny(auth, "@[]") {
		return nil, errors.New("user info or IPv6 host")
	}
	host, port := auth, ""
	if i := strings.LastIndexByte(auth, ':'); i >= 0 {
		host, port = auth[:i], auth[i+1:]
		if strings.Trim(port, "0123456789") != "" {
			return nil, errors.New("bad port")
		}
	}
	if special {
		if host == "" || strings.ContainsAny(host, " %") {
			return nil, errors.New("bad host")
		}
		host = strings.ToLower(host)
	}
	u := &whatwgURL{scheme: scheme, host: host, rest: strings.ReplaceAll(rest, "\\", "/")}
	if port != "" && !u.setPort(port) {
		return nil, errors.New("bad port")
	}
	return u, nil
}

// setPort is the URL's port setter: the leading digits of v, dropped when
// they are the scheme's default; false when they are out of range (the
// setter then leaves the port as it was).
func (u *whatwgURL) setPort(v string) bool {
	digits := v[:len(v)-len(strings.TrimLeft(v, "0123456789"))]
	if digits == "" {
		return true
	}
	n, err := strconv.Atoi(digits)
	if err != nil || n > 65535 {
		return false
	}
	u.port = strconv.Itoa(n)
	if d, ok := defaultPorts[u.scheme]; ok && d == u.port {
		u.port = ""
	}
	return true
}

func (u *whatwgURL) String() string {
	s := u.scheme + "://" + u.host
	if u.port != "" {
		s += ":" + u.port
	}
	rest := u.rest
	if _, special := defaultPorts[u.scheme]; special && !strings.HasPrefix(rest, "/") {
		rest = "/" + rest
	}
	return s + rest
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
			f["source"] = urlJoin(providerURL, f["path"].(string), f["fileName"].(string))
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

// urlJoin is the url-join package (v4) that Cumulus joins a file's
// source with, step for step: a plain protocol first part is joined to
// the next; the protocol gets its two slashes (three for file:); each part
// loses its leading slashes (but the first) and its trailing ones (but the
// last, whose are made one); the parts are joined by "/"; a slash before
// "?", "&" or "#" goes; every "?" after the first becomes "&". Slashes
// inside a part are left as they are (http://https//host stays so).
func urlJoin(parts ...string) string {
	if len(parts) == 0 {
		return ""
	}
	parts = append([]string(nil), parts...)
	if plainProtocol.MatchString(parts[0]) && len(parts) > 1 {
		parts = append([]string{parts[0] + parts[1]}, parts[2:]...)
	}
	if strings.HasPrefix(parts[0], "file:///") {
		parts[0] = protocolSlashes.ReplaceAllString(parts[0], "$1:///")
	} else {
		parts[0] = protocolSlashes.ReplaceAllString(parts[0], "$1://")
	}
	var kept []string
	for i, c := range parts {
		if c == "" {
			continue
		}
		if i > 0 {
			c = strings.TrimLeft(c, "/")
		}
		if i < len(parts)-1 {
			c = strings.TrimRight(c, "/")
		} else if t := strings.TrimRight(c, "/"); t != c {
			c = t + "/"
		}
		kept = append(kept, c)
	}
	s := slashBeforeParams.ReplaceAllString(strings.Join(kept, "/"), "$1")
	if first, rest, ok := strings.Cut(s, "?"); ok {
		s = first + "?" + strings.ReplaceAll(rest, "?", "&")
	}
	return s
}

var (
	plainProtocol     = regexp.MustCompile(`^[^/:]+:/*$`)
	protocolSlashes   = regexp.MustCompile(`^([^/:]+):/*`)
	slashBeforeParams = regexp.MustCompile(`/(\?|&|#[^!])`)
)
