package ooniuid

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/big"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// The fast path loads a document of the YAML that OONI's probes wrote
// (PyYAML's emitter: block mappings and sequences indented with spaces,
// plain, quoted and literal scalars, flow collections, !!binary and
// !!set) straight into the values safe_load makes, without yaml.v3's
// node tree: one pass, and a few times the document's size in memory.
// Where a document leaves that subset (a tab, a comment, an anchor, an
// alias, another tag, a folded scalar, a blank line, a complex key, an
// error of any kind), it gives up, and the faithful loader loads the
// document. What the fast path loads, it loads as the faithful loader
// does: FuzzFastLoad holds the one to the other.

// errSlow is a document outside the fast path's subset.
var errSlow = errors.New("outside the fast path's subset")

// maxFastNest bounds the fast path's nesting; a deeper document takes
// the faithful loader's bound.
const maxFastNest = 200

// fastLoad loads doc ("---\n" ... "\n...\n") as pyLoad does; false where
// the document leaves the fast path's subset, and pyLoad must load it.
func fastLoad(doc []byte, room int, a *arena) (any, bool) {
	if len(doc) < 8 || string(doc[:4]) != "---\n" || string(doc[len(doc)-5:]) != "\n...\n" {
		return nil, false
	}
	body := doc[4 : len(doc)-4]
	if !fastBytes(body) {
		return nil, false
	}
	if len(body) == 0 {
		return nil, true
	}
	p := parsers.Get().(*fastParser)
	defer p.release()
	*p = fastParser{b: body, room: room, arena: a, scratch: p.scratch[:0], items: p.items[:0], ents: p.ents[:0]}
	if ind, err := p.lineContent(); err != nil || ind < 0 {
		return nil, err == nil // blank lines and comments alone: null
	}
	v, err := p.node(-1)
	if err != nil || p.pos < len(p.b) {
		return nil, false
	}
	return v, true
}

// parsers keep their stacks from one document to the next.
var parsers = sync.Pool{New: func() any { return new(fastParser) }}

// release hands p back, with its stacks unless a large document grew them.
func (p *fastParser) release() {
	clear(p.items[:cap(p.items)])
	clear(p.ents[:cap(p.ents)])
	if cap(p.items) > 1<<12 || cap(p.ents) > 1<<12 || cap(p.scratch) > 1<<16 {
		*p = fastParser{}
	}
	p.b = nil
	parsers.Put(p)
}

// fastBytes tells whether body holds only characters the fast path
// takes: PyYAML's reader's printable ones, but for tabs, carriage
// returns, the other line breaks (U+0085, U+2028, U+2029) and byte order
// marks; and no line that starts as a document marker does.
func fastBytes(body []byte) bool {
	lineStart := true
	for i := 0; i < len(body); {
		if !lineStart && i+8 <= len(body) {
			// Eight printable ASCII bytes at once.
			w := binary.LittleEndian.Uint64(body[i:])
			if w&highs == 0 && (w-ones*0x20)&^w&highs == 0 && (w+ones)&highs == 0 {
				i += 8
				continue
			}
		}
		c := body[i]
		if lineStart && (c == '-' || c == '.') && i+2 < len(body) && body[i+1] == c && body[i+2] == c {
			return false
		}
		lineStart = c == '\n'
		if c < utf8.RuneSelf {
			if c < 0x20 && c != '\n' || c == 0x7f {
				return false
			}
			i++
			continue
		}
		r, n := utf8.DecodeRune(body[i:])
		if r == utf8.RuneError && n <= 1 || !printable(r) || r == 0x85 || r == 0x2028 || r == 0x2029 || r == 0xfeff {
			return false
		}
		i += n
	}
	return true
}

// fastParser reads a document's content, whose every line ends in '\n'.
// Between nodes, pos is at the first character of a line's content (or
// at the end), and ls at the start of that line.
type fastParser struct {
	b       []byte
	pos, ls int
	depth   int
	room    int    // more keys a top-level mapping is made with room for
	arena   *arena // where collections are made, when not nil
	// The values of the document's anchors read so far, with twice the
	// nodes and the height each stands for, and the nodes its aliases
	// stand for, against maxNodes.
	anchors map[string]anchored
	aliased int
	sizes   map[any][2]int // sizeOf's, by collection
	scratch []byte
	// The entries of the collections being read, above those of the
	// collections that hold them: a collection is copied out at its size
	// when it ends.
	items []any
	ents  []fastEnt
}

type fastEnt struct {
	k, v any
	hk   string
}

