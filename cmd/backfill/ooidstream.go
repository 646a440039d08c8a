package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strconv"

	"golang.org/x/sync/errgroup"

	"github.com/backfill-dev/backfill/pipeline/ooid"
)

// "backfill ooid -" is a three-stage pipeline: a reader cuts standard
// input into chunks of whole lines, workers compute the OOIDs of a chunk
// into its own output buffer, and a writer emits the chunks in input order.
// Memory is bounded by the chunks in flight: (2 × workers + 2) × chunkSize
// for input and about as much for output, whatever the input size.

// chunkSize is the size of the input chunks; a line longer than that can
// only be rejected, which maxLine does anyway.
const chunkSize = 256 << 10

// chunk is a run of whole input lines and, once processed, their output.
type chunk struct {
	seq       int
	firstLine int    // number of the first line in data
	data      []byte // whole lines; the last one may lack its "\n" at EOF
	longLine  bool   // data is empty: line firstLine was longer than chunkSize
	out       []byte
	rejects   []reject
	buf       []byte // backing array of data
}

type reject struct {
	line int
	msg  string
}

// reportCache keeps the report of the last textname seen, so that the lines
// of one report share its parse and hash.
type reportCache struct {
	scheme ooid.Scheme
	name   []byte
	rep    ooid.Report
	err    error
	valid  bool
}

func (c *reportCache) get(name []byte) (ooid.Report, error) {
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
		c.rejects = append(c.rejects, reject{c.firstLine, errLineTooLong.Error()})
		return
	}
	rej := func(n int, format string, args ...any) {
		c.rejects = append(c.rejects, reject{n, fmt.Sprintf(format, args...)})
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
		if len(line) > maxLine {
			rej(n, "%v", errLineTooLong)
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
			if ndx, err = parseNDX(ndxField, cache.scheme); err != nil {
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
	skipping bool   // discarding the rest of a line longer than chunkSize
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

// ooidStream is "backfill ooid -".
func ooidStream(ctx context.Context, scheme ooid.Scheme, std stdio) error {
	workers := runtime.GOMAXPROCS(0)
	inFlight := 2*workers + 2
	free := make(chan *chunk, inFlight) // recycled chunks with their buffers
	for range inFlight {
		free <- &chunk{buf: make([]byte, chunkSize), out: make([]byte, 0, chunkSize*3/2)}
	}
	todo := make(chan *chunk, workers)
	done := make(chan *chunk, workers)
	g, ctx := errgroup.WithContext(ctx)

	g.Go(func() error { // reader
		defer close(todo)
		k := &chunker{r: std.in, line: 1}
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
				if _, err := std.out.Write(c.out); err != nil {
					return fmt.Errorf("write output: %w", err)
				}
				for _, r := range c.rejects {
					bad++
					fmt.Fprintf(std.err, "backfill: line %d: %s\n", r.line, r.msg)
				}
				free <- c
			}
		}
		return nil
	})
	if err := g.Wait(); err != nil {
		return err
	}
	if bad > 0 {
		return &rejectsError{n: bad, what: "lines"}
	}
	return nil
}
