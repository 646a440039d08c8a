package uidfuzz

import (
	"encoding/base64"
	"fmt"
	"strings"
)

// emitted is the body of an entry as PyYAML's emitter writes one (and a
// hand may have touched): the keys of a legacy measurement, its requests
// and queries nested in blocks, flows wrapped over lines, every style of
// scalar, and comments.
func (g gen) emitted() string {
	var parts []string
	for range 1 + g.rng.IntN(5) {
		parts = append(parts, g.pick(
			"agent: agent\n", "socksproxy: null\n", "body_length_match: true\nbody_proportion: 1.0\nfactor: 0.8\n",
			"control_failure: null\nexperiment_failure: "+g.pick("null", "generic_timeout_error", "'[Errno 111] Connection refused'")+"\n",
			"headers_diff: "+g.pick("!!set {}", "!!set {x-cache: null, via: null}", "null", "[a, b]", "{}", "7")+"\n",
			"received: "+g.pick("[]", "null", "5", "'abc'", "[[a, 1], [b, 2]]", "{a: 1}")+"\n",
			"tampering: "+g.pick("{}", "{8.8.8.8: false}", "[[a, 1]]", "[[a]]", "true", "[x]")+"\n",
			"# a comment\n", "numbers: ["+g.numbers()+"]\n", "n: "+g.number()+" # a trailing comment\n",
			"'quoted key': "+g.scalar()+"\n", "1: one\n2.5: two\nnull: three\n", "empty:\nalso_empty: ''\ntilde: ~\n",
			"wrapped: "+g.wrapped()+"\n", "dup: 1\ndup: 2\n", "scalar: "+g.scalar()+"\n",
			g.requests(), g.queries(), g.aliased(),
		))
	}
	return strings.Join(parts, "")
}

// scalar is a value in one of the styles the emitter writes.
func (g gen) scalar() string {
	return g.pick("plain text", "'single ''quoted'''", `"double \"quoted\" \t\x41\u00e9\U0001F600"`, "http://example.com/a?b=c&d=e",
		"<RR name=example.com type=A class=IN ttl=300s auth=False>", g.number(), "yes", "Off", "NULL", "2014-01-02", "2014-01-02 03:04:05",
		"106.120.167.66", "0.1.0", "a:b", "x, y", "[Query('example.com', 1, 1)]", "'[Query(''example.com'', 1, 1)]'", `"\x80\xff"`)
}

func (g gen) number() string {
	return g.pick("0", "7", "200", "1.0", "0.8", "-3", "+4", "1_000", "0x1F", "017", "0b101", "1:30", "1:30.5", ".5", "-.inf", ".NaN",
		"1e5", "1.0e+5", "00", "0.", "12345678901234567890", "3.14159265358979")
}

func (g gen) numbers() string {
	var xs []string
	for range g.rng.IntN(6) {
		xs = append(xs, g.number())
	}
	return strings.Join(xs, ", ")
}

// wrapped is a scalar or a flow the emitter wrapped over lines, under a
// key at column 0.
func (g gen) wrapped() string {
	return g.pick(
		"plain scalar that goes on\n  over the next line\n  and the one after",
		"'single quoted\n  over lines\n\n  with an empty one'",
		"\"double quoted with an escaped\\\n  \\ line break and a folded\n  one\"",
		"[106.120.167.66, 1.2.3.4,\n  5.6.7.8, <A address=106.120.167.66\n    ttl=300>]",
		"{a: 1, b: [x,\n    y], c: 'z'}",
		"|\n  literal\n    kept indentation\n\n  after an empty line",
		"|-\n  stripped",
		"|+\n  kept\n",
		"!!binary |\n  "+base64.StdEncoding.EncodeToString([]byte(g.pick("héllo", "\xff\xfe", "<html/>"))),
	)
}