// list ends the sequence whose items start at mark.
func (p *fastParser) list(mark int) []any {
	n := len(p.items) - mark
	out := p.arena.anySlice(n, n)
	copy(out, p.items[mark:])
	clear(p.items[mark:])
	p.items = p.items[:mark]
	return out
}

// entry sets the key k of the mapping whose entries start at mark, whose
// index (once it has more than smallDict keys) is idx.
func (p *fastParser) entry(mark int, idx *map[string]int, k, v any) bool {
	hk, ok := dictKey(k)
	if !ok {
		return false
	}
	if *idx != nil {
		if i, there := (*idx)[hk]; there {
			p.ents[mark+i].v = v
			return true
		}
	} else {
		for i := mark; i < len(p.ents); i++ {
			if p.ents[i].hk == hk {
				p.ents[i].v = v
				return true
			}
		}
	}
	p.ents = append(p.ents, fastEnt{k: k, v: v, hk: hk})
	n := len(p.ents) - mark
	switch {
	case *idx != nil:
		(*idx)[hk] = n - 1
	case n > smallDict:
		*idx = make(map[string]int, 2*n)
		for i, e := range p.ents[mark:] {
			(*idx)[e.hk] = i
		}
	}
	return true
}

// dict ends the mapping whose entries start at mark.
func (p *fastParser) dict(mark int) *pyDict {
	n := len(p.ents) - mark
	c := n
	if mark == 0 {
		c += p.room // the top-level mapping, or the first of a top-level sequence
	}
	buf := p.arena.anySlice(2*c, 2*c)
	d := p.arena.dict()
	d.keys, d.vals, d.hks = buf[:n:c], buf[c:c+n:2*c], p.arena.strSlice(n, c)
	for i, e := range p.ents[mark:] {
		d.keys[i], d.hks[i], d.vals[i] = e.k, e.hk, e.v
	}
	clear(p.ents[mark:])
	p.ents = p.ents[:mark]
	if n > smallDict {
		d.reindex()
	}
	return d
}

func (p *fastParser) col() int       { return p.pos - p.ls }
func (p *fastParser) atEnd() bool    { return p.pos >= len(p.b) }
func (p *fastParser) sep(i int) bool { return p.b[i] == ' ' || p.b[i] == '\n' }

// lineContent moves pos from the start of a line past its indentation,
// and past the blank lines and comments from there on (ls at the start of
// the line it stops on); it returns the indentation, or -1 at the end.
func (p *fastParser) lineContent() (int, error) {
	for {
		p.ls = p.pos
		for p.pos < len(p.b) && p.b[p.pos] == ' ' {
			p.pos++
		}
		switch {
		case p.pos == len(p.b):
			return -1, nil
		case p.b[p.pos] == '#':
			p.pos += bytes.IndexByte(p.b[p.pos:], '\n') + 1
		case p.b[p.pos] == '\n':
			p.pos++
		default:
			return p.pos - p.ls, nil
		}
	}
}

// endLine ends a node that ends its line: only spaces may follow it.
func (p *fastParser) endLine() error {
	if !p.restBlank() {
		return errSlow
	}
	p.pos++
	_, err := p.lineContent()
	return err
}

// restBlank tells whether the rest of pos's line is spaces, and maybe a
// comment after one, and moves pos to its '\n' if so.
func (p *fastParser) restBlank() bool {
	i := p.pos
	for p.b[i] == ' ' {
		i++
	}
	if p.b[i] == '#' && i > 0 && p.b[i-1] == ' ' {
		i += bytes.IndexByte(p.b[i:], '\n')
	}
	if p.b[i] != '\n' {
		return false
	}
	p.pos = i
	return true
}

// indicator tells whether c starts something other than a plain scalar.
func indicator(c byte) bool { return strings.IndexByte("-?:,[]{}#&*!|>'\"%@`", c) >= 0 }

