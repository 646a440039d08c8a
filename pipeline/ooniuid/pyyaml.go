package ooniuid

import (
	"bytes"
	"encoding/base64"
	"errors"
	"io"
	"math"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// The values of a YAML document as PyYAML's safe loader makes them
// (YAML 1.1): nil, bool, *big.Int, float64, string, []byte (!!binary),
// pyTime (a timestamp: a datetime or a date), []any and *pyDict. Only
// their kinds matter to OONI's normalisation, and a few of their values
// (strings, numbers).
type pyTime struct{}

// pyDict is a Python dict: keys in insertion order, a key set again
// keeping its place. A small dict is searched in order; a larger one
// keeps an index too.
type pyDict struct {
	keys  []any          // as loaded
	hks   []string       // their hashable forms (dictKey)
	vals  []any          // their values
	index map[string]int // hashable key to position, past smallDict keys
}

const smallDict = 64

func newDict() *pyDict { return &pyDict{} }

// dictKey is the hashable form of a key: a string is itself, other kinds
// are written after a NUL and their kind, so that keys Python holds equal
// have the same form (1 == 1.0 == True) and no others do. A list or a
// dict is unhashable.
func dictKey(k any) (string, bool) {
	switch v := k.(type) {
	case string:
		if strings.HasPrefix(v, "\x00") {
			return "\x00str:" + v, true
		}
		return v, true
	case nil:
		return "\x00none", true
	case pyTime:
		return "\x00time", true
	case bool:
		if v {
			return "\x00int:1", true
		}
		return "\x00int:0", true
	case *big.Int:
		return "\x00int:" + v.String(), true
	case float64:
		switch {
		case math.IsNaN(v):
			// Never equal to another: each NaN is a key of its own.
			return "\x00nan:" + strconv.FormatUint(nans.Add(1), 10), true
		case v == math.Trunc(v) && !math.IsInf(v, 0):
			bf, _ := new(big.Float).SetFloat64(v).Int(nil)
			return dictKey(bf)
		}
		return "\x00float:" + strconv.FormatFloat(v, 'g', -1, 64), true
	case []byte:
		return "\x00bytes:" + string(v), true
	}
	return "", false
}

var nans atomic.Uint64

func (d *pyDict) set(k, v any) bool {
	hk, ok := dictKey(k)
	if ok {
		d.put(k, hk, v)
	}
	return ok
}

// put sets the key k, whose hashable form is hk.
func (d *pyDict) put(k any, hk string, v any) {
	if i := d.find(hk); i >= 0 {
		d.vals[i] = v
		return
	}
	d.add(k, hk, v)
}

// add adds the key k, whose hashable form is hk, known not to be there.
func (d *pyDict) add(k any, hk string, v any) {
	if len(d.keys) == cap(d.keys) {
		d.grow()
	}
	d.keys = append(d.keys, k)
	d.hks = append(d.hks, hk)
	d.vals = append(d.vals, v)
	if d.index != nil {
		d.index[hk] = len(d.hks) - 1
	} else if len(d.hks) > smallDict {
		d.reindex()
	}
}

// grow makes room for more keys, in one allocation for keys and values.
func (d *pyDict) grow() { d.reserve(max(8, cap(d.keys))) }

// reserve makes room for n more keys.
func (d *pyDict) reserve(more int) {
	if len(d.keys)+more <= cap(d.keys) {
		return
	}
	n := len(d.keys) + more
	buf := make([]any, 2*n)
	d.keys = append(buf[0:0:n], d.keys...)
	d.vals = append(buf[n:n:2*n], d.vals...)
	d.hks = append(make([]string, 0, n), d.hks...)
}

// find is the position of the hashable key hk, or -1.
func (d *pyDict) find(hk string) int {
	if d.index != nil {
		if i, ok := d.index[hk]; ok {
			return i
		}
		return -1
	}
	for i, h := range d.hks {
		if h == hk {
			return i
		}
	}
	return -1
}

func (d *pyDict) reindex() {
	d.index = make(map[string]int, len(d.hks))
	for i, h := range d.hks {
		d.index[h] = i
	}
}

// at is the value of the hashable key hk.
func (d *pyDict) at(hk string) (any, bool) {
	if i := d.find(hk); i >= 0 {
		return d.vals[i], true
	}
	return nil, false
}

// get is the value of the string key k, which does not start with a NUL.
func (d *pyDict) get(k string) (any, bool) {
	if i := d.find(k); i >= 0 {
		return d.vals[i], true
	}
	return nil, false
}

// v is the value of the key k, nil where it is not there.
func (d *pyDict) v(k string) any { v, _ := d.get(k); return v }

func (d *pyDict) has(k string) bool { return d.find(k) >= 0 }

func (d *pyDict) del(k string) {
	i := d.find(k)
	if i < 0 {
		return
	}
	d.keys = slices.Delete(d.keys, i, i+1)
	d.hks = slices.Delete(d.hks, i, i+1)
	d.vals = slices.Delete(d.vals, i, i+1)
	if d.index != nil {
		d.reindex()
	}
}

// update is dict.update(o): o's keys win.
func (d *pyDict) update(o *pyDict) {
	for i, k := range o.keys {
		d.put(k, o.hks[i], o.vals[i])
	}
}

// errConstructor is a document PyYAML parses but its safe loader will
// not construct (an unknown tag, an unhashable key): OONI skips the
// entry, and reads on.
var errConstructor = errors.New("constructor error")

// errFatal is a document PyYAML's scanner or composer refuses (an
// undefined alias, a second document, "key: value: other"): the error
// escapes OONI's guards, which catch only the parser's and the
// constructor's, and its reading of the report ends.
var errFatal = errors.New("scanner or composer error")

// classify returns the error PyYAML raises where yaml.v3 (a port of
// libyaml, which PyYAML's scanner and parser follow) fails: errFatal
// for its scanner's problems and an undefined alias, errConstructor for
// its parser's.
func classify(err error) error {
	msg := err.Error()
	if strings.Contains(msg, "unknown anchor") || strings.Contains(msg, "value contains itself") {
		return errFatal
	}
	for _, p := range scannerProblems {
		if strings.HasSuffix(msg, p) {
			return errFatal
		}
	}
	return errConstructor
}

// strayTab reports whether a document holds a tab outside a quoted
// scalar, a block scalar and a comment: PyYAML's own scanner (safe_load's;
// libyaml's takes some) skips only spaces between tokens and ends a plain
// scalar at a tab, and finds there a character that cannot start any
// token.
func strayTab(doc []byte) bool {
	if bytes.IndexByte(doc, '\t') < 0 {
		return false
	}
	var quote byte    // the quote of a quoted scalar open across lines
	blockIndent := -1 // the indentation a block scalar's lines exceed
	for line := range bytes.Lines(doc) {
		line = bytes.TrimRight(line, "\r\n")
		indent := len(line) - len(bytes.TrimLeft(line, " "))
		if blockIndent >= 0 {
			if len(bytes.TrimLeft(line, " \t")) == 0 || indent > blockIndent {
				continue
			}
			blockIndent = -1
		}
	scan:
		for i := 0; i < len(line); i++ {
			c := line[i]
			switch {
			case quote == '\'':
				if c == '\'' {
					if i+1 < len(line) && line[i+1] == '\'' {
						i++
					} else {
						quote = 0
					}
				}
				continue
			case quote == '"':
				if c == '\\' {
					i++
				} else if c == '"' {
					quote = 0
				}
				continue
			}
			tokenStart := i == 0 || strings.IndexByte(" [{,", line[i-1]) >= 0
			switch c {
			case '\t':
				return true
			case '#':
				if i == 0 || line[i-1] == ' ' {
					break scan
				}
			case '\'', '"':
				if tokenStart {
					quote = c
				}
			case '|', '>':
				if tokenStart && blockHeader.Match(line[i:]) {
					blockIndent = indent
					break scan
				}
			}
		}
	}
	return false
}

// blockHeader is a block scalar's indicator and what may follow it on its
// line.
var blockHeader = regexp.MustCompile(`^[|>][0-9+-]*[ \t]*(?:#.*)?$`)

// scannerProblems are the problems yaml.v3's scanner reports.
var scannerProblems = []string{
	"block sequence entries are not allowed in this context", "could not find expected ':'", "could not find expected directive name",
	"did not find URI escaped octet", "did not find expected '!'", "did not find expected alphabetic or numeric character",
	"did not find expected comment or line break", "did not find expected digit or '.' character", "did not find expected hexdecimal number",
	"did not find expected tag URI", "did not find expected version number", "did not find expected whitespace or line break",
	"did not find expected whitespace", "did not find the expected '>'", "found a tab character that violates indentation",
	"found a tab character where an indentation space is expected", "found an indentation indicator equal to 0",
	"found character that cannot start any token", "found extremely long version number", "found invalid Unicode character escape code",
	"found unexpected document indicator", "found unexpected end of stream", "found unexpected non-alphabetical character",
	"found unknown directive name", "found unknown escape character", "mapping keys are not allowed in this context",
	"mapping values are not allowed in this context",
}

// errReader is a document PyYAML's reader refuses (not UTF-8, or a
// character it does not print): the error escapes OONI's guards, and its
// reading of the report ends.
var errReader = errors.New("reader error")

// printable is PyYAML's reader's test of a character.
func printable(r rune) bool {
	return r == 0x09 || r == 0x0a || r == 0x0d || r >= 0x20 && r <= 0x7e || r == 0x85 ||
		r >= 0xa0 && r <= 0xd7ff || r >= 0xe000 && r <= 0xfffd || r >= 0x10000 && r <= 0x10ffff
}

// Falsy reports whether a YAML document (with its markers) loads, as
// PyYAML's full loader (yaml.CLoader, which the autoclaving step counted
// measurements with) loads it, to a value Python holds false: null, false,
// a zero, an empty string, bytes or collection, the Python tags' too
// (!!python/int 0, !!python/complex 0j, !!python/tuple [], ...). A
// document that does not load is not falsy: it is counted.
func Falsy(doc []byte) bool {
	v, err := load(doc, true)
	return err == nil && !truthy(v)
}

// pyLoad loads a YAML document as yaml.safe_load does. A document that
// does not parse is errConstructor's kind too: the entry is skipped.
func pyLoad(doc []byte) (any, error) { return pyLoadIn(doc, 0, nil) }

// pyLoadIn is pyLoad, with room for that many more keys in a top-level
// mapping, which a merge will add, and the collections made in a (not
// nil: the values are dead when it is reset), where the fast path loads
// the document.
func pyLoadIn(doc []byte, room int, a *arena) (any, error) {
	if fastPath {
		if v, ok := fastLoad(doc, room, a); ok {
			return v, nil
		}
	}
	return load(doc, false)
}

// fastPath is off only where a benchmark measures the faithful loader.
var fastPath = true

// load loads a YAML document as yaml.safe_load does, or with full as
// yaml.CLoader does: with the constructors of the python/ tags that make
// plain values.
func load(doc []byte, full bool) (any, error) {
	for i := 0; i < len(doc); {
		r, n := utf8.DecodeRune(doc[i:])
		if r == utf8.RuneError && n <= 1 || !printable(r) {
			return nil, errReader
		}
		i += n
	}
	if !full && strayTab(doc) {
		return nil, errFatal
	}
	var n yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(doc))
	if err := dec.Decode(&n); err != nil && !errors.Is(err, io.EOF) {
		return nil, classify(err)
	}
	// safe_load takes a single document: another is a ComposerError.
	var next yaml.Node
	if err := dec.Decode(&next); !errors.Is(err, io.EOF) {
		return nil, errFatal
	}
	if n.Kind == 0 || len(n.Content) == 0 {
		return nil, nil
	}
	if anchoredTwice(&n, map[string]bool{}) {
		return nil, errFatal // PyYAML's composer refuses an anchor named again
	}
	l := loader{budget: maxNodes, full: full, done: map[*yaml.Node]any{}, sizes: map[*yaml.Node][2]int{}}
	return l.value(n.Content[0], 0)
}