// requests are an HTTP test's requests, in blocks and flows.
func (g gen) requests() string {
	var b strings.Builder
	b.WriteString("requests:\n")
	for range 1 + g.rng.IntN(3) {
		body := g.pick("null", "''", `"<html>\n  <head></head>\n</html>\n"`, "'<html/>'",
			"!!binary |\n      "+base64.StdEncoding.EncodeToString([]byte(g.pick("héllo", "\xff\xfe\x80", "<html/>"))),
			"|\n      <html>\n      </html>", "5", "[a]")
		value := g.pick("text/html", "'a, b'", strings.Repeat("x", 10+g.rng.IntN(2)*9990), "null", "[v1, v2]", "7")
		headers := g.pick("[]", "{}", "\n    - [Content-Type, "+value+"]\n    - [Server, nginx]",
			"[[Content-Type, "+value+"], [X, y]]", "\n    - [Content-Type]", "\n      Content-Type: [text/html]", "null")
		if !strings.HasPrefix(headers, "\n") {
			headers = " " + headers
		}
		fmt.Fprintf(&b, "- request:\n    body: null\n    headers: []\n    method: GET\n    tor: %s\n    url: %s\n",
			g.pick("{is_tor: false}", "null", "true", "0", "'x'", "{exit_ip: null, exit_name: null, is_tor: false}"),
			g.pick("http://example.com/", "shttp://x.onion/", "null", "7"))
		switch g.rng.IntN(6) {
		case 0:
			b.WriteString("  response: null\n")
		case 1: // no response: OONI's loop ends there
		default:
			fmt.Fprintf(&b, "  response:\n    body: %s\n    code: 200\n    headers:%s\n", body, headers)
		}
	}
	return b.String()
}

// queries are a DNS test's queries and their answers.
func (g gen) queries() string {
	var b strings.Builder
	b.WriteString("queries:\n")
	for range 1 + g.rng.IntN(3) {
		fmt.Fprintf(&b, "- addrs: [106.120.167.66]\n  answers:\n  - [<RR name=example.com %s class=IN ttl=300s auth=False>, %s]\n"+
			"  failure: null\n  hostname: example.com\n  query: '[Query(''example.com'', 1, 1)]'\n  query_type: A\n  resolver: [8.8.8.8, '53']\n",
			g.pick("type=A", "type=MX", "type=TXT", "type=", "TYPE=A"), g.pick("<A address=106.120.167.66\n      ttl=300>", "7", "null", "'x'", "[a]"))
	}
	return b.String()
}

// aliased are requests in which an object appears twice, as the emitter
// writes it: an anchor where it first appears, an alias where again. A
// shared object is one object to OONI's normalisation, which changes some
// in place (a request's headers become a dict).
func (g gen) aliased() string {
	headers := g.pick("\n    - [Host, example.com]\n    - [Server, nginx]", " [[Host, example.com]]", " []")
	// The emitter names an entry's anchors id001, id002, …; the same name
	// twice (which PyYAML's composer refuses) comes now and then.
	id := fmt.Sprintf("id%03d", 1+g.rng.IntN(4))
	switch g.rng.IntN(4) {
	case 0: // the headers list of a request and its response
		return "requests:\n- request:\n    body: null\n    headers: &" + id + headers +
			"\n    method: GET\n    tor: {is_tor: false}\n    url: http://example.com/\n  response:\n    body: x\n    code: 200\n    headers: *" + id + "\n"
	case 1: // the tor dict of two requests
		return "requests:\n- request: {body: null, headers: [], method: GET, tor: &" + id + " {is_tor: false}, url: 'http://a/'}\n  response: {body: a, headers: []}\n" +
			"- request: {body: null, headers: [], method: GET, tor: *" + id + ", url: 'http://b/'}\n  response: {body: b, headers: []}\n"
	case 2: // one request twice
		return "requests:\n- request: &" + id + "\n    body: null\n    headers:" + headers + "\n    method: GET\n    tor: null\n    url: http://example.com/\n" +
			"  response: {body: a, headers: []}\n- request: *" + id + "\n  response: {body: b, headers: []}\n"
	}
	// one session twice
	return "requests:\n- &" + id + "\n  request: {body: null, headers: [[Host, a]], method: GET, tor: null, url: 'http://a/'}\n  response:\n    body: a\n    headers:" + headers + "\n- *" + id + "\n"
}
