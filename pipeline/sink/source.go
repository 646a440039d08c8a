package sink

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/backfill-dev/backfill/pipeline/ooid"
	"github.com/backfill-dev/backfill/pipeline/stamped"
)

// OtherSourceError is the error of a run that would replace buckets
// committed from another input folder.
type OtherSourceError struct {
	Output  string   // the output, for the message ("the output" when empty)
	Source  string   // what the run reads
	Other   string   // what the buckets were read from (the first such)
	Buckets []string // the buckets it would replace, sorted
}

func (e *OtherSourceError) Error() string {
	out := e.Output
	if out == "" {
		out = "the output"
	}
	return fmt.Sprintf("%s holds %d %s (%s) read from %s, not from %s: not replaced (--replace replaces them)",
		out, len(e.Buckets), plural(len(e.Buckets), "bucket", "buckets"), listNames(e.Buckets), e.Other, e.Source)
}

// CheckSource returns an *OtherSourceError when a committed bucket of
// buckets (committed holds the ledger's committed buckets, by name) was
// read from another source than source: a run or a load does not replace
// it in silence. A ledger entry older than sources names none, and passes.
func CheckSource(source string, buckets []string, committed map[string]stamped.State) error {
	if source == "" {
		return nil
	}
	var e *OtherSourceError
	for _, b := range buckets {
		src := committed[b].Meta.Source
		if src == "" || src == source {
			continue
		}
		if e == nil {
			e = &OtherSourceError{Source: source, Other: src}
		}
		e.Buckets = append(e.Buckets, b)
	}
	if e == nil {
		return nil
	}
	sort.Strings(e.Buckets)
	return e
}

func listNames(names []string) string {
	const most = 3
	if len(names) <= most {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:most], ", ") + fmt.Sprintf(" and %d more", len(names)-most)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// OneScheme refuses a writer that would leave the output with buckets of
// two schemes or ndx policies: one it writes (scope, made under scheme
// and policy) and one it leaves as it is. Every writer (a run, a load)
// checks it before anything is written.
func OneScheme(scheme ooid.Scheme, policy string, scope []string, committed map[string]stamped.State) error {
	in := make(map[string]bool, len(scope))
	for _, b := range scope {
		in[b] = true
	}
	var others []string
	var first stamped.Meta
	for _, b := range slices.Sorted(maps.Keys(committed)) {
		m := committed[b].Meta
		if in[b] || (m.Scheme.Equal(scheme) && m.NdxPolicy == policy) {
			continue
		}
		if others == nil {
			first = m
		}
		others = append(others, b)
	}
	if others == nil {
		return nil
	}
	more := ""
	if len(others) > 1 {
		more = fmt.Sprintf(" and %d more", len(others)-1)
	}
	return fmt.Errorf("the output holds bucket %s%s made under %s with --ndx %s, and the buckets written now are made under %s with --ndx %s: one output holds one scheme and one ndx policy; write every bucket of the output again (their IDs are withdrawn, and named), or write to another folder",
		others[0], more, first.Scheme, first.NdxPolicy, scheme, policy)
}