// Bounds of a document's values. An alias is the value of its anchor's
// node, the same object, as PyYAML's constructor makes it (OONI's
// normalisation changes some values in place, which every alias sees);
// an alias to its own ancestor, which PyYAML makes a value that holds
// itself, is refused. What aliases stand for is bounded all the same,
// as if they were expanded (aliases of aliases, a billion laughs, make
// the walks of the normalisation long): maxNodes bounds the nodes
// counted again through aliases only, so a document of many of its own
// (a list of a million scalars, which PyYAML loads) keeps its uid.
var maxNodes = 1 << 20

const maxNest = 1000

// loader converts a document's nodes within the bounds.
type loader struct {
	budget int                   // of nodes counted through aliases
	full   bool                  // the full loader's python/ tags too
	done   map[*yaml.Node]any    // the values of the anchored nodes converted
	sizes  map[*yaml.Node][2]int // an anchored node's nodes and height, aliases expanded
}

var (
	reBool      = regexp.MustCompile(`^(?:yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF)$`)
	reFloat     = regexp.MustCompile(`^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9_]+(?:[eE][-+][0-9]+)?|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$`)
	reInt       = regexp.MustCompile(`^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)$`)
	reNull      = regexp.MustCompile(`^(?:~|null|Null|NULL|)$`)
	reTimestamp = regexp.MustCompile(`^(?:[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]|[0-9][0-9][0-9][0-9]-[0-9][0-9]?-[0-9][0-9]?(?:[Tt]|[ \t]+)[0-9][0-9]?:[0-9][0-9]:[0-9][0-9](?:\.[0-9]*)?(?:[ \t]*(?:Z|[-+][0-9][0-9]?(?::[0-9][0-9])?))?)$`)
)

