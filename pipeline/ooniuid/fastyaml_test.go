package ooniuid

import (
	"bytes"
	"fmt"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/backfill-dev/backfill/gen/uidfuzz"
)

// pyEqual tells whether two loaded values are the same Python value of
// the same kind (a nil list and an empty one alike).
func pyEqual(a, b any) bool {
	switch x := a.(type) {
	case nil, bool, string, pyTime:
		return a == b
	case *big.Int:
		y, ok := b.(*big.Int)
		return ok && x.Cmp(y) == 0
	case float64:
		y, ok := b.(float64)
		return ok && (x == y && math.Signbit(x) == math.Signbit(y) || math.IsNaN(x) && math.IsNaN(y))
	case []byte:
		y, ok := b.([]byte)
		return ok && bytes.Equal(x, y)
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !pyEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case *pyDict:
		y, ok := b.(*pyDict)
		if !ok || len(x.keys) != len(y.keys) {
			return false
		}
		for i, k := range x.keys {
			if !pyEqual(k, y.keys[i]) || !pyEqual(x.vals[i], y.vals[i]) {
				return false
			}
		}
		return true
	}
	return false
}

// checkFast fails where the fast path loads doc to anything but what the
// faithful loader makes of it.
func checkFast(t *testing.T, doc []byte) bool {
	t.Helper()
	v, ok := fastLoad(doc, 0, nil)
	if !ok {
		return false
	}
	want, err := load(doc, false)
	if err != nil {
		t.Fatalf("%q: the fast path loads it, the faithful loader says %v", doc, err)
	}
	if !pyEqual(v, want) {
		t.Fatalf("%q:\nfast path %s\nfaithful  %s", doc, show(v), show(want))
	}
	return true
}