// node reads a block node whose first character is at pos, in a block
// whose entries are at column parent.
func (p *fastParser) node(parent int) (any, error) {
	if p.depth++; p.depth > maxFastNest {
		return nil, errSlow
	}
	defer func() { p.depth-- }()
	col := p.col()
	switch c := p.b[p.pos]; c {
	case '-':
		if p.sep(p.pos + 1) {
			return p.seq(col)
		}
	case '\'', '"':
		ls := p.ls
		s, err := p.quoted(parent)
		if err != nil {
			return nil, err
		}
		if p.b[p.pos] == ':' && p.sep(p.pos+1) {
			if p.ls != ls {
				return nil, errSlow // a key over several lines
			}
			p.pos++
			return p.mapping(col, s)
		}
		return s, p.endLine()
	case '[', '{', '!', '|', '*':
		return p.inline(parent)
	}
	if indicator(p.b[p.pos]) && (p.b[p.pos] != '-' || p.sep(p.pos+1)) {
		return nil, errSlow
	}
	text, isKey, err := p.plainLine(false)
	if err != nil {
		return nil, err
	}
	if isKey {
		k, err := fastKey(text)
		if err != nil {
			return nil, err
		}
		p.pos++
		return p.mapping(col, k)
	}
	return p.plainRest(text, parent)
}

// anchor reads "&name" after pos and its spaces, where there is one, and
// moves past it; "" where there is none. A name is of the characters
// both scanners take, and ends at a space or the line's end; an anchor
// named again is left to the faithful loader (PyYAML's composer refuses
// it).
func (p *fastParser) anchor() (string, error) {
	i := p.pos
	for p.b[i] == ' ' {
		i++
	}
	if p.b[i] != '&' {
		return "", nil
	}
	j := i + 1
	for anchorChar(p.b[j]) {
		j++
	}
	if j == i+1 || !p.sep(j) {
		return "", errSlow
	}
	// The node it anchors, on this line or a later one, may not be an
	// alias or anchored again: those are errors.
	k := j
	for k < len(p.b) {
		for k < len(p.b) && p.b[k] == ' ' {
			k++
		}
		if k < len(p.b) && p.b[k] == '#' {
			k += bytes.IndexByte(p.b[k:], '\n')
		}
		if k >= len(p.b) || p.b[k] != '\n' {
			break
		}
		k++
	}
	if k < len(p.b) && (p.b[k] == '*' || p.b[k] == '&') {
		return "", errSlow
	}
	name := string(p.b[i+1 : j])
	if _, again := p.anchors[name]; again {
		return "", errSlow
	}
	p.pos = j
	return name, nil
}

// flowNext tells whether a flow collection starts after pos's spaces.
func (p *fastParser) flowNext() bool {
	i := p.pos
	for p.b[i] == ' ' {
		i++
	}
	return p.b[i] == '[' || p.b[i] == '{'
}

func anchorChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

type anchored struct {
	v            any
	nodes, depth int
}

// setAnchor records v, the value of the anchor name (none when "").
func (p *fastParser) setAnchor(name string, v any) {
	if name == "" {
		return
	}
	if p.anchors == nil {
		p.anchors = map[string]anchored{}
	}
	nodes, depth := p.sizeOf(v)
	p.anchors[name] = anchored{v, nodes, depth}
}

// sizeOf counts two nodes for each value and key v stands for, more than
// the faithful loader counts, and its height. A collection an alias put
// in more than one place is counted once for each, and walked once.
func (p *fastParser) sizeOf(v any) (nodes, depth int) {
	var id any
	switch x := v.(type) {
	case []any:
		if len(x) == 0 {
			return 2, 0
		}
		id = &x[0]
	case *pyDict:
		id = x
	default:
		return 2, 0
	}
	if s, ok := p.sizes[id]; ok {
		return s[0], s[1]
	}
	nodes = 2
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			n, d := p.sizeOf(e)
			nodes, depth = nodes+n, max(depth, d+1)
		}
	case *pyDict:
		for _, e := range x.vals {
			n, d := p.sizeOf(e)
			nodes, depth = nodes+2+n, max(depth, d+1)
		}
	}
	if p.sizes == nil {
		p.sizes = map[any][2]int{}
	}
	p.sizes[id] = [2]int{nodes, depth}
	return nodes, depth
}

// alias reads "*name" at pos: its anchor's value, the same object, as
// PyYAML's constructor gives it. An alias to an anchor not yet read to
// its end (its own ancestor) is left to the faithful loader, and so is
// one past the bounds of what aliases stand for.
func (p *fastParser) alias(flow bool) (any, error) {
	j := p.pos + 1
	for anchorChar(p.b[j]) {
		j++
	}
	switch c := p.b[j]; {
	case j == p.pos+1:
		return nil, errSlow
	case c == ' ' || c == '\n' || flow && (c == ',' || c == ']' || c == '}'):
	default:
		return nil, errSlow
	}
	a, ok := p.anchors[string(p.b[p.pos+1:j])]
	if !ok {
		return nil, errSlow
	}
	if p.aliased += a.nodes; p.aliased > maxNodes || p.depth+a.depth > maxFastNest {
		return nil, errSlow
	}
	p.pos = j
	return a.v, nil
}

