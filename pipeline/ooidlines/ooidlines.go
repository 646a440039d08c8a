// Package ooidlines computes the backfilled OOIDs of TEXTNAME<TAB>NDX lines
// (`backfill ooid -`), streaming, on every core, in input order; and
// decodes OOIDs, checking each against its textname and ndx on request
// (`backfill decode`, Decoder).
//
// It is a three-stage pipeline: a reader cuts the input into chunks of
// whole lines, workers compute the OOIDs of a chunk into its own output
// buffer, and a writer emits the chunks in input order. Memory is bounded
// by the chunks in flight: (2 × workers + 2) × ChunkSize for input and
// about as much for output, whatever the input size.
package ooidlines

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strconv"

	"golang.org/x/sync/errgroup"

	"github.com/backfill-dev/backfill/internal/lines"
	"github.com/backfill-dev/backfill/pipeline/ooid"
)

// ChunkSize is the size of the input chunks; a line longer than that can
// only be rejected, which lines.MaxLine does anyway.
const ChunkSize = 256 << 10

// chunk is a run of whole input lines and, once processed, their output.
type chunk struct {
	seq       int
	firstLine int    // number of the first line in data
	data      []byte // whole lines; the last one may lack its "\n" at EOF
	longLine  bool   // data is empty: line firstLine was longer than ChunkSize
	out       []byte
	rejects   []rejected
	buf       []byte // backing array of data
}

type rejected struct {
	line int
	msg  string
}

// reportCache keeps the report of the last textname seen, so that the lines
// of one report share its parse and hash.
type reportCache struct {
	scheme ooid.Scheme
	name   []byte
	rep    ooid.ReportIDs
	err    error
	valid  bool
}

func (c *reportCache) get(name []byte) (ooid.ReportIDs, error) {
	if !c.valid || !bytes.Equal(name, c.name) {
		c.name = append(c.name[:0], name...)
		c.rep, c.err = c.scheme.ReportBytes(c.name)
		c.valid = true
	}
	return c.rep, c.err
}

// processChunk computes the output lines of c and its rejects.
func processChunk(cache *reportCache, c *chunk) {
	c.out, c.rejects = c.out[:0], c.rejects[:0]
	if c.longLine {
		c.rejects = append(c.rejects, rejected{c.firstLine, lines.ErrTooLong.Error()})
		return
	}
	rej := func(n int, format string, args ...any) {
		c.rejects = append(c.rejects, rejected{n, fmt.Sprintf(format, args...)})
	}
	data := c.data
	for n := c.firstLine; len(data) > 0; n++ {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		if len(line) > 0 && line[len(line)-1] == '\r' {
			line = line[:len(line)-1]
		}
		if len(line) > lines.MaxLine {
			rej(n, "%v", lines.ErrTooLong)
			continue
		}
		if len(line) == 0 {
			rej(n, "empty line")
			continue
		}
		name, ndxField, hasNDX := bytes.Cut(line, []byte{'\t'})
		var ndx uint32
		if hasNDX {
			if bytes.IndexByte(ndxField, '\t') >= 0 {
				rej(n, "more than two tab-separated fields")
				continue
			}
			var err error
			if ndx, err = ParseNDX(ndxField, cache.scheme); err != nil {
				rej(n, "NDX %q: %v", clip(ndxField), err)
				continue
			}
		}
		rep, err := cache.get(name)
		if err != nil {
			rej(n, "%v", err)
			continue
		}
		out := rep.ID(ndx).AppendText(c.out)
		out = append(out, '\t')
		out = append(out, name...)
		out = append(out, '\t')
		out = strconv.AppendUint(out, uint64(ndx), 10)
		c.out = append(out, '\n')
	}
}

// chunker cuts r into chunks of whole lines.
type chunker struct {
	r        io.Reader
	carry    []byte // start of a line that did not fit the last chunk
	line     int    // number of the next line
	skipping bool   // discarding the rest of a line longer than ChunkSize
	eof      bool
}