// resolve is PyYAML's implicit tag of a plain scalar, by its first
// character's resolvers in their order.
func resolve(v string) string {
	first := byte(0)
	if v != "" {
		first = v[0]
	}
	has := func(set string) bool { return v == "" && set == "" || v != "" && strings.IndexByte(set, first) >= 0 }
	switch {
	case has("yYnNtTfFoO") && reBool.MatchString(v):
		return "!!bool"
	case has("-+0123456789.") && reFloat.MatchString(v):
		return "!!float"
	case has("-+0123456789") && reInt.MatchString(v):
		return "!!int"
	case has("<") && v == "<<":
		return "!!merge"
	case (v == "" || has("~nN")) && reNull.MatchString(v):
		return "!!null"
	case has("0123456789") && reTimestamp.MatchString(v):
		return "!!timestamp"
	case has("=") && v == "=":
		return "!!value"
	}
	return "!!str"
}

// anchoredTwice tells whether an anchor of n's is named twice in it.
func anchoredTwice(n *yaml.Node, seen map[string]bool) bool {
	if n.Anchor != "" {
		if seen[n.Anchor] {
			return true
		}
		seen[n.Anchor] = true
	}
	for _, c := range n.Content {
		if anchoredTwice(c, seen) {
			return true
		}
	}
	return false
}