// seq reads a block sequence whose entries are at column col.
func (p *fastParser) seq(col int) (any, error) {
	mark := len(p.items)
	for {
		p.pos++ // the '-'
		var v any
		name, err := p.anchor()
		if err != nil {
			return nil, err
		}
		if name != "" && !p.restBlank() && !p.flowNext() && bytes.IndexByte(p.b[p.pos:p.pos+bytes.IndexByte(p.b[p.pos:], '\n')], ':') >= 0 {
			return nil, errSlow // maybe "- &a key: value", whose anchor is the key's
		}
		if p.restBlank() {
			p.pos++
			ind, err := p.lineContent()
			if err != nil {
				return nil, err
			}
			if ind > col {
				if v, err = p.node(col); err != nil {
					return nil, err
				}
			}
		} else {
			for p.b[p.pos] == ' ' {
				p.pos++
			}
			var err error
			if v, err = p.node(col); err != nil {
				return nil, err
			}
		}
		p.setAnchor(name, v)
		p.items = append(p.items, v)
		if p.atEnd() || p.col() < col {
			return p.list(mark), nil
		}
		if p.col() > col {
			return nil, errSlow
		}
		if p.b[p.pos] != '-' || !p.sep(p.pos+1) {
			return p.list(mark), nil // the next key of the mapping this sequence is a value of
		}
	}
}

// mapping reads a block mapping whose keys are at column col, from the
// value of its first key, key.
func (p *fastParser) mapping(col int, key any) (any, error) {
	mark := len(p.ents)
	var idx map[string]int
	for {
		v, err := p.mapValue(col)
		if err != nil {
			return nil, err
		}
		if !p.entry(mark, &idx, key, v) {
			return nil, errSlow
		}
		if p.atEnd() || p.col() < col {
			return p.dict(mark), nil
		}
		if p.col() > col {
			return nil, errSlow
		}
		if key, err = p.key(); err != nil {
			return nil, err
		}
	}
}

// key reads a block mapping's key and its ':'.
func (p *fastParser) key() (any, error) {
	c := p.b[p.pos]
	if c == '\'' || c == '"' {
		ls := p.ls
		s, err := p.quoted(-1)
		if err != nil || p.ls != ls || p.b[p.pos] != ':' || !p.sep(p.pos+1) {
			return nil, errSlow
		}
		p.pos++
		return s, nil
	}
	if indicator(c) && (c != '-' || p.sep(p.pos+1)) {
		return nil, errSlow
	}
	text, isKey, err := p.plainLine(false)
	if err != nil || !isKey {
		return nil, errSlow
	}
	p.pos++
	return fastKey(text)
}

// fastKey is the value of a plain key: one PyYAML's scanner takes as a
// simple key (1,024 characters at most), not a merge key.
func fastKey(text string) (any, error) {
	if len(text) > 1000 || text == "<<" {
		return nil, errSlow
	}
	return fastPlain(text)
}

// mapValue reads the value after a block mapping's key.
func (p *fastParser) mapValue(col int) (any, error) {
	name, err := p.anchor()
	if err != nil {
		return nil, err
	}
	v, err := p.mapValueAfter(col)
	p.setAnchor(name, v)
	return v, err
}

// mapValueAfter is mapValue past an anchor.
func (p *fastParser) mapValueAfter(col int) (any, error) {
	if p.restBlank() {
		p.pos++
		ind, err := p.lineContent()
		switch {
		case err != nil:
			return nil, err
		case ind > col:
			return p.node(col)
		case ind == col && p.b[p.pos] == '-' && p.sep(p.pos+1):
			return p.seq(col) // a sequence indented as its key
		}
		return nil, nil
	}
	for p.b[p.pos] == ' ' {
		p.pos++
	}
	return p.inline(col)
}

// inline reads a node that starts on the line of its key or entry: a
// scalar or a flow collection, not a block collection.
func (p *fastParser) inline(parent int) (any, error) {
	switch c := p.b[p.pos]; c {
	case '[', '{':
		v, err := p.flow(parent)
		if err != nil {
			return nil, err
		}
		return v, p.endLine()
	case '\'', '"':
		s, err := p.quoted(parent)
		if err != nil {
			return nil, err
		}
		return s, p.endLine()
	case '|':
		return p.literal(parent)
	case '!':
		return p.tagged(parent, false)
	case '*':
		v, err := p.alias(false)
		if err != nil {
			return nil, err
		}
		return v, p.endLine()
	default:
		if indicator(c) && (c != '-' || p.sep(p.pos+1)) {
			return nil, errSlow
		}
	}
	text, isKey, err := p.plainLine(false)
	if err != nil || isKey {
		return nil, errSlow
	}
	return p.plainRest(text, parent)
}

