package ooniuid

import (
	"errors"
	"math"
	"math/big"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// YAMLReport gives the measurements of a YAML report their
// measurement_uid as OONI's fastpath does: each entry (document after the
// header) loaded with PyYAML's safe loader, merged with the header (the
// header's keys win; a header test_start_time is dropped for good once an
// entry has its own), normalised (ooni/backend's normalize_entry: the
// date of its measurement_start_time, from the entry's own for format
// 0.2.0, else from test_start_time or start_time), and no uid where that
// normalisation fails or refuses the test (tcp_connect, captive_portal,
// the scapy tests and others), for an entry that does not load, and for
// every entry from one that loads to something but a mapping on (OONI's
// reading of the report ends there).
//
// Give it the documents that get an ndx, in order; a YAML loader is not
// PyYAML, so documents PyYAML and yaml.v3 parse apart are the limit of
// its fidelity.
type YAMLReport struct {
	header *pyDict // nil when the header does not load: no entry gets a uid
	dead   bool
	arena  arena // the entry's collections, reused from one entry to the next
}

// NewYAMLReport starts a report whose header document is header.
func NewYAMLReport(header []byte) *YAMLReport {
	v, err := pyLoad(header)
	h, ok := v.(*pyDict)
	if err != nil || !ok || !reportID(h) {
		return &YAMLReport{dead: true}
	}
	// The header's keys win over an entry's: a header that names a test
	// OONI refuses refuses every entry, which need not be loaded, unless
	// the entries may be of data_format_version 0.2.0, which OONI's
	// normalisation returns before it looks at the test.
	if dfv, ok := h.get("data_format_version"); !ok || dfv == "0.2.0" {
		return &YAMLReport{header: h}
	}
	if tn, ok := h.v("test_name").(string); ok {
		if m, ok := testNames[tn]; ok {
			tn = m
		} else {
			tn = strings.ToLower(tn)
		}
		if refusedTests[tn] || scapytTests[tn] || processTests[tn] {
			return &YAMLReport{dead: true}
		}
	}
	return &YAMLReport{header: h}
}

// reportID tells whether OONI's reading of the report gets past its
// report_id: a header without one has one made from its start_time (a
// number), probe_cc, probe_asn, test_name, software_version (strings)
// and probe_city (a string, bytes or None), which raises otherwise.
func reportID(h *pyDict) bool {
	if id, _ := h.get("report_id"); truthy(id) {
		return true
	}
	if ts, ok := h.get("start_time"); ok {
		if _, err := fromTimestamp(ts); err != nil {
			return false
		}
	}
	for _, k := range []string{"probe_cc", "probe_asn", "test_name", "software_version"} {
		if v, ok := h.get(k); ok {
			if _, isStr := v.(string); !isStr {
				return false
			}
		}
	}
	switch h.v("probe_city").(type) {
	case nil, string, []byte:
		return true
	}
	return false
}

// UID returns the measurement_uid of the next entry, the document doc
// whose content hash is h; "" where OONI gives none.
func (y *YAMLReport) UID(doc []byte, h Hash) string {
	if y.dead {
		return ""
	}
	y.arena.reset()
	v, err := pyLoadIn(doc, len(y.header.keys)+len(schema), &y.arena)
	if errors.Is(err, errReader) || errors.Is(err, errFatal) {
		y.dead = true
		return ""
	}
	if err != nil || !truthy(v) {
		return ""
	}
	entry, ok := v.(*pyDict)
	if !ok {
		y.dead = true // entry.update(header) raises outside OONI's guards
		return ""
	}
	if entry.has("test_start_time") && y.header.has("test_start_time") {
		y.header.del("test_start_time")
	}
	entry.reserve(len(y.header.keys) + len(schema))
	entry.update(y.header)
	mst, err := normalize(entry)
	if err != nil {
		return ""
	}
	return UID(mst, h)
}

var errNorm = errors.New("normalisation fails")

var testNames = map[string]string{
	"http_host": "http_host", "HTTP Host": "http_host", "http_requests_test": "http_requests", "http_requests": "http_requests",
	"HTTP Requests Test": "http_requests", "bridge_reachability": "bridge_reachability", "bridgereachability": "bridge_reachability",
	"TCP Connect": "tcp_connect", "tcp_connect": "tcp_connect", "DNS tamper": "dns_consistency", "dnstamper": "dns_consistency",
	"dns_consistency": "dns_consistency", "HTTP Invalid Request Line": "http_invalid_request_line",
	"http_invalid_request_line": "http_invalid_request_line", "http_header_field_manipulation": "http_header_field_manipulation",
	"HTTP Header Field Manipulation": "http_header_field_manipulation", "Multi Protocol Traceroute Test": "multi_protocol_traceroute",
	"multi_protocol_traceroute_test": "multi_protocol_traceroute", "multi_protocol_traceroute": "multi_protocol_traceroute",
	"traceroute": "multi_protocol_traceroute", "parasitic_traceroute_test": "parasitic_traceroute",
	"parasitic_tcp_traceroute_test": "parasitic_traceroute", "tls-handshake": "tls_handshake", "tls_handshake": "tls_handshake",
	"dns_injection": "dns_injection", "captivep": "captive_portal", "captiveportal": "captive_portal",
	"HTTPFilteringBypass": "http_filtering_bypass", "httpfilteringbypass": "http_filtering_bypass", "HTTPTrix": "http_trix",
	"httptrix": "http_trix", "http_test": "http_test", "http_url_list": "http_url_list", "dns_spoof": "dns_spoof",
	"netalyzrwrapper": "netalyzr_wrapper", "meek_fronted_requests_test": "meek_fronted_requests_test",
	"lantern_circumvention_tool_test": "lantern_circumvention_tool_test", "psiphon_test": "psiphon_test",
	"this_test_is_nameless": "this_test_is_nameless", "test_get_random_capitalization": "http_header_field_manipulation",
	"test_put_random_capitalization": "http_header_field_manipulation", "test_post_random_capitalization": "http_header_field_manipulation",
	"test_random_big_request_method": "http_invalid_request_line", "test_random_invalid_field_count": "http_invalid_request_line",
	"summary": "invalid", "test_get": "invalid", "test_post": "invalid", "test_put": "invalid", "test_send_host_header": "invalid",
}

// schema are the keys a normalised entry has at its top; the others go
// into its test_keys.
var schema = []string{"id", "input", "input_hashes", "report_id", "report_filename", "options", "probe_cc", "probe_asn", "probe_ip",
	"probe_city", "backend_version", "data_format_version", "test_name", "test_version", "test_start_time", "measurement_start_time",
	"test_runtime", "test_helpers", "software_name", "software_version", "bucket_date", "test_keys"}

// schemaKeys are schema's keys as values, made once.
var schemaKeys = func() []any {
	ks := make([]any, len(schema))
	for i, k := range schema {
		ks[i] = k
	}
	return ks
}()

func set(names ...string) map[string]bool {
	m := map[string]bool{}
	for _, n := range names {
		m[n] = true
	}
	return m
}

var (
	httptTests = set("http_requests", "meek_fronted_requests", "domclass_collector", "http_keyword_filtering", "http_uk_mobile_networks",
		"http_header_field_manipulation", "http_url_list", "http_host", "squid", "captive_portal", "psiphon", "tor_http_requests_test")
	dnstTests    = set("dns_consistency", "dns_injection", "captive_portal")
	processTests = set("lantern", "psiphon")
	scapytTests  = set("chinatrigger", "keyword_filtering", "parasitic_traceroute", "multi_protocol_traceroute", "dns_spoof")
	refusedTests = set("captive_portal", "tls_handshake", "tcp_connect", "bridge_reachability")
)

// isSchemaKey tells whether k is one of schema's keys.
func isSchemaKey(k string) bool {
	switch k {
	case "id", "input", "input_hashes", "report_id", "report_filename", "options", "probe_cc", "probe_asn", "probe_ip",
		"probe_city", "backend_version", "data_format_version", "test_name", "test_version", "test_start_time", "measurement_start_time",
		"test_runtime", "test_helpers", "software_name", "software_version", "bucket_date", "test_keys":
		return true
	}
	return false
}

// normalize follows normalize_entry far enough to know the date of the
// normalised measurement_start_time, or that it raises.
func normalize(e *pyDict) (string, error) {
	if r, ok := e.v("report").(*pyDict); ok {
		e.del("report")
		e.update(r)
	}
	tn := "invalid"
	if v, ok := e.get("test_name"); ok {
		switch x := v.(type) {
		case string:
			tn = x
		case []byte:
			tn = "\x00bytes" // bytes.lower(): no test of the sets below
		default:
			return "", errNorm // test_name.lower() of a number, None, a list
		}
	}
	if m, ok := testNames[tn]; ok {
		tn = m
	} else if !strings.HasPrefix(tn, "\x00") {
		tn = strings.ToLower(tn)
	}
	e.set("test_name", tn)
	for i, k := range schema {
		if !e.has(k) {
			e.add(schemaKeys[i], k, nil)
		}
	}
	if dfv, _ := e.get("data_format_version"); dfv == "0.2.0" {
		// Returned as it is: trivial_id reads its measurement_start_time.
		if s, ok := e.v("measurement_start_time").(string); ok && s != "" {
			return Date(s), nil
		}
		return NoDate, nil
	}
	ts, ok := e.get("start_time")
	if !ok {
		ts = big.NewInt(0)
	}
	e.del("start_time")
	start, err := fromTimestamp(ts)
	if err != nil {
		return "", err
	}
	var mst time.Time
	switch tst := e.v("test_start_time").(type) {
	case float64:
		if mst, err = fromTimestamp(tst); err != nil {
			return "", err
		}
	case nil:
		mst = start
	default:
		s, ok := tst.(string)
		if !ok || Date(s) == NoDate {
			return "", errNorm
		}
		m, ok := e.v("measurement_start_time").(string)
		if !ok || Date(m) == NoDate {
			return "", errNorm
		}
		d := Date(m)
		mst = time.Date(atoi(d[:len(d)-4]), time.Month(atoi(d[len(d)-4:len(d)-2])), atoi(d[len(d)-2:]), 0, 0, 0, 0, time.UTC)
	}
	e.del("test_start_time")
	if err := checkRest(e, tn); err != nil {
		return "", err
	}
	if mst.Year() < 1000 {
		return NoDate, nil // strftime writes the year in fewer than four digits, which strptime will not read
	}
	return mst.Format("20060102"), nil
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}

// fromTimestamp is datetime.utcfromtimestamp of a number: years 1 to
// 9999, rounded to the microsecond.
func fromTimestamp(v any) (time.Time, error) {
	var sec float64
	switch x := v.(type) {
	case bool:
		if x {
			sec = 1
		}
	case *big.Int:
		if !x.IsInt64() {
			return time.Time{}, errNorm
		}
		sec = float64(x.Int64())
	case float64:
		sec = x
	default:
		return time.Time{}, errNorm
	}
	if math.IsNaN(sec) || math.IsInf(sec, 0) || sec < -62135596800 || sec >= 253402300800 {
		return time.Time{}, errNorm
	}
	whole := math.Floor(sec)
	micros := math.RoundToEven((sec - whole) * 1e6)
	return time.Unix(int64(whole), int64(micros)*1000).UTC(), nil
}

// checkRest raises where the rest of normalize_entry does, for test tn:
// test_keys must take the keys moved into it, the test must be one OONI
// normalises, and the normalisation of its kind must not fail.
func checkRest(e *pyDict, tn string) error {
	if o, ok := e.v("options").(*pyDict); ok {
		sub, there := o.get("subargs")
		if !there {
			sub = []any{}
		}
		e.set("options", sub)
	}
	tk := e.v("test_keys")
	if tk == nil {
		tk = newDict()
		e.set("test_keys", tk)
	}
	keys, ok := tk.(*pyDict)
	moving := 0
	for _, k := range e.keys {
		if s, isStr := k.(string); !isStr || !isSchemaKey(s) {
			moving++
		}
	}
	if moving > 0 && !ok {
		return errNorm // test_keys[key] = ... on a list or a string
	}
	if !ok {
		return errNorm // not a dict: every test's normalisation reads it as one
	}
	ks, hks, vals := e.keys, e.hks, e.vals
	if keys == e {
		ks, hks, vals = slices.Clone(ks), slices.Clone(hks), slices.Clone(vals)
	}
	keys.reserve(moving)
	for i, k := range ks {
		if s, isStr := k.(string); !isStr || !isSchemaKey(s) {
			keys.put(k, hks[i], vals[i])
		}
	}
	if processTests[tn] {
		return errNorm
	}
	if httptTests[tn] {
		if err := httpt(e, keys); err != nil {
			return err
		}
	}
	if dnstTests[tn] {
		if err := dnst(keys, tn); err != nil {
			return err
		}
	}
	if tn == "website_probe" {
		if err := headersDiff(keys); err != nil {
			return err
		}
	}
	if tn == "http_invalid_request_line" {
		if recv, ok := keys.get("received"); ok {
			if !iterable(recv) {
				return errNorm
			}
		}
	}
	if scapytTests[tn] || refusedTests[tn] {
		return errNorm
	}
	// The requests' bodies, decoded where they are bytes (an HTTP
	// test's are text by now): a TypeError or a UnicodeDecodeError on
	// the way escapes; a KeyError ends the loop.
	if reqs, ok := keys.get("requests"); ok {
		items, ok := elements(reqs)
		if !ok {
			return errNorm
		}
		for _, r := range items {
			rd, ok := r.(*pyDict)
			if !ok {
				return errNorm // a string's, a list's, None's ["response"]
			}
			resp, there := rd.get("response")
			if !there {
				return nil // KeyError: caught, and the loop is over
			}
			respd, ok := resp.(*pyDict)
			if !ok {
				return errNorm // None["body"], or a string's
			}
			body, there := respd.get("body")
			if !there {
				return nil
			}
			if b, isBytes := body.([]byte); isBytes && !httptTests[tn] && !utf8.Valid(b) {
				return errNorm // bytes.decode() of what is not UTF-8
			}
		}
	}
	return nil
}

// iterable tells whether Python iterates v (for ... in v).
func iterable(v any) bool {
	switch v.(type) {
	case string, []byte, []any, *pyDict:
		return true
	}
	return false
}

// elements are what iterating v gives: a list's items, a dict's keys, a
// string's characters (as strings), a bytes' values (as ints).
func elements(v any) ([]any, bool) {
	switch x := v.(type) {
	case []any:
		return x, true
	case *pyDict:
		return x.keys, true
	case string:
		var out []any
		for _, r := range x {
			out = append(out, string(r))
		}
		return out, true
	case []byte:
		out := make([]any, len(x))
		for i, c := range x {
			out[i] = big.NewInt(int64(c))
		}
		return out, true
	}
	return nil, false
}

// index is v[i] for a list, a string or bytes; false where Python raises.
func index(v any, i int) (any, bool) {
	switch x := v.(type) {
	case []any:
		if i < len(x) {
			return x[i], true
		}
	case string:
		rs := []rune(x)
		if i < len(rs) {
			return string(rs[i]), true
		}
	case []byte:
		if i < len(x) {
			return big.NewInt(int64(x[i])), true
		}
	case *pyDict:
		if v, ok := x.at(dictKeyOf(big.NewInt(int64(i)))); ok {
			return v, true
		}
	}
	return nil, false
}

func dictKeyOf(v any) string { k, _ := dictKey(v); return k }

// length is len(v); false where Python raises.
func length(v any) (int, bool) {
	switch x := v.(type) {
	case string:
		return len([]rune(x)), true
	case []byte:
		return len(x), true
	case []any:
		return len(x), true
	case *pyDict:
		return len(x.keys), true
	}
	return 0, false
}

// headersDiff is normalize_headers_diff: list() of a headers_diff that is
// not None.
func headersDiff(keys *pyDict) error {
	if hd, ok := keys.get("headers_diff"); ok && hd != nil && !iterable(hd) {
		return errNorm
	}
	return nil
}

// httpt follows normalize_httpt where it may raise.
func httpt(e, keys *pyDict) error {
	// The --url or -u option fills a missing input, the last found of the
	// two: an index past the end of the options raises, and so does
	// bytes.index with a string.
	in, _ := e.get("input")
	switch o := e.v("options").(type) {
	case []byte:
		return errNorm
	case []any:
		idx := -1
		for _, name := range []string{"--url", "-u"} {
			for i, x := range o {
				if s, ok := x.(string); ok && s == name {
					idx = i + 1
					break
				}
			}
		}
		if idx >= 0 && in == nil && idx >= len(o) {
			return errNorm
		}
	case string:
		idx := -1
		for _, name := range []string{"--url", "-u"} {
			if i := strings.Index(o, name); i >= 0 {
				idx = len([]rune(o[:i])) + 1
			}
		}
		if idx >= 0 && in == nil && idx >= len([]rune(o)) {
			return errNorm
		}
	}
	req, _ := keys.get("request")
	resp, _ := keys.get("response")
	if truthy(req) && truthy(resp) {
		reqs, there := keys.get("requests")
		if !there {
			reqs = []any{}
		}
		l, ok := reqs.([]any)
		if !ok {
			return errNorm // append on something else
		}
		keys.del("request")
		keys.del("response")
		keys.set("requests", append(l, sessionOf(req, resp)))
	}
	reqs, there := keys.get("requests")
	if !there {
		reqs = []any{}
	}
	sessions, ok := elements(reqs)
	if !ok {
		return errNorm
	}
	for _, s := range sessions {
		sd, ok := s.(*pyDict)
		if !ok {
			return errNorm // session.get on something else
		}
		for _, part := range []string{"response", "request"} {
			p, _ := sd.get(part)
			pd, ok := p.(*pyDict)
			if !ok {
				sd.set(part, newDictOf("body", nil, "headers", newDict()))
				continue
			}
			body, there := pd.get("body")
			if !there {
				return errNorm
			}
			if err := normBody(body); err != nil {
				return err
			}
			headers, there := pd.get("headers")
			if !there {
				return errNorm
			}
			nh, err := normHeaders(headers)
			if err != nil {
				return err
			}
			pd.set("headers", nh)
		}
		rq := sd.v("request").(*pyDict)
		url, there := rq.get("url")
		if !there {
			return errNorm
		}
		u, ok := url.(string)
		if !ok {
			return errNorm
		}
		if !strings.HasPrefix(u, "shttp") {
			tor, _ := rq.get("tor")
			switch t := tor.(type) {
			case bool, nil, *pyDict: // a dict answers .get("is_tor")
			default:
				if !isFalseLike(t) {
					return errNorm // .get on a string, a number, a list
				}
			}
		}
		rs := sd.v("response").(*pyDict)
		if h, ok := rs.v("headers").(*pyDict); ok {
			for _, k := range h.keys {
				switch k.(type) {
				case string, []byte:
				default:
					return errNorm // k.lower()
				}
			}
		}
	}
	return headersDiff(keys)
}

// isFalseLike is a tor value equal to False or None in Python (0, 0.0).
func isFalseLike(v any) bool {
	switch x := v.(type) {
	case *big.Int:
		return x.Sign() == 0
	case float64:
		return x == 0
	}
	return false
}

func newDictOf(kv ...any) *pyDict {
	d := newDict()
	for i := 0; i+1 < len(kv); i += 2 {
		d.set(kv[i], kv[i+1])
	}
	return d
}

func sessionOf(req, resp any) *pyDict { return newDictOf("response", resp, "request", req) }

// normBody is normalize_body: None, bytes or a string.
func normBody(v any) error {
	switch v.(type) {
	case nil, []byte, string:
		return nil
	}
	return errNorm
}

// normHeaders is normalize_headers: pairs of a name and values, the first
// value (or its first) no longer than 9,999 and a string or bytes.
func normHeaders(h any) (*pyDict, error) {
	items, ok := elements(h)
	if !ok {
		return nil, errNorm
	}
	out := newDict()
	for _, it := range items {
		n, ok := length(it)
		if !ok || n != 2 {
			return nil, errNorm // for name, values in headers
		}
		name, _ := index(it, 0)
		values, _ := index(it, 1)
		value, ok := index(values, 0)
		if !ok {
			return nil, errNorm
		}
		if _, isList := value.([]any); isList {
			if value, ok = index(value, 0); !ok {
				return nil, errNorm
			}
		}
		if value != nil {
			l, ok := length(value)
			if !ok || l >= 10000 {
				return nil, errNorm
			}
			switch value.(type) {
			case string, []byte:
			default:
				return nil, errNorm
			}
		}
		if !out.set(name, value) {
			return nil, errNorm
		}
	}
	return out, nil
}

// dnst follows normalize_dnst where it may raise.
func dnst(keys *pyDict, tn string) error {
	keys.del("test_resolvers")
	errs, _ := keys.get("tampering")
	keys.del("tampering")
	if truthy(errs) {
		items, ok := elements(errs)
		if !ok {
			return errNorm
		}
		for _, e := range items {
			if _, ok := index(e, 1); !ok {
				return errNorm
			}
			if _, ok := index(e, 0); !ok {
				return errNorm
			}
		}
	}
	qs, there := keys.get("queries")
	keys.del("queries")
	if !there {
		return nil
	}
	items, ok := elements(qs)
	if !ok {
		return errNorm
	}
	for _, q := range items {
		qd, ok := q.(*pyDict)
		if !ok {
			return errNorm // query["hostname"] = None in the except
		}
		answers, there := qd.get("answers")
		if !there {
			continue
		}
		as, ok := elements(answers)
		if !ok {
			return errNorm
		}
		for _, a := range as {
			first, ok := index(a, 0)
			if !ok {
				return errNorm
			}
			s, ok := first.(string)
			if !ok {
				return errNorm // re.search on something else
			}
			if t := answerType(s); t == "A" || t == "MX" || t == "PTR" || t == "CNAME" || t == "SOA" {
				second, ok := index(a, 1)
				if !ok {
					return errNorm
				}
				if _, ok := second.(string); !ok {
					return errNorm
				}
			}
		}
	}
	return nil
}

// answerType is re.search("type=([A-Z]+)", s)'s group, or "".
func answerType(s string) string {
	i := strings.Index(s, "type=")
	for i >= 0 {
		j := i + 5
		for j < len(s) && s[j] >= 'A' && s[j] <= 'Z' {
			j++
		}
		if j > i+5 {
			return s[i+5 : j]
		}
		k := strings.Index(s[i+1:], "type=")
		if k < 0 {
			return ""
		}
		i += 1 + k
	}
	return ""
}
