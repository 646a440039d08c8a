package cmr

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Cumulus reads a CMR XML file with xml2js ({ignoreAttrs: true,
// explicitArray: false}) into a tree of objects, then reads a few paths
// with lodash's get. This file streams the XML instead and keeps only the
// elements on those paths, each as xml2js would have made it:
//
//   - an element with child elements is an object (its attributes are
//     ignored; its text too, for the paths read here);
//   - an element without child elements is its text, untrimmed (an empty
//     or blank element is that blank text);
//   - an element name repeated under one parent is an array, through
//     which get finds nothing.
//
// Names keep their prefixes ("gmd:extent"), as xml2js keeps them.

// Limits on an XML file.
const (
	MaxDepth = 256     // elements nested deeper are an error
	maxText  = 4 << 10 // text kept of an element on a path; no date is longer
)

// watch is a trie of the element paths to keep.
type watch map[string]watch

func watchPaths(paths ...string) watch {
	root := watch{}
	for _, p := range paths {
		w := root
		for _, name := range strings.Split(p, "/") {
			if w[name] == nil {
				w[name] = watch{}
			}
			w = w[name]
		}
	}
	return root
}

// node is a kept element.
type node struct {
	kids     map[string][]*node
	text     []byte
	long     bool // text longer than maxText, cut
	hasChild bool
}

// nodes is what a path leads to: nothing (undefined), one element, or
// several of one name (an array).
type nodes []*node

// get follows names from v as lodash's get does: through objects only.
func (v nodes) get(names ...string) nodes {
	for _, name := range names {
		if len(v) != 1 || !v[0].hasChild {
			return nil
		}
		v = v[0].kids[name]
	}
	return v
}

// value is the JavaScript value of v.
func (v nodes) value() Value {
	switch {
	case len(v) == 0:
		return Value{}
	case len(v) == 1 && v[0].hasChild:
		return Value{Kind: Object}
	case len(v) == 1:
		return str(string(v[0].text))
	}
	// String(array) joins its elements' strings with ","; an object's is
	// "[object Object]", never a date.
	parts := make([]string, len(v))
	for i, n := range v {
		if n.hasChild {
			return Value{Kind: Array}
		}
		parts[i] = string(n.text)
	}
	return Value{Kind: Array, Str: strings.Join(parts, ","), Joinable: true}
}

// parseXML streams r and returns the document (an object whose one key is
// the root element) with the elements on w's paths.
func parseXML(r io.Reader, w watch) (nodes, error) {
	d := xml.NewDecoder(r)
	d.Strict = true
	type frame struct {
		name string
		n    *node
		w    watch
	}
	doc := &node{hasChild: true, kids: map[string][]*node{}}
	stack := []frame{{n: doc, w: w}}
	roots := 0
	for {
		tok, err := d.RawToken()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("XML: %w", err)
		}
		top := &stack[len(stack)-1]
		switch t := tok.(type) {
		case xml.StartElement:
			if len(stack) > MaxDepth {
				return nil, fmt.Errorf("XML: elements nested deeper than %d", MaxDepth)
			}
			name := qname(t.Name)
			if len(stack) == 1 {
				if roots++; roots > 1 {
					return nil, fmt.Errorf("XML: a second root element <%s>", name)
				}
			}
			f := frame{name: name}
			if top.n != nil {
				top.n.hasChild = true
				if kw := top.w[name]; kw != nil {
					f.n, f.w = &node{}, kw
					if top.n.kids == nil {
						top.n.kids = map[string][]*node{}
					}
					top.n.kids[name] = append(top.n.kids[name], f.n)
				}
			}
			stack = append(stack, f)
		case xml.EndElement:
			if len(stack) == 1 || qname(t.Name) != top.name {
				return nil, fmt.Errorf("XML: </%s> does not close <%s>", qname(t.Name), top.name)
			}
			stack = stack[:len(stack)-1]
		case xml.CharData:
			switch {
			case len(stack) == 1:
				if len(bytes.TrimSpace(t)) > 0 {
					return nil, errors.New("XML: text outside the root element")
				}
			case top.n != nil && !top.n.long:
				if len(top.n.text)+len(t) > maxText {
					top.n.long = true
					t = t[:maxText-len(top.n.text)]
				}
				top.n.text = append(top.n.text, t...)
			}
		}
	}
	if len(stack) > 1 {
		return nil, fmt.Errorf("XML: the file ends inside <%s>", stack[len(stack)-1].name)
	}
	if roots == 0 {
		return nil, errors.New("XML: no root element")
	}
	return nodes{doc}, nil
}

func qname(n xml.Name) string {
	if n.Space == "" {
		return n.Local
	}
	return n.Space + ":" + n.Local
}