// plainLine reads a plain scalar's part on pos's line, up to the ':' of a
// key (isKey, pos at the ':'), the end of the line (pos at the '\n'), or,
// in a flow collection, a flow indicator (pos there).
func (p *fastParser) plainLine(flow bool) (string, bool, error) {
	start, i := p.pos, p.pos
	isKey := false
	stop := plainStops
	if flow {
		stop = flowStops
	}
	for ; ; i++ {
		for !stop[p.b[i]] {
			i++
		}
		c := p.b[i]
		if c == '\n' {
			break
		}
		if c == ':' {
			n := p.b[i+1]
			if n == ' ' || n == '\n' || flow && strings.IndexByte(",[]{}", n) >= 0 {
				isKey = true
				break
			}
			if flow && n != '/' && (n < 'a' || n > 'z') && (n < 'A' || n > 'Z') && (n < '0' || n > '9') {
				return "", false, errSlow
			}
			continue
		}
		if c == ' ' {
			if p.b[i+1] != '#' {
				continue
			}
			if flow {
				return "", false, errSlow
			}
			break // a comment: pos at the space before it
		}
		if c == '?' {
			return "", false, errSlow
		}
		break // a flow indicator
	}
	p.pos = i
	end := i
	for end > start && p.b[end-1] == ' ' {
		end--
	}
	if isKey {
		return intern(p.b[start:end]), true, nil
	}
	return string(p.b[start:end]), false, nil
}

// intern is the key b as a string, without a copy for the keys OONI's
// entries repeat.
func intern(b []byte) string {
	if s, ok := common[string(b)]; ok {
		return s
	}
	return string(b)
}

var common = func() map[string]string {
	m := map[string]string{}
	for _, w := range append(strings.Fields(`agent input requests request response body headers method url tor is_tor code
		queries answers addrs query query_type resolver failure hostname tampering test_resolvers headers_diff
		body_length_match body_proportion control_failure experiment_failure factor headers_match title_match
		socksproxy received sent transport_name status_code`), schema...) {
		m[w] = w
	}
	return m
}()

// The bytes that may end a plain scalar, outside flow collections and in
// them.
var plainStops, flowStops = func() (plain, flow [256]bool) {
	for _, c := range []byte("\n: ") {
		plain[c], flow[c] = true, true
	}
	for _, c := range []byte(",[]{}?") {
		flow[c] = true
	}
	return
}()

// plainRest reads the lines a plain scalar goes on over, and ends the
// scalar's line.
func (p *fastParser) plainRest(first string, parent int) (any, error) {
	text, err := p.more(first, parent, false)
	if err != nil {
		return nil, err
	}
	if err := p.endLine(); err != nil {
		return nil, err
	}
	return fastPlain(text)
}

// more reads the lines a plain scalar goes on over, those deeper than
// parent: outside flow collections up to a comment or a line that is not
// deeper (pos stays at the end of its last line's text); in one, up to
// an indicator, which ws reads on to, and any other line ends the subset.
func (p *fastParser) more(text string, parent int, flow bool) (string, error) {
	for p.b[p.pos] == '\n' {
		i := p.pos + 1
		j := i
		for j < len(p.b) && p.b[j] == ' ' {
			j++
		}
		shallow := j == len(p.b) || p.b[j] == '\n' || j-i <= parent
		switch {
		case shallow && flow:
			return "", errSlow
		case shallow, !flow && p.b[j] == '#', flow && indicator(p.b[j]):
			return text, nil
		case indicator(p.b[j]):
			return "", errSlow
		}
		p.pos, p.ls = j, i
		line, isKey, err := p.plainLine(flow)
		if err != nil || isKey {
			return "", errSlow
		}
		text += " " + line
	}
	return text, nil
}