// next fills c with the next lines, using c.buf as backing array. It
// returns io.EOF when the input is exhausted.
func (k *chunker) next(c *chunk) error {
	buf := c.buf
	for {
		if k.eof && len(k.carry) == 0 {
			return io.EOF
		}
		n := copy(buf, k.carry)
		k.carry = k.carry[:0]
		for n < len(buf) && !k.eof {
			m, err := k.r.Read(buf[n:])
			n += m
			if errors.Is(err, io.EOF) {
				k.eof = true
			} else if err != nil {
				return err
			}
		}
		data := buf[:n]
		if k.skipping {
			i := bytes.IndexByte(data, '\n')
			if i < 0 {
				if k.eof {
					return io.EOF
				}
				continue
			}
			k.skipping = false
			data = data[i+1:]
			k.carry = append(k.carry, data...)
			continue
		}
		end := len(data)
		if !k.eof || n == len(buf) {
			end = bytes.LastIndexByte(data, '\n') + 1
		}
		if end == 0 && len(data) > 0 {
			// No line end in a whole chunk: reject the line, skip its rest.
			c.firstLine, c.data, c.longLine = k.line, nil, true
			k.line++
			k.skipping = true
			return nil
		}
		k.carry = append(k.carry, data[end:]...)
		c.firstLine, c.data, c.longLine = k.line, data[:end], false
		k.line += bytes.Count(c.data, []byte{'\n'})
		if end > 0 && data[end-1] != '\n' {
			k.line++ // a last line without "\n"
		}
		if end > 0 {
			return nil
		}
	}
}

// Run reads lines "TEXTNAME" or "TEXTNAME<TAB>NDX" from in and writes
// "OOID<TAB>TEXTNAME<TAB>NDX" lines to out, in input order, with the IDs of
// scheme; it calls reject, in input order too, for every line it cannot
// take (an empty line, a bad textname or NDX, extra fields, a line over
// lines.MaxLine), and returns how many. The error is for reading, writing
// or ctx.
func Run(ctx context.Context, scheme ooid.Scheme, in io.Reader, out io.Writer, reject func(line int, msg string)) (int, error) {
	workers := runtime.GOMAXPROCS(0)
	inFlight := 2*workers + 2
	free := make(chan *chunk, inFlight) // recycled chunks with their buffers
	for range inFlight {
		free <- &chunk{buf: make([]byte, ChunkSize), out: make([]byte, 0, ChunkSize*3/2)}
	}
	todo := make(chan *chunk, workers)
	done := make(chan *chunk, workers)
	g, ctx := errgroup.WithContext(ctx)

	g.Go(func() error { // reader
		defer close(todo)
		k := &chunker{r: in, line: 1}
		for seq := 0; ; seq++ {
			var c *chunk
			select {
			case c = <-free:
			case <-ctx.Done():
				return ctx.Err()
			}
			err := k.next(c)
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("read standard input: %w", err)
			}
			c.seq = seq
			select {
			case todo <- c:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	})
	wg := errgroup.Group{}
	for range workers {
		wg.Go(func() error {
			cache := &reportCache{scheme: scheme}
			for c := range todo {
				processChunk(cache, c)
				select {
				case done <- c:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return nil
		})
	}
	g.Go(func() error { // closer
		defer close(done)
		return wg.Wait()
	})

	bad := 0
	g.Go(func() error { // writer, in input order
		pending := map[int]*chunk{}
		next := 0
		for c := range done {
			pending[c.seq] = c
			for c := pending[next]; c != nil; c = pending[next] {
				delete(pending, next)
				next++
				if _, err := out.Write(c.out); err != nil {
					return fmt.Errorf("write output: %w", err)
				}
				for _, r := range c.rejects {
					bad++
					reject(r.line, r.msg)
				}
				free <- c
			}
		}
		return nil
	})
	err := g.Wait()
	return bad, err
}

var (
	errNDXSyntax = errors.New("not a decimal integer")
	errNDXRange  = errors.New("too large")
)

// ParseNDX parses a decimal NDX below 2^CounterBits.
func ParseNDX(b []byte, scheme ooid.Scheme) (uint32, error) {
	// Leading zeros are the number's own (0000000001 is 1), however many.
	for len(b) > 1 && b[0] == '0' {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 10 {
		if len(b) > 10 && allDigits(b) {
			return 0, fmt.Errorf("%w: the counter space is 2^%d", errNDXRange, scheme.CounterBits)
		}
		return 0, errNDXSyntax
	}
	var v uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, errNDXSyntax
		}
		v = v*10 + uint64(c-'0')
	}
	if v > uint64(scheme.Mask()) {
		return 0, fmt.Errorf("%w: %d, the counter space is 2^%d", errNDXRange, v, scheme.CounterBits)
	}
	return uint32(v), nil
}

func allDigits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func clip(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "..."
	}
	return string(b)
}
