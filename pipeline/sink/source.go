package sink

import (
	"fmt"
	"sort"
	"strings"

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