// fastPlain is a plain scalar's value, by PyYAML's implicit resolvers;
// a decimal number of a few digits is read straight away.
func fastPlain(text string) (any, error) {
	if text == "" {
		return nil, nil
	}
	if n := len(text); n > 0 && n < 16 && text[0] >= '1' && text[0] <= '9' || text == "0" {
		x := int64(0)
		for i := 0; i < len(text); i++ {
			c := text[i]
			if c < '0' || c > '9' {
				x = -1
				break
			}
			x = x*10 + int64(c-'0')
		}
		switch {
		case x >= 0 && x < int64(len(smallInts)):
			return smallInts[x], nil
		case x >= 0:
			return big.NewInt(x), nil
		}
	}
	if c := text[0]; c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' {
		// A word: a bool, a null, or a string.
		if len(text) <= 5 && strings.IndexByte("yYnNtTfFoO", c) >= 0 {
			switch text {
			case "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON":
				return true, nil
			case "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF":
				return false, nil
			case "null", "Null", "NULL":
				return nil, nil
			}
		}
		return text, nil
	}
	switch dots(text) {
	case 1:
		// digits, a dot, digits: a float (no int nor date has a dot alone)
		if text[0] != '.' {
			if x, err := strconv.ParseFloat(text, 64); err == nil {
				return x, nil
			}
		}
	case 2, 3, 4, 5, 6, 7, 8:
		return text, nil // an address, a version: no number nor date has two dots
	}
	v, err := scalarValue(resolve(text), text)
	if err != nil {
		return nil, errSlow
	}
	return v, nil
}

// dots is how many dots text holds, when it is digits and dots only
// (and 0 for any other text).
func dots(text string) int {
	n := 0
	for i := 0; i < len(text); i++ {
		switch c := text[i]; {
		case c == '.':
			n++
		case c < '0' || c > '9':
			return 0
		}
	}
	return n
}

// ws skips spaces and line breaks inside a flow collection; its lines
// must be deeper than parent.
func (p *fastParser) ws(parent int) error {
	for {
		switch p.b[p.pos] {
		case ' ':
			p.pos++
		case '\n':
			p.pos++
			i := p.pos
			for i < len(p.b) && p.b[i] == ' ' {
				i++
			}
			if i == len(p.b) || p.b[i] == '\n' || p.b[i] == '#' || i-p.pos <= parent {
				return errSlow
			}
			p.ls, p.pos = p.pos, i
		case '#':
			return errSlow
		default:
			return nil
		}
	}
}

// flow reads a flow sequence or mapping.
func (p *fastParser) flow(parent int) (any, error) {
	if p.depth++; p.depth > maxFastNest {
		return nil, errSlow
	}
	defer func() { p.depth-- }()
	if p.b[p.pos] == '[' {
		p.pos++
		mark := len(p.items)
		if err := p.ws(parent); err != nil {
			return nil, err
		}
		if p.b[p.pos] == ']' {
			p.pos++
			return p.list(mark), nil
		}
		for {
			v, err := p.flowItem(parent, false)
			if err != nil {
				return nil, err
			}
			p.items = append(p.items, v)
			if err := p.ws(parent); err != nil {
				return nil, err
			}
			switch p.b[p.pos] {
			case ']':
				p.pos++
				return p.list(mark), nil
			case ',':
				p.pos++
				if err := p.ws(parent); err != nil || p.b[p.pos] == ']' {
					return nil, errSlow
				}
			default:
				return nil, errSlow
			}
		}
	}
	mark := len(p.ents)
	var idx map[string]int
	if err := p.flowMap(parent, func(k, v any) bool { return p.entry(mark, &idx, k, v) }); err != nil {
		return nil, err
	}
	return p.dict(mark), nil
}

// flowMap reads a flow mapping, handing each of its entries to put.
func (p *fastParser) flowMap(parent int, put func(k, v any) bool) error {
	p.pos++
	if err := p.ws(parent); err != nil {
		return err
	}
	if p.b[p.pos] == '}' {
		p.pos++
		return nil
	}
	for {
		k, err := p.flowItem(parent, true)
		if err != nil {
			return err
		}
		if p.b[p.pos] != ':' || !p.sep(p.pos+1) {
			return errSlow
		}
		p.pos++
		if err := p.ws(parent); err != nil {
			return err
		}
		var v any
		if c := p.b[p.pos]; c != ',' && c != '}' {
			if v, err = p.flowItem(parent, false); err != nil {
				return err
			}
			if err := p.ws(parent); err != nil {
				return err
			}
		}
		if !put(k, v) {
			return errSlow
		}
		switch p.b[p.pos] {
		case '}':
			p.pos++
			return nil
		case ',':
			p.pos++
			if err := p.ws(parent); err != nil || p.b[p.pos] == '}' {
				return errSlow
			}
		default:
			return errSlow
		}
	}
}

