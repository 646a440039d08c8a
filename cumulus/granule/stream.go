package granule

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"

	"github.com/backfill-dev/backfill/internal/lines"
)

// Stream writes the unique granule ID of every line of r to w, as
// UNIQUE_ID<TAB>ID<TAB>COLLECTION_ID, in order. A line is ID<TAB>COLLECTION_ID,
// or ID alone when defaultCollection is given (hasDefault). A line that
// cannot be read so is rejected: reject is told its number and why.
// Stream returns how many lines it rejected.
func (g *Generator) Stream(ctx context.Context, r io.Reader, w io.Writer, defaultCollection string, hasDefault bool, reject func(line int, why string)) (int, error) {
	out := bufio.NewWriterSize(w, 256<<10)
	var buf []byte
	bad := 0
	refuse := func(n int, why string) error {
		bad++
		reject(n, why)
		return nil
	}
	err := lines.Each(ctx, r, func(line []byte, n int, tooLong error) error {
		if tooLong != nil {
			return refuse(n, tooLong.Error())
		}
		id, collection, hasCollection := bytes.Cut(line, []byte{'\t'})
		switch {
		case hasCollection && bytes.IndexByte(collection, '\t') >= 0:
			return refuse(n, "more than two tab-separated fields")
		case !hasCollection && !hasDefault:
			return refuse(n, "no collection ID: want ID<TAB>COLLECTION_ID, or give --collection-id")
		case !hasCollection:
			collection = []byte(defaultCollection)
		}
		var err error
		if buf, err = g.Append(buf[:0], id, collection); err != nil {
			return refuse(n, err.Error())
		}
		buf = append(buf, '\t')
		buf = append(buf, id...)
		buf = append(buf, '\t')
		buf = append(buf, collection...)
		buf = append(buf, '\n')
		if _, err := out.Write(buf); err != nil {
			return fmt.Errorf("write output: %w", err)
		}
		return nil
	})
	if ferr := out.Flush(); err == nil && ferr != nil {
		err = fmt.Errorf("write output: %w", ferr)
	}
	return bad, err
}
