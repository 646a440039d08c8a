package message

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/backfill-dev/backfill/internal/lines"
)

// MaxItem bounds one input: a JSON line, or a whole JSON document. SQS and
// EventBridge carry at most 256 KiB; Cumulus messages stored whole are
// larger, but not by this much.
const MaxItem = 64 << 20

// Item is one input of a stream.
type Item struct {
	Raw  []byte // the input's JSON text (valid until the next item)
	Line int    // 1-based line where it starts
	// Index is its place in a {"Records": [...]} batch or a top-level
	// array, -1 when the input stands alone.
	Index int
	Err   error // the item could not be read (a line too long)
}

// Where is the item's position for messages: "LINE" or "LINE[INDEX]".
func (it Item) Where() string {
	if it.Index >= 0 {
		return fmt.Sprintf("%d[%d]", it.Line, it.Index)
	}
	return fmt.Sprint(it.Line)
}

// Scan calls fn with each input of r: JSON lines (one input per line;
// blank lines skipped), or one JSON document over several lines. An SQS
// event of a Lambda ({"Records": [...]}) or a top-level array gives one
// input per element. A line that is not JSON is still an input (Decode
// reports it), so nothing is skipped. Scan stops at fn's first error or
// when ctx is done.
func Scan(ctx context.Context, r io.Reader, fn func(Item) error) error {
	lr := lines.NewReaderLimit(r, MaxItem, nil)
	first, n, err := nextNonBlank(lr)
	if err == io.EOF {
		return nil
	}
	if err != nil && !errors.Is(err, lines.ErrTooLong) {
		return err
	}
	if err == nil && !json.Valid(first) && (len(first) == 0 || first[0] == '{' || first[0] == '[') {
		// One document over several lines.
		doc := append([]byte(nil), first...)
		for {
			line, _, err := lr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				return fmt.Errorf("line %d: %w", n, err)
			}
			doc = append(append(doc, '\n'), line...)
			if len(doc) > MaxItem {
				return fmt.Errorf("a JSON document larger than %d bytes", MaxItem)
			}
		}
		if !json.Valid(doc) && linesAfterFirst(doc) {
			// JSON lines whose first line is broken.
			for i, line := range bytes.Split(doc, []byte("\n")) {
				if len(bytes.TrimSpace(line)) == 0 {
					continue
				}
				if err := each(bytes.TrimSuffix(line, []byte("\r")), n+i, fn); err != nil {
					return err
				}
			}
			return nil
		}
		return each(doc, n, fn)
	}
	for {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			if e := fn(Item{Line: n, Index: -1, Err: fmt.Errorf("line %w", err)}); e != nil {
				return e
			}
		} else if e := each(first, n, fn); e != nil {
			return e
		}
		first, n, err = nextNonBlank(lr)
		if err == io.EOF {
			return nil
		}
		if err != nil && !errors.Is(err, lines.ErrTooLong) {
			return err
		}
	}
}

// linesAfterFirst tells JSON lines from one document: the second
// non-blank line is a JSON value by itself.
func linesAfterFirst(doc []byte) bool {
	ls := bytes.Split(doc, []byte("\n"))
	for _, l := range ls[1:] {
		if len(bytes.TrimSpace(l)) > 0 {
			return json.Valid(l)
		}
	}
	return false
}

func nextNonBlank(lr *lines.Reader) ([]byte, int, error) {
	for {
		line, n, err := lr.Next()
		if err != nil {
			return nil, n, err
		}
		if len(bytes.TrimSpace(line)) > 0 {
			return line, n, nil
		}
	}
}

// each splits a Lambda SQS event or an array into its elements.
func each(doc []byte, line int, fn func(Item) error) error {
	t := bytes.TrimSpace(doc)
	if len(t) > 0 && (t[0] == '[' || t[0] == '{') && json.Valid(t) {
		var list []json.RawMessage
		if t[0] == '[' {
			_ = json.Unmarshal(t, &list) // t is valid JSON (checked above)
		} else {
			var ev map[string]json.RawMessage
			_ = json.Unmarshal(t, &ev) // t is valid JSON (checked above)
			if recs, ok := ev["Records"]; ok && len(ev) == 1 {
				if json.Unmarshal(recs, &list) != nil {
					list = nil
				}
			}
		}
		if list != nil {
			for i, raw := range list {
				if err := fn(Item{Raw: raw, Line: line, Index: i}); err != nil {
					return err
				}
			}
			return nil
		}
	}
	return fn(Item{Raw: doc, Line: line, Index: -1})
}