// flowItem reads an entry of a flow collection, or a key of a flow
// mapping (a scalar on one line, pos at its ':').
func (p *fastParser) flowItem(parent int, key bool) (any, error) {
	ls := p.ls
	switch c := p.b[p.pos]; c {
	case '[', '{':
		if key {
			return nil, errSlow
		}
		return p.flow(parent)
	case '\'', '"':
		s, err := p.quoted(parent)
		if err != nil || key && p.ls != ls {
			return nil, errSlow
		}
		return s, nil
	case '!':
		if key {
			return nil, errSlow
		}
		return p.tagged(parent, true)
	case '*':
		if key {
			return nil, errSlow
		}
		return p.alias(true)
	default:
		if indicator(c) && (c != '-' || p.sep(p.pos+1) || strings.IndexByte(",[]{}", p.b[p.pos+1]) >= 0) {
			return nil, errSlow
		}
	}
	text, isKey, err := p.plainLine(true)
	if err != nil || isKey != key {
		return nil, errSlow
	}
	if key {
		return fastKey(text)
	}
	if text, err = p.more(text, parent, true); err != nil {
		return nil, err
	}
	return fastPlain(text)
}

// tagged reads a tagged node: a scalar (a literal one too, outside flow
// collections) of !!binary, which OONI's reports carry, or of another of
// the safe loader's scalar tags, made as the faithful loader makes it;
// !!set before a flow mapping.
func (p *fastParser) tagged(parent int, flow bool) (any, error) {
	rest := p.b[p.pos:]
	end := bytes.IndexByte(rest, ' ')
	if end < 0 {
		return nil, errSlow
	}
	tag := string(rest[:end])
	isSet := tag == "!!set"
	switch tag {
	case "!!set", "!!binary", "!!str", "!!int", "!!float", "!!bool", "!!null", "!!timestamp":
		p.pos += end + 1
	default:
		return nil, errSlow
	}
	for p.b[p.pos] == ' ' {
		p.pos++
	}
	c := p.b[p.pos]
	if isSet {
		if c != '{' {
			return nil, errSlow
		}
		keys, err := p.setKeys(parent)
		if err == nil && !flow {
			err = p.endLine()
		}
		return keys, err
	}
	var text string
	var err error
	switch {
	case c == '|' && !flow:
		var v any
		if v, err = p.literal(parent); err == nil {
			text = v.(string)
		}
	case c == '\'' || c == '"':
		if text, err = p.quoted(parent); err == nil && !flow {
			err = p.endLine()
		}
	case c == '\n' || indicator(c):
		return nil, errSlow
	case flow:
		var isKey bool
		if text, isKey, err = p.plainLine(true); err == nil && isKey {
			err = errSlow
		}
		if err == nil {
			text, err = p.more(text, parent, true)
		}
	default:
		var isKey bool
		if text, isKey, err = p.plainLine(false); err == nil && isKey {
			err = errSlow
		}
		if err == nil {
			text, err = p.more(text, parent, false)
		}
		if err == nil {
			err = p.endLine()
		}
	}
	if err != nil {
		return nil, err
	}
	v, err := scalarValue(tag, text)
	if err != nil {
		return nil, errSlow // the faithful loader says which error
	}
	return v, nil
}

// setKeys reads the flow mapping of a !!set: its keys, each as often as
// it is written, as the faithful loader gives them.
func (p *fastParser) setKeys(parent int) (any, error) {
	var keys []any
	err := p.flowMap(parent, func(k, _ any) bool {
		keys = append(keys, k)
		return true
	})
	if err != nil {
		return nil, err
	}
	return keys, nil
}