// value is the value of n, at depth; an alias's is its anchor's.
func (l *loader) value(n *yaml.Node, depth int) (any, error) {
	if depth > maxNest {
		return nil, errConstructor
	}
	if n.Kind == yaml.AliasNode {
		v, ok := l.done[n.Alias]
		if !ok {
			return nil, errConstructor // its own ancestor
		}
		size := l.size(n.Alias)
		if l.budget -= size[0]; l.budget < 0 || depth+1+size[1] > maxNest {
			return nil, errConstructor
		}
		return v, nil
	}
	v, err := l.convert(n, depth)
	if err == nil && n.Anchor != "" {
		l.done[n] = v
	}
	return v, err
}

// size is how many nodes n stands for, and its height, its aliases
// expanded.
func (l *loader) size(n *yaml.Node) [2]int {
	if n.Kind == yaml.AliasNode {
		s := l.size(n.Alias)
		return [2]int{1 + s[0], 1 + s[1]}
	}
	if s, ok := l.sizes[n]; ok {
		return s
	}
	s := [2]int{1, 0}
	for _, c := range n.Content {
		cs := l.size(c)
		s[0] += cs[0]
		s[1] = max(s[1], 1+cs[1])
	}
	if n.Anchor != "" {
		l.sizes[n] = s
	}
	return s
}

// convert is the value of n, not an alias.
func (l *loader) convert(n *yaml.Node, depth int) (any, error) {
	switch n.Kind {
	case yaml.SequenceNode:
		if n.Style&yaml.TaggedStyle != 0 && n.Tag != "!!seq" && n.Tag != "!!omap" && n.Tag != "!!pairs" &&
			!(l.full && (n.Tag == "!!python/list" || n.Tag == "!!python/tuple")) {
			if v, ok := l.applied(n); ok {
				return v, nil
			}
			return nil, errConstructor // no safe constructor
		}
		out := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			v, err := l.value(c, depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case yaml.MappingNode:
		if n.Style&yaml.TaggedStyle != 0 && n.Tag == "!!set" {
			// A set: its keys, iterated as a list is.
			var out []any
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, err := l.value(n.Content[i], depth+1)
				if err != nil {
					return nil, err
				}
				if _, ok := dictKey(k); !ok {
					return nil, errConstructor
				}
				out = append(out, k)
			}
			return out, nil
		}
		if n.Style&yaml.TaggedStyle != 0 && n.Tag != "!!map" && !(l.full && n.Tag == "!!python/dict") {
			return nil, errConstructor
		}
		d := newDict()
		for i := 0; i+1 < len(n.Content); i += 2 {
			kn, vn := n.Content[i], n.Content[i+1]
			if kn.Kind == yaml.ScalarNode && kn.Value == "<<" && kn.Style&(yaml.SingleQuotedStyle|yaml.DoubleQuotedStyle) == 0 {
				if err := l.merge(d, vn, depth+1); err != nil {
					return nil, err
				}
				continue
			}
			k, err := l.value(kn, depth+1)
			if err != nil {
				return nil, err
			}
			v, err := l.value(vn, depth+1)
			if err != nil {
				return nil, err
			}
			if !d.set(k, v) {
				return nil, errConstructor // found unhashable key
			}
		}
		return d, nil
	case yaml.ScalarNode:
		if l.full && n.Style&yaml.TaggedStyle != 0 && strings.HasPrefix(n.Tag, "!!python/") {
			return fullScalar(n)
		}
		return pyScalar(n)
	}
	return nil, errConstructor
}

