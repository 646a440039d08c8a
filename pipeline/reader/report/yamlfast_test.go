package report

import (
	"github.com/backfill-dev/backfill/pipeline/ooniuid"

	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"gopkg.in/yaml.v3"
)

// loadsAsMapping is the oracle: yaml.v3 parses doc as one non-empty
// mapping.
func loadsAsMapping(doc []byte) bool {
	var n yaml.Node
	if yaml.Unmarshal(doc, &n) != nil || len(n.Content) != 1 {
		return false
	}
	return n.Content[0].Kind == yaml.MappingNode && len(n.Content[0].Content) > 0
}

// The header documents of the real YAML samples take the fast path, and
// load as mappings.
func TestSimpleMapping_RealHeaders(t *testing.T) {
	files, _ := filepath.Glob("../../../testdata/ooni/yaml/*.yaml")
	if len(files) == 0 {
		t.Fatal("no YAML samples")
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		i := bytes.Index(raw, []byte("\n...\n"))
		head := raw[:i+5]
		if !simpleMapping(head) {
			t.Errorf("%s: the header does not take the fast path", filepath.Base(f))
		}
		if !loadsAsMapping(head) {
			t.Errorf("%s: the header does not load as a mapping", filepath.Base(f))
		}
	}
}

var simpleCases = []struct {
	doc    string
	simple bool
}{
	{"---\na: 1\n...\n", true},
	{"---\nprobe_asn: AS1\nstart_time: 1441320103.0\ntest_helpers: {backend: 37.218.247.110}\noptions: [-f, x.txt]\n...\n", true},
	{"---\nt: '2018-07-26 23:37:23'\nu: \"x y\"\nv: http://a.b/c?d\nw: []\nx: {}\n...\n", false}, // '?' is not a plain byte here
	{"---\nt: '2018-07-26 23:37:23'\nu: \"x y\"\nv: http://a.b/c\nw: []\nx: {}\ny: a b c\n...\n", true},
	{"---\n...\n", false},                          // empty: null
	{"---\na: b: c\n...\n", false},                 // does not parse
	{"---\na: x #c\n...\n", false},                 // a comment
	{"---\na: @x\n...\n", false},                   // does not parse
	{"---\na: [- f]\n...\n", false},                // does not parse
	{"---\na:\n  b: 1\n...\n", false},              // nested
	{"---\na: 1\n", false},                         // no end marker
	{"a: 1\n...\n", false},                         // no start marker
	{"---\na: x \n...\n", false},                   // trailing space
	{"---\na: 'it''s'\n...\n", false},              // an escaped quote
	{"---\na: \"\\x41\"\n...\n", false},            // an escape
	{"---\na: [x, 'y, z']\n...\n", false},          // a comma in a quoted item
	{"---\na: {b: c:d}\n...\n", false},             // ':' in a flow scalar
	{"---\na: x:\n...\n", false},                   // ':' last
	{"---\n- a\n...\n", false},                     // a sequence
	{"---\na: \xc3\xa9\n...\n", false},             // non-ASCII
	{"---\na: -\n...\n", false},                    // a bare '-'
	{"---\na: -1\n...\n", true},                    // a negative number
	{"---\na: .inf\nb: x~y\nc: null\n...\n", true}, // special scalars
}

func TestSimpleMapping_Cases(t *testing.T) {
	for _, c := range simpleCases {
		got := simpleMapping([]byte(c.doc))
		if got != c.simple {
			t.Errorf("simpleMapping(%q) = %v, want %v", c.doc, got, c.simple)
		}
		if got && !loadsAsMapping([]byte(c.doc)) {
			t.Errorf("simpleMapping(%q) accepts what yaml.v3 does not load as a mapping", c.doc)
		}
	}
}

// Random documents of "key: value" lines over an alphabet of YAML's
// indicators: whatever the fast path accepts, yaml.v3 loads as a mapping,
// and the fast path accepts a good share of them. 20,000 here; make fuzz
// runs FuzzSimpleMapping, which holds any input to the same rule.
func TestSimpleMapping_Random(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const alphabet = "ab09_./-+=@()~: #'\"[]{},!&*|>%?`\\\t\n"
	accepted := 0
	for range 20_000 {
		var b bytes.Buffer
		b.WriteString("---\n")
		for range 1 + rng.IntN(3) {
			b.WriteString("k")
			b.WriteByte("abc"[rng.IntN(3)])
			b.WriteString(": ")
			for range 1 + rng.IntN(6) {
				if rng.IntN(40) == 0 {
					b.WriteString([]string{"!!binary |\n  ", "\n  ", " |\n"}[rng.IntN(3)])
				} else if rng.IntN(3) == 0 {
					b.WriteByte(alphabet[rng.IntN(len(alphabet))])
				} else {
					b.WriteByte("ab1."[rng.IntN(4)])
				}
			}
			b.WriteByte('\n')
		}
		b.WriteString("...\n")
		if simpleMapping(b.Bytes()) {
			accepted++
			if !loadsAsMapping(b.Bytes()) {
				t.Fatalf("simpleMapping accepts %q, which yaml.v3 does not load as a mapping", b.Bytes())
			}
		}
	}
	if accepted < 1_000 {
		t.Errorf("only %d of 20000 documents took the fast path", accepted)
	}
}

func FuzzSimpleMapping(f *testing.F) {
	for _, c := range simpleCases {
		f.Add([]byte(c.doc))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		if simpleMapping(doc) && !loadsAsMapping(doc) {
			t.Fatalf("simpleMapping accepts %q, which yaml.v3 does not load as a mapping", doc)
		}
	})
}

// Each document falsy takes without a parse loads as false, and so does
// nothing that looks like one but is not.
func TestFalsy_Plain(t *testing.T) {
	for _, body := range plainFalsy {
		doc := append(append(append([]byte{}, docStart...), body...), docEnd...)
		if !falsy(doc) || !ooniuid.Falsy(doc) {
			t.Errorf("%q: falsy %v, by a full parse %v; want both true", doc, falsy(doc), ooniuid.Falsy(doc))
		}
	}
	for _, doc := range []string{"---\nnull \n...\n", "---\n'0'\n...\n", "---\n1\n...\n", "---\n[0]\n...\n", "---\nnull\n"} {
		if falsy([]byte(doc)) != ooniuid.Falsy([]byte(doc)) {
			t.Errorf("%q: falsy %v, by a full parse %v", doc, falsy([]byte(doc)), ooniuid.Falsy([]byte(doc)))
		}
	}
}

// A document blockCollection passes without a parse never loads as
// false.
func FuzzBlockCollection(f *testing.F) {
	for _, s := range []string{"---\na: 1\n...\n", "---\n- x\n...\n", "---\n-\n...\n", "---\n# c\nkey:\n...\n", "---\na:b\n...\n",
		"---\n  0\n...\n", "---\n!!python/int 0\n...\n", "---\nkey: !!binary \"\"\n...\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		if blockCollection(doc) && ooniuid.Falsy(doc) {
			t.Fatalf("blockCollection passes %q, which loads as false", doc)
		}
	})
}
