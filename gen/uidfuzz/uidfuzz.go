// Package uidfuzz generates raw OONI reports, JSON and YAML, that carry
// the byte-level oddities real uploads carry, for a differential test of
// the measurement_uids the tool gives against those OONI's own code
// gives: reports framed otherwise by lines and by documents, the values
// ujson reads its own way, YAML documents that load to nothing, tests
// OONI refuses, bodies that are bytes, and YAML that PyYAML refuses.
//
// Each oddity belongs to a category; Generate makes reports of the
// categories asked for, the same bytes for the same seed.
package uidfuzz

import (
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
)

// The categories.
const (
	JSONFraming = "json_framing" // blank lines, CRLF, a line that starts or ends otherwise, no last "\n", a document over two lines
	JSONValues  = "json_values"  // dates of every shape, NaN, leading zeros, surrogates, invalid UTF-8, deep nesting
	YAMLBasic   = "yaml_basic"   // entries of every date rule and test
	YAMLFalsy   = "yaml_falsy"   // documents that load to something false, the python/ tags' included
	YAMLRefused = "yaml_refused" // tests OONI refuses, in reports of data_format_version 0.2.0 or not
	YAMLBinary  = "yaml_binary"  // request bodies that are bytes, UTF-8 or not
	YAMLErrors  = "yaml_errors"  // what PyYAML's scanner and composer refuse, and yaml.v3 may not
	YAMLEmitter = "yaml_emitter" // entries as PyYAML's emitter wrote them: nested blocks, wrapped flows and scalars, quoting, literals, comments
)

// Categories are every category, in order.
var Categories = []string{JSONFraming, JSONValues, YAMLBasic, YAMLFalsy, YAMLRefused, YAMLBinary, YAMLErrors, YAMLEmitter}

// Report is a generated raw report.
type Report struct {
	Textname string // YYYY-MM-DD/<basename>
	Category string
	Raw      []byte
}

// Generate returns n reports of the categories cats (in turn), from seed.
func Generate(seed uint64, n int, cats []string) ([]Report, error) {
	for _, c := range cats {
		if !slices.Contains(Categories, c) {
			return nil, fmt.Errorf("uidfuzz: no category %q (the categories: %s)", c, strings.Join(Categories, ", "))
		}
	}
	if len(cats) == 0 {
		return nil, fmt.Errorf("uidfuzz: no category")
	}
	rng := rand.New(rand.NewPCG(seed, 0x756964))
	out := make([]Report, 0, n)
	for i := range n {
		c := cats[i%len(cats)]
		g := gen{rng: rng}
		ext, raw := "json", []byte(nil)
		switch c {
		case JSONFraming:
			raw = g.jsonFraming()
		case JSONValues:
			raw = g.jsonValues()
		default:
			ext, raw = "yaml", g.yaml(c)
		}
		// Two reports of a second share it: the textnames stay unique.
		tn := fmt.Sprintf("2014-01-05/20140105T%02d%02d%02dZ-ZZ-AS0-%s-r%d-0.2.0-probe.%s", i/3600%24, i/60%60, i%60, strings.ReplaceAll(c, "_", ""), i, ext)
		out = append(out, Report{Textname: tn, Category: c, Raw: raw})
	}
	return out, nil
}

type gen struct{ rng *rand.Rand }

func (g gen) pick(xs ...string) string { return xs[g.rng.IntN(len(xs))] }

// date is a measurement_start_time of one of the shapes strptime reads or
// refuses.
func (g gen) date() string {
	d, h := 1+g.rng.IntN(28), g.rng.IntN(24)
	return g.pick(
		fmt.Sprintf("2014-01-%02d %02d:10:11", d, h), fmt.Sprintf("2014-1-%d %d:1:1", d, h), fmt.Sprintf("2014-01-%02dT%02d:10:11Z", d, h),
		fmt.Sprintf("2014-02-30 %02d:10:11", h), fmt.Sprintf(" 2014-01-%02d %02d:10:11", d, h), fmt.Sprintf("2014-01-%02d\u00a0%02d:10:11", d, h),
		fmt.Sprintf("2014-01-%02d %02d:10:11.5", d, h), "", "yesterday")
}

// jsonLine is a measurement as one JSON object, without its "\n".
func (g gen) jsonLine() string {
	fields := []string{fmt.Sprintf(`"input":"http://example%d.com/"`, g.rng.IntN(1000)), `"test_name":"web_connectivity"`}
	switch g.rng.IntN(5) {
	case 0: // no date
	case 1:
		fields = append(fields, fmt.Sprintf(`"measurement_start_time":%d`, g.rng.IntN(100)))
	default:
		fields = append(fields, fmt.Sprintf(`"measurement_start_time":%q`, g.date()))
	}
	fields = append(fields, fmt.Sprintf(`"test_keys":{"accessible":%v,"n":%d}`, g.rng.IntN(2) == 0, g.rng.IntN(1<<20)))
	g.rng.Shuffle(len(fields), func(i, j int) { fields[i], fields[j] = fields[j], fields[i] })
	return "{" + strings.Join(fields, ",") + "}"
}

func (g gen) jsonFraming() []byte {
	var b strings.Builder
	lines := 2 + g.rng.IntN(5)
	crlf := g.rng.IntN(6) == 0
	for i := range lines {
		line := g.jsonLine()
		switch g.rng.IntN(12) {
		case 0:
			b.WriteString("\n") // a blank line
		case 1:
			line = g.pick(" ", "\t", "\r", "\ufeff", "[1,2]\n", "xyz\n") + line
		case 2:
			line += g.pick(",", " ", "\r", " \t", "\r\r")
		case 3: // a document over two lines
			if k := strings.IndexByte(line, ','); k > 0 {
				line = line[:k+1] + "\n" + line[k+1:]
			}
		}
		b.WriteString(line)
		switch {
		case i == lines-1 && g.rng.IntN(4) == 0: // no last "\n"
		case crlf:
			b.WriteString("\r\n")
		default:
			b.WriteString("\n")
		}
	}
	return []byte(b.String())
}