// applied is the value of a sequence the full loader applies a builtin
// to without arguments (!!python/object/apply:builtins.int []): the
// builtin's empty value, for the builtins that make plain values.
func (l *loader) applied(n *yaml.Node) (any, bool) {
	if !l.full || len(n.Content) > 0 {
		return nil, false
	}
	for _, p := range []string{"!!python/object/apply:", "!!python/object/new:"} {
		if b, ok := strings.CutPrefix(n.Tag, p); ok {
			switch b {
			case "builtins.int", "builtins.float", "builtins.complex", "builtins.bool":
				return false, true
			case "builtins.str", "builtins.bytes", "builtins.list", "builtins.tuple", "builtins.dict", "builtins.set", "builtins.frozenset":
				return []any{}, true
			}
		}
	}
	return nil, false
}

// fullScalar constructs a scalar of a python/ tag as the full loader
// does; a tag it does not make a plain value of is truthy (a module, a
// class, an object), or an error.
func fullScalar(n *yaml.Node) (any, error) {
	v := n.Value
	switch n.Tag {
	case "!!python/none":
		return nil, nil
	case "!!python/bool":
		switch strings.ToLower(v) {
		case "yes", "true", "on":
			return true, nil
		case "no", "false", "off":
			return false, nil
		}
		return nil, errConstructor // a KeyError
	case "!!python/int", "!!python/long":
		return pyInt(v)
	case "!!python/float":
		return pyFloat(v)
	case "!!python/complex":
		return pyComplex(v)
	case "!!python/str", "!!python/unicode":
		return v, nil
	case "!!python/bytes":
		return pyScalar(&yaml.Node{Kind: yaml.ScalarNode, Style: yaml.TaggedStyle, Tag: "!!binary", Value: v})
	case "!!python/name:builtins.None":
		return nil, nil
	case "!!python/name:builtins.False":
		return false, nil
	}
	if strings.HasPrefix(n.Tag, "!!python/name:") || strings.HasPrefix(n.Tag, "!!python/module:") {
		return true, nil
	}
	return nil, errConstructor
}

// pyComplex is Python's complex(s), as a truth value: false for a zero.
func pyComplex(s string) (any, error) {
	s = strings.ToLower(strings.ReplaceAll(strings.TrimSpace(s), "_", ""))
	if inner, ok := strings.CutPrefix(s, "("); ok {
		if inner, ok = strings.CutSuffix(inner, ")"); !ok {
			return nil, errConstructor
		}
		s = strings.TrimSpace(inner)
	}
	num := func(p string) (float64, bool) {
		switch p {
		case "", "+":
			return 1, true
		case "-":
			return -1, true
		}
		x, err := strconv.ParseFloat(p, 64)
		return x, err == nil || errors.Is(err, strconv.ErrRange)
	}
	var re, im float64
	ok := true
	if body, isImag := strings.CutSuffix(s, "j"); isImag {
		// The imaginary part starts at the last sign not after an 'e'.
		k := 0
		for i := len(body) - 1; i > 0; i-- {
			if (body[i] == '+' || body[i] == '-') && body[i-1] != 'e' {
				k = i
				break
			}
		}
		if k > 0 {
			if re, ok = num(body[:k]); !ok || body[:k] == "+" || body[:k] == "-" {
				return nil, errConstructor
			}
		}
		im, ok = num(body[k:])
	} else {
		if s == "" {
			return nil, errConstructor
		}
		re, ok = num(s)
	}
	if !ok {
		return nil, errConstructor
	}
	return re != 0 || im != 0, nil
}

