package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/backfill-dev/backfill/internal/store"
)

// s3File reads one version of an object: sequentially through ranged GETs
// of a chunk each, up to the read-ahead in flight, or at any offset
// (ReadAt).
type s3File struct {
	s    *Store
	ctx  context.Context
	name string
	o    *store.Object
	seq  *seqReader
}

func (f *s3File) Stat() (fs.FileInfo, error) { return &objInfo{name: path.Base(f.name), o: f.o}, nil }

func (f *s3File) Read(p []byte) (int, error) {
	if f.seq == nil {
		ctx, cancel := context.WithCancel(f.ctx)
		f.seq = &seqReader{f: f, ctx: ctx, cancel: cancel}
	}
	return f.seq.Read(p)
}

func (f *s3File) Close() error {
	if f.seq != nil {
		f.seq.close()
	}
	return nil
}

// ReadAt implements io.ReaderAt, one ranged GET (retried as any).
func (f *s3File) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, &fs.PathError{Op: "read", Path: f.s.Where(f.name), Err: fs.ErrInvalid}
	}
	if off >= f.o.Size {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), f.o.Size-off))
	if err := f.get(f.ctx, off, p[:n]); err != nil {
		return 0, err
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// firstChunk is the size of a file's first ranged GET.
const firstChunk = 256 << 10

// chunk is one ranged GET in flight.
type chunk struct {
	buf  *[]byte
	data []byte
	err  error
	done chan struct{}
}

type seqReader struct {
	f      *s3File
	ctx    context.Context
	cancel context.CancelFunc
	next   int64    // the offset of the next chunk to ask for
	size   int      // of the last chunk asked for
	queue  []*chunk // asked for, in order
	cur    *chunk
	rest   []byte // of cur, not read yet
	wg     sync.WaitGroup
}

func (r *seqReader) fill() {
	set := r.f.s.c.set
	for len(r.queue) <= set.ahead && r.next < r.f.o.Size {
		// The first GETs are small, so the reader starts on the first
		// bytes while the next ones come; they double up to the chunk.
		r.size = min(max(2*r.size, firstChunk), set.chunk)
		n := int(min(int64(r.size), r.f.o.Size-r.next))
		c := &chunk{done: make(chan struct{}), buf: r.f.s.c.buffer()}
		c.data = (*c.buf)[:n]
		off := r.next
		r.next += int64(n)
		r.queue = append(r.queue, c)
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			defer close(c.done)
			c.err = r.f.get(r.ctx, off, c.data)
		}()
	}
}

func (r *seqReader) Read(p []byte) (int, error) {
	for len(r.rest) == 0 {
		if r.cur != nil {
			r.f.s.c.bufs.Put(r.cur.buf)
			r.cur = nil
		}
		r.fill()
		if len(r.queue) == 0 {
			return 0, io.EOF
		}
		c := r.queue[0]
		r.queue = r.queue[1:]
		<-c.done
		if c.err != nil {
			r.f.s.c.bufs.Put(c.buf)
			return 0, c.err
		}
		r.cur, r.rest = c, c.data
		r.fill()
	}
	n := copy(p, r.rest)
	r.rest = r.rest[n:]
	return n, nil
}

func (r *seqReader) close() {
	r.cancel()
	r.wg.Wait()
	for _, c := range r.queue {
		r.f.s.c.bufs.Put(c.buf)
	}
	if r.cur != nil {
		r.f.s.c.bufs.Put(r.cur.buf)
	}
	r.queue, r.cur, r.rest = nil, nil, nil
}

func (c *client) buffer() *[]byte {
	if b, ok := c.bufs.Get().(*[]byte); ok && cap(*b) >= c.set.chunk {
		return b
	}
	b := make([]byte, c.set.chunk)
	return &b
}

// get fills buf with the object's bytes from off. A request that fails is
// retried by the client; a body that breaks, comes short or stalls is asked
// again here, with backoff, up to bodyAttempts times.
func (f *s3File) get(ctx context.Context, off int64, buf []byte) error {
	where := f.s.Where(f.name)
	for attempt := 1; ; attempt++ {
		err := f.getOnce(ctx, off, buf)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var se *store.Error
		if errors.As(err, &se) {
			return err // not a broken body: the client retried it already
		}
		if attempt >= bodyAttempts {
			return &store.Error{Where: where, Op: "read", Err: fmt.Errorf("bytes %d+%d, after %d tries: %w", off, len(buf), attempt, err)}
		}
		select {
		case <-time.After(min(backoff(attempt), f.s.c.set.backoff)):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func backoff(attempt int) time.Duration {
	return min(100*time.Millisecond<<(attempt-1), 5*time.Second)
}

// getOnce is one ranged GET of len(buf) bytes from off, on the ETag the
// file was opened with. Errors of the request come back as *Error; those
// of the body as they are (the caller asks again).
func (f *s3File) getOnce(ctx context.Context, off int64, buf []byte) error {
	where := f.s.Where(f.name)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rng := fmt.Sprintf("bytes=%d-%d", off, off+int64(len(buf))-1)
	in := &awss3.GetObjectInput{Bucket: &f.s.bucket, Key: &f.o.Key, Range: &rng}
	if f.o.ETag != "" {
		in.IfMatch = &f.o.ETag
	}
	out, err := f.s.c.GetObject(ctx, in)
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		if isPrecondition(err) || isNotFound(err) {
			return &store.Error{Where: where, Op: "read", Err: store.ErrChanged}
		}
		return &store.Error{Where: where, Op: "read", Err: shorten(err)}
	}
	defer out.Body.Close()
	if e := aws.ToString(out.ETag); f.o.ETag != "" && e != "" && e != f.o.ETag {
		return &store.Error{Where: where, Op: "read", Err: store.ErrChanged}
	}
	if n := aws.ToInt64(out.ContentLength); n != int64(len(buf)) {
		return fmt.Errorf("asked for %d bytes, the response has %d", len(buf), n)
	}
	// A body that stops sending is dropped after the stall time.
	stall := f.s.c.set.stall
	t := time.AfterFunc(stall, cancel)
	defer t.Stop()
	got := 0
	for got < len(buf) {
		n, err := out.Body.Read(buf[got:])
		got += n
		if n > 0 {
			t.Reset(stall)
		}
		if err != nil {
			if got == len(buf) {
				break
			}
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return nil
}
