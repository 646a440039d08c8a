package corpus

import (
	"bytes"
	stdjson "encoding/json"
	"fmt"
	"math/rand/v2"
	"sort"

	yamlv3 "gopkg.in/yaml.v3"
)

// A varied corpus (Config.Varied) writes each measurement as its sample
// with a share of its string values redrawn (their letters and digits), so
// that measurements differ as real ones do and the containers compress as
// the archive does (docs/testing.md has the figures) instead of as one
// sample repeated. Keys, numbers, punctuation and lengths are kept: every
// measurement still parses, to the same keys, at the same offsets.

// variable lists, value by value, the offsets of blob that a variation
// may redraw: the letters and digits inside the string values of a JSON
// measurement, or of the quoted scalars and the plain values of a YAML
// one. A sample whose
// every such byte redrawn does not parse to the same keys has none.
func variable(kind string, blob []byte) [][]int32 {
	var values [][]int32
	if kind == "json" {
		values = jsonValueChars(blob)
	} else {
		values = append(yamlQuotedChars(blob), yamlPlainChars(blob)...)
	}
	if len(values) == 0 {
		return nil
	}
	redrawn := bytes.Clone(blob)
	for _, v := range values {
		for _, i := range v {
			redrawn[i] = otherChar(redrawn[i], 7)
		}
	}
	a, errA := keysOf(kind, blob)
	b, errB := keysOf(kind, redrawn)
	if errA != nil || errB != nil || a != b {
		return nil
	}
	return values
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// otherChar is a letter for a letter, a digit for a digit, drawn from r.
func otherChar(c byte, r uint64) byte {
	if '0' <= c && c <= '9' {
		return '0' + byte(r%10)
	}
	return "etaoinshrdlcumwfgypbvkjxqzETAOINSHRDLU"[r%38]
}

// jsonValueChars: the alphanumerics inside each JSON string that is not a
// key (a key's string is followed by a colon), escapes skipped.
func jsonValueChars(b []byte) [][]int32 {
	var at [][]int32
	for i := 0; i < len(b); i++ {
		if b[i] != '"' {
			continue
		}
		var in []int32
		j := i + 1
		for j < len(b) && b[j] != '"' {
			switch {
			case b[j] == '\\' && j+1 < len(b) && b[j+1] == 'u':
				j += 6
				continue
			case b[j] == '\\':
				j += 2
				continue
			case isAlnum(b[j]):
				in = append(in, int32(j))
			}
			j++
		}
		k := j + 1
		for k < len(b) && (b[k] == ' ' || b[k] == '\t' || b[k] == '\n' || b[k] == '\r') {
			k++
		}
		if (k >= len(b) || b[k] != ':') && len(in) > 0 {
			at = append(at, in)
		}
		i = j
	}
	return at
}

// yamlQuotedChars: the alphanumerics inside each double- or single-quoted
// scalar of a YAML document that starts after ": ", "- ", "[" or ", ",
// escapes skipped. What it takes for a quote and is not is caught by
// variable's check.
func yamlQuotedChars(b []byte) [][]int32 {
	var at [][]int32
	for i := 1; i < len(b); i++ {
		q := b[i]
		if q != '"' && q != '\'' {
			continue
		}
		p := b[i-1]
		if p == ' ' && i >= 2 {
			p = b[i-2]
		}
		if p != ':' && p != '-' && p != '[' && p != ',' {
			continue
		}
		j := i + 1
		var in []int32
		for j < len(b) && b[j] != q {
			switch {
			case q == '"' && b[j] == '\\':
				j += 2
				continue
			case isAlnum(b[j]):
				in = append(in, int32(j))
			}
			j++
		}
		if j >= len(b) {
			break
		}
		if len(in) > 0 {
			at = append(at, in)
		}
		i = j
	}
	return at
}

// yamlPlainChars: the alphanumerics of each plain value that follows a
// line's first ": " to the line's end, when it starts with a letter or
// digit and holds no quote, bracket, brace or comment.
func yamlPlainChars(b []byte) [][]int32 {
	var at [][]int32
	for start := 0; start < len(b); {
		end := bytes.IndexByte(b[start:], '\n')
		if end < 0 {
			end = len(b)
		} else {
			end += start
		}
		line := b[start:end]
		if k := bytes.Index(line, []byte(": ")); k >= 0 && k+2 < len(line) && isAlnum(line[k+2]) &&
			!bytes.ContainsAny(line[k+2:], "\"'[]{}#") {
			var in []int32
			for j := k + 2; j < len(line); j++ {
				if isAlnum(line[j]) {
					in = append(in, int32(start+j))
				}
			}
			at = append(at, in)
		}
		start = end + 1
	}
	return at
}

// keysOf lists every mapping key of the document, with its path.
func keysOf(kind string, doc []byte) (string, error) {
	var v any
	var err error
	if kind == "json" {
		err = stdjson.Unmarshal(doc, &v)
	} else {
		err = yamlv3.Unmarshal(doc, &v)
	}
	if err != nil {
		return "", err
	}
	var keys []string
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				keys = append(keys, prefix+"/"+k)
				walk(prefix+"/"+k, e)
			}
		case []any:
			for i, e := range x {
				walk(fmt.Sprintf("%s[%d]", prefix, i), e)
			}
		}
	}
	walk("", v)
	sort.Strings(keys)
	return fmt.Sprint(keys), nil
}

// varied writes blob into dst with each value of values redrawn with
// probability share, from rng.
func varied(dst, blob []byte, values [][]int32, share float64, rng *rand.Rand) []byte {
	dst = append(dst[:0], blob...)
	for _, v := range values {
		if rng.Float64() >= share {
			continue
		}
		var r uint64
		for n, i := range v {
			if n%8 == 0 {
				r = rng.Uint64()
			}
			dst[i] = otherChar(dst[i], r&0xff)
			r >>= 8
		}
	}
	return dst
}