// quoted reads a single- or double-quoted scalar, which may go on over
// lines deeper than parent.
func (p *fastParser) quoted(parent int) (string, error) {
	q := p.b[p.pos]
	p.pos++
	out := p.scratch[:0]
	defer func() { p.scratch = out[:0] }()
	for {
		c := p.b[p.pos]
		switch {
		case c == q && q == '\'':
			if p.b[p.pos+1] == '\'' {
				out = append(out, '\'')
				p.pos += 2
				continue
			}
			p.pos++
			return string(out), nil
		case c == q:
			p.pos++
			return string(out), nil
		case c == '\\' && q == '"':
			e := p.b[p.pos+1]
			if e == '\n' {
				p.pos++
				n, err := p.breaks(parent)
				if err != nil {
					return "", err
				}
				for range n {
					out = append(out, '\n')
				}
				continue
			}
			p.pos += 2
			var r rune
			switch e {
			case '0':
				r = 0
			case 'a':
				r = 7
			case 'b':
				r = 8
			case 't':
				r = 9
			case 'n':
				r = 10
			case 'v':
				r = 11
			case 'f':
				r = 12
			case 'r':
				r = 13
			case 'e':
				r = 27
			case ' ', '"', '\\':
				r = rune(e)
			case 'N':
				r = 0x85
			case '_':
				r = 0xa0
			case 'L':
				r = 0x2028
			case 'P':
				r = 0x2029
			case 'x', 'u', 'U':
				n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
				if p.pos+n > len(p.b) {
					return "", errSlow
				}
				for _, h := range p.b[p.pos : p.pos+n] {
					var d byte
					switch {
					case h >= '0' && h <= '9':
						d = h - '0'
					case h >= 'a' && h <= 'f':
						d = h - 'a' + 10
					case h >= 'A' && h <= 'F':
						d = h - 'A' + 10
					default:
						return "", errSlow
					}
					r = r<<4 | rune(d)
				}
				p.pos += n
				if r > utf8.MaxRune || r >= 0xd800 && r <= 0xdfff {
					return "", errSlow
				}
			default:
				return "", errSlow
			}
			out = utf8.AppendRune(out, r)
		case c == ' ':
			j := p.pos
			for p.b[j] == ' ' {
				j++
			}
			if p.b[j] != '\n' {
				out = append(out, p.b[p.pos:j]...)
			}
			p.pos = j
		case c == '\n':
			n, err := p.breaks(parent)
			if err != nil {
				return "", err
			}
			if n == 0 {
				out = append(out, ' ')
			}
			for range n {
				out = append(out, '\n')
			}
		default:
			j := p.pos + 1
			for p.b[j] != q && p.b[j] != '\\' && p.b[j] != ' ' && p.b[j] != '\n' {
				j++
			}
			out = append(out, p.b[p.pos:j]...)
			p.pos = j
		}
	}
}

// breaks moves pos from the '\n' it is at past the empty lines after it
// and the next line's indentation, which must be deeper than parent; it
// returns how many empty lines there were.
func (p *fastParser) breaks(parent int) (int, error) {
	n := 0
	for {
		p.pos++
		p.ls = p.pos
		if p.pos == len(p.b) {
			return 0, errSlow
		}
		if p.b[p.pos] == '\n' {
			n++
			continue
		}
		for p.b[p.pos] == ' ' {
			p.pos++
		}
		if p.b[p.pos] == '\n' || p.col() <= parent {
			return 0, errSlow
		}
		return n, nil
	}
}

// literal reads a literal block scalar ("|", "|-" or "|+"), whose lines
// are deeper than parent, and moves pos to the line after it.
func (p *fastParser) literal(parent int) (any, error) {
	if parent < 0 {
		return nil, errSlow
	}
	p.pos++
	chomp := byte(0)
	if c := p.b[p.pos]; c == '-' || c == '+' {
		chomp = c
		p.pos++
	}
	if !p.restBlank() {
		return nil, errSlow
	}
	p.pos++
	out := p.scratch[:0]
	defer func() { p.scratch = out[:0] }()
	indent := -1
	empty := 0 // empty lines since the last line of text
	lines := 0
	for {
		p.ls = p.pos
		if p.pos == len(p.b) {
			break
		}
		if p.b[p.pos] == '\n' {
			if indent < 0 {
				return nil, errSlow
			}
			empty++
			p.pos++
			continue
		}
		for p.b[p.pos] == ' ' {
			p.pos++
		}
		if p.b[p.pos] == '\n' {
			return nil, errSlow // a line of spaces
		}
		if indent < 0 {
			if indent = p.col(); indent <= parent {
				return nil, errSlow
			}
		}
		if p.col() < indent {
			p.pos = p.ls
			if _, err := p.lineContent(); err != nil {
				return nil, err
			}
			break
		}
		if lines > 0 {
			out = append(out, '\n')
		}
		for range empty {
			out = append(out, '\n')
		}
		empty = 0
		lines++
		end := p.ls + indent
		for p.b[p.pos] != '\n' {
			p.pos++
		}
		out = append(out, p.b[end:p.pos]...)
		p.pos++
	}
	if lines == 0 {
		return nil, errSlow
	}
	switch chomp {
	case 0:
		out = append(out, '\n')
	case '+':
		out = append(out, '\n')
		for range empty {
			out = append(out, '\n')
		}
	}
	// pos is at the content of the line after the scalar (ls its start),
	// or at the end.
	return string(out), nil
}