func show(v any) string {
	switch x := v.(type) {
	case *pyDict:
		var parts []string
		for i, k := range x.keys {
			parts = append(parts, show(k)+": "+show(x.vals[i]))
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case []any:
		var parts []string
		for _, e := range x {
			parts = append(parts, show(e))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	return fmt.Sprintf("%T(%#v)", v, v)
}

// fastTaken are documents of the shapes PyYAML's emitter writes, which
// the fast path takes; fastLeft, the edges of its subset, which it
// leaves to the faithful loader.
var fastTaken = []string{
	"a: 1\nb: [x, 'y', \"z\"]\nc: {d: e, f: null}\n",
	"probe_city: !!binary |\n  UmV5a2phdu1r\nheaders_diff: !!set {}\ntest_version: '0.1'\n",
	"queries:\n- addrs: [106.120.167.66]\n  answers:\n  - [<RR name=360.cn type=A class=IN ttl=300s auth=False>, <A address=106.120.167.66\n      ttl=300>]\n  query: '[Query(''360.cn'', 1, 1)]'\n",
	"requests:\n- request:\n    body: null\n    headers: []\n    tor: {is_tor: false}\n  response:\n    body: \"<html>\\n  <head>\\\n      \\ x\\x41\\u00e9\\U0001F600\"\n",
	"a: one\n  two\n  three\nb: |-\n  line\n\n   more\nc: |+\n  k\n\nd: x\n",
	"- - 1\n  - 2\n- k: v\n  l:\n  - 0x1F\n  - 017\n  - 1:30\n  - 1_000\n  - .5\n  - -.inf\n  - 2014-01-02 03:04:05\n  - yes\n  - ~\n",
	"'quoted key': 1\n\"k2\": 'it''s'\n3: three\nnull: x\n",
	"a: \"folded\n  line\n\n  and break\"\nb: 'single\n  folded'\n",
	"x: !!set {a: null, a: null, b: 1}\ny: [!!binary 'aGk=', {body: !!binary aGk=}]\n", "a:  \n  b\n",
	"[1., 01.5, 1.5e3, 1.0e+3, 1_0.5, ., 1..2, 1.2.3, 10.0.0.1, 99999999999999999, 0, 00, 08, yes, yEs, n, y, nULL, oN, Off, ~, 2014-01-02]\n",
	"a: 1 # c\nb: [x] # c\nc: |\n  x\n # c\nd: # c\n  e # c\n",
	"# c\nk: v\n\nk2: v\n  # c\nb: |\n  x\n   # not a comment\n\n# c\nc: d\n",
	// Anchors and aliases as PyYAML's emitter writes an object it meets
	// twice: each alias is a copy.
	"a: &x 1\nb: *x\n", "h: &id001\n- [Host, [x]]\nr:\n  headers: *id001\n  more: [*id001, *id001]\n",
	"- &id001\n  k: v\n  l: [1, 2]\n- *id001\n- &id002 [a, {b: c}]\n- {x: *id002}\n", "a: &e\nb: *e\nc: &s 'q'\nd: *s # c\n",
	// The safe loader's scalar tags.
	"a: !!str 1\nb: !!int '0x1F'\nc: !!float 1\nd: !!bool yes\ne: !!null x\nf: !!timestamp 2014-01-02\ng: [!!str 2, !!int \"3\"]\nh: !!str |\n  x\n",
}

var fastLeft = []string{
	"a: b: c\n", "a:\tb\n", "a: *x\n", "a: &x [*x]\n", "a: &x 1\nb: &x 2\n", "- &x k: v\n", "&x\nk: v\n",
	"a: [&x 1, *x]\n", "a: &x 1\n*x : 2\n", "a: &x 1\nb: *x: 2\n", "a: &x! 1\n", "a: &x 1\nb: *x,\n", "a: &x 1\n<<: *x\n", "a: &e\nb: &f *e\n", "a: &e &f 1\n", "a: !!int x\n", "a: !!map {}\n", "a: !!python/none x\n", "a: &e\nb: &f\n  # c\n\n *e\n", "a: >\n  folded\n", "? a\n: b\n", "a: [b, ]\n",
	"a: 'x\ny'\n", "a:\n  b: 1\n c: 2\n", "- a\nb: 1\n", "a: \"\\/\"\n", "[a, b]: c\n",
	"a: [x: y]\n", "a: {x}\n", "a: -\n", "a: - b\n", "<<: {a: 1}\n", "a: =\n", "a: x\n\n  y\n", "a: [x,\n\n  y]\n", "a: [x,\n  # c\n  y]\n",
}

func doc(body string) []byte { return []byte("---\n" + body + "...\n") }

// The fast path loads what it takes as the faithful loader does, and
// takes the documents of the legacy reports: those of the golden data,
// of the differential harness's reports and of the cases above.
func TestFastLoad(t *testing.T) {
	for _, c := range fastTaken {
		if !checkFast(t, doc(c)) {
			t.Errorf("%q: the fast path leaves it", c)
		}
	}
	for _, c := range fastLeft {
		if checkFast(t, doc(c)) {
			t.Errorf("%q: the fast path takes it", c)
		}
	}
	raws, _ := filepath.Glob("testdata/raw/*/*.yaml")
	reports, err := uidfuzz.Generate(1, 400, []string{uidfuzz.YAMLBasic, uidfuzz.YAMLBinary, uidfuzz.YAMLRefused})
	if err != nil {
		t.Fatal(err)
	}
	var datas [][]byte
	for _, r := range raws {
		b, err := os.ReadFile(r)
		if err != nil {
			t.Fatal(err)
		}
		datas = append(datas, b)
	}
	for _, r := range reports {
		datas = append(datas, r.Raw)
	}
	emitted, fast := 0, 0
	for _, data := range datas {
		for _, d := range yamlDocs(data) {
			emitted++
			if checkFast(t, d) {
				fast++
			}
		}
	}
	if emitted == 0 || fast < emitted*9/10 {
		t.Errorf("the fast path takes %d of the reports' %d documents, want at least 90%%", fast, emitted)
	}
}

// yamlDocs are a YAML report's documents, "---" line to "..." line.
func yamlDocs(data []byte) [][]byte {
	var out [][]byte
	start := -1
	for i := 0; i < len(data); {
		j := bytes.IndexByte(data[i:], '\n')
		if j < 0 {
			break
		}
		line := data[i : i+j+1]
		switch {
		case bytes.HasPrefix(line, []byte("---")):
			start = i
		case bytes.HasPrefix(line, []byte("...")) && start >= 0:
			out = append(out, data[start:i+j+1])
			start = -1
		}
		i += j + 1
	}
	return out
}

// Whatever the bytes, the fast path either leaves a document to the
// faithful loader or loads it as that loader does.
func FuzzFastLoad(f *testing.F) {
	for _, c := range append(fastTaken, fastLeft...) {
		f.Add(doc(c))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkFast(t, b)
	})
}

// isSchemaKey's switch and schema name the same keys.
func TestSchemaKeys(t *testing.T) {
	for _, k := range schema {
		if !isSchemaKey(k) {
			t.Errorf("%s is in schema, not a schema key", k)
		}
	}
	for _, k := range []string{"", "agent", "requests", "Input", "test_keys "} {
		if isSchemaKey(k) {
			t.Errorf("%q is a schema key", k)
		}
	}
}