// merge adds a merge key's mappings: keys the mapping has win.
func (l *loader) merge(d *pyDict, vn *yaml.Node, depth int) error {
	v, err := l.value(vn, depth)
	if err != nil {
		return err
	}
	var ms []*pyDict
	switch x := v.(type) {
	case *pyDict:
		ms = []*pyDict{x}
	case []any:
		for _, e := range x {
			m, ok := e.(*pyDict)
			if !ok {
				return errConstructor
			}
			ms = append(ms, m)
		}
	default:
		return errConstructor
	}
	for _, m := range ms {
		for i, k := range m.keys {
			if d.find(m.hks[i]) < 0 {
				d.put(k, m.hks[i], m.vals[i])
			}
		}
	}
	return nil
}

func pyScalar(n *yaml.Node) (any, error) {
	tag := "!!str"
	switch {
	case n.Style&yaml.TaggedStyle != 0:
		tag = n.Tag
	case n.Style&(yaml.SingleQuotedStyle|yaml.DoubleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) == 0:
		tag = resolve(n.Value)
	}
	return scalarValue(tag, n.Value)
}

// scalarValue is the value safe_load constructs of a scalar v of tag.
func scalarValue(tag, v string) (any, error) {
	switch tag {
	case "!!str":
		return v, nil
	case "!!null":
		return nil, nil
	case "!!bool":
		switch strings.ToLower(v) {
		case "yes", "true", "on":
			return true, nil
		}
		return false, nil
	case "!!int":
		return pyInt(v)
	case "!!float":
		return pyFloat(v)
	case "!!timestamp":
		return pyTime{}, nil
	case "!!binary":
		b, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(v), ""))
		if err != nil {
			return nil, errConstructor
		}
		return b, nil
	}
	return nil, errConstructor // !!value, and tags the safe loader has no constructor for
}

func pyInt(s string) (any, error) {
	s = strings.ReplaceAll(s, "_", "")
	sign := int64(1)
	if s != "" && (s[0] == '-' || s[0] == '+') {
		if s[0] == '-' {
			sign = -1
		}
		s = s[1:]
	}
	v := new(big.Int)
	var ok bool
	switch {
	case s == "0":
		ok = true
	case strings.HasPrefix(s, "0b"):
		_, ok = v.SetString(s[2:], 2)
	case strings.HasPrefix(s, "0x"):
		_, ok = v.SetString(s[2:], 16)
	case strings.HasPrefix(s, "0o"): // int(s, 8) takes the prefix
		_, ok = v.SetString(s[2:], 8)
	case strings.HasPrefix(s, "0"):
		_, ok = v.SetString(s[1:], 8)
	case strings.Contains(s, ":"):
		ok = true
		for _, d := range strings.Split(s, ":") {
			x, err := strconv.ParseInt(d, 10, 64)
			if err != nil {
				return nil, errConstructor
			}
			v.Mul(v, big.NewInt(60))
			v.Add(v, big.NewInt(x))
		}
	default:
		_, ok = v.SetString(s, 10)
	}
	if !ok {
		return nil, errConstructor
	}
	if v.Mul(v, big.NewInt(sign)); v.IsInt64() && v.Int64() >= 0 && v.Int64() < int64(len(smallInts)) {
		return smallInts[v.Int64()], nil
	}
	return v, nil
}

// smallInts are the ints most values are, shared: nothing changes an int
// once loaded.
var smallInts = func() (s [256]*big.Int) {
	for i := range s {
		s[i] = big.NewInt(int64(i))
	}
	return s
}()

func pyFloat(s string) (any, error) {
	s = strings.ToLower(strings.ReplaceAll(s, "_", ""))
	sign := 1.0
	if s != "" && (s[0] == '-' || s[0] == '+') {
		if s[0] == '-' {
			sign = -1
		}
		s = s[1:]
	}
	switch {
	case s == ".inf":
		return sign * math.Inf(1), nil
	case s == ".nan":
		return math.NaN(), nil
	case strings.Contains(s, ":"):
		parts := strings.Split(s, ":")
		v := 0.0
		for _, p := range parts {
			x, err := strconv.ParseFloat(p, 64)
			if err != nil {
				return nil, errConstructor
			}
			v = v*60 + x
		}
		return sign * v, nil
	}
	x, err := strconv.ParseFloat(s, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return nil, errConstructor
	}
	return sign * x, nil
}

// truthy is Python's bool(v).
func truthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case *big.Int:
		return x.Sign() != 0
	case float64:
		return x != 0
	case string:
		return x != ""
	case []byte:
		return len(x) > 0
	case []any:
		return len(x) > 0
	case *pyDict:
		return len(x.keys) > 0
	}
	return true // a timestamp
}