func (g gen) jsonValues() []byte {
	var b strings.Builder
	for range 2 + g.rng.IntN(4) {
		line := g.jsonLine()
		odd := g.pick(`"x":NaN`, `"x":-Infinity`, `"x":007`, `"x":1.`, `"x":-`, `"x":"\ud800"`, "\"x\":\"\xed\xa0\x80\"", "\"x\":\"\xff\"",
			`"x":"\u0000"`, "\"x\":\"\x01\"", `"x":[[[[[[[[[[1]]]]]]]]]]`, `"x":123456789012345678901234567890`, `"measurement_start_time":null`,
			`"measurement_start_time":"2014-01-01 00:00:00","measurement_start_time":"2015-01-01 00:00:00"`, `"x":1e400`, `"x":"\uDBFF\uDFFF"`)
		if g.rng.IntN(2) == 0 {
			line = line[:len(line)-1] + "," + odd + "}"
		}
		b.WriteString(line + "\n")
	}
	return []byte(b.String())
}

// header is a YAML report's header document.
func (g gen) header(test, dfv string) string {
	h := fmt.Sprintf("---\nprobe_cc: ZZ\nprobe_asn: AS0\nstart_time: %d.0\n", 1388880000+g.rng.IntN(86400))
	if g.rng.IntN(4) > 0 {
		h += fmt.Sprintf("report_id: r%d\n", g.rng.IntN(1000))
	} else {
		h += "software_version: 1.0.0\n"
	}
	if test != "" {
		h += "test_name: " + test + "\n"
	}
	if dfv != "" {
		h += "data_format_version: " + dfv + "\n"
	}
	return h + "...\n"
}

// entry is a YAML entry of one of OONI's date rules.
func (g gen) entry(body string) string {
	e := "---\ninput: example" + fmt.Sprint(g.rng.IntN(1000)) + ".com\n"
	switch g.rng.IntN(6) {
	case 0:
		e += fmt.Sprintf("test_start_time: %d.%d\n", 1388880000+g.rng.IntN(86400), g.rng.IntN(10))
	case 1:
		e += "test_start_time: null\n"
	case 2:
		e += fmt.Sprintf("test_start_time: '2014-01-05 01:02:03'\nmeasurement_start_time: %q\n", g.date())
	case 3:
		e += fmt.Sprintf("measurement_start_time: %q\n", g.date())
	case 4:
		e += "test_start_time: 2014-01-05 01:02:03\n" // a timestamp: normalisation fails
	}
	return e + body + "...\n"
}

func (g gen) yaml(cat string) []byte {
	test := g.pick("dns_consistency", "http_requests", "DNS tamper", "dns_injection", "http_invalid_request_line", "multi_protocol_traceroute")
	dfv := g.pick("0.1.0", "", "0.2.0")
	var docs []string
	n := 1 + g.rng.IntN(4)
	switch cat {
	case YAMLRefused:
		test = g.pick("tcp_connect", "captive_portal", "captiveportal", "tls-handshake", "bridge_reachability", "psiphon_test", "lantern_circumvention_tool_test", "dns_spoof")
		for range n {
			docs = append(docs, g.entry(g.pick("", "data_format_version: 0.2.0\n", "data_format_version: 0.1.0\n")))
		}
	case YAMLBinary:
		for range n {
			body := []byte(g.pick("héllo", "<html/>", "\xff\xfe\x80", "", "abc\x00"))
			docs = append(docs, g.entry(g.pick(
				fmt.Sprintf("requests:\n- request: {url: 'http://x'}\n  response: {body: !!binary '%s', headers: []}\n", base64.StdEncoding.EncodeToString(body)),
				fmt.Sprintf("requests:\n- request: {url: 'http://x'}\n- response: {body: !!binary '%s'}\n", base64.StdEncoding.EncodeToString(body)),
				"requests:\n- response: null\n",
				fmt.Sprintf("requests:\n- response: {body: %q}\n", string(body)))))
		}
	case YAMLFalsy:
		for range n {
			docs = append(docs, g.entry(""), "---\n"+g.pick(`!!binary ""`, "!!python/int 0", "!!python/complex 0j", "!!set {}", "!!bool no", "!!python/tuple []",
				"0000", "0.", "!!python/none x", "!!python/str ''", "null", "~", "{}", "!!python/complex 1j", "!!binary AA==", "0:00", "!!value =", "!foo 0")+"\n...\n")
		}
	case YAMLEmitter:
		for range n {
			docs = append(docs, g.entry(g.emitted()))
		}
	case YAMLErrors:
		for range n {
			docs = append(docs, g.entry(""), g.pick(
				"---\na: *undefined\n...\n", "---\nkey: value: other\n...\n", "---\na: b\u2028c\n...\n", "---\na:\tb\n...\n",
				"---\na: 1\n---\nb: 2\n...\n", "---\na:\n  b: 1\n c: 2\n...\n", "---\n- a\nb: 1\n...\n", "---\na: 'unclosed\n...\n"))
		}
	default:
		for range n {
			docs = append(docs, g.entry(g.pick("", "queries: []\n", "tampering: {8.8.8.8: false}\n",
				"requests:\n- request: {url: 'http://x', body: null, headers: []}\n  response: {body: '<html/>', headers: [], code: 200}\n")))
		}
	}
	return []byte(g.header(test, dfv) + strings.Join(docs, ""))
}
