// Package replay is the orchestrator of the Cumulus granule writer: it
// reads messages from files, folders and standard input (Write) or from a
// Dead Letter Archive (Recover), writes them in batches with bounded
// concurrency, and archives every message that fails, so that each input
// ends written, dropped by the write constraints, or in the archive.
package replay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/backfill-dev/backfill/cumulus/dla"
	"github.com/backfill-dev/backfill/cumulus/message"
	"github.com/backfill-dev/backfill/cumulus/records"
	"github.com/backfill-dev/backfill/internal/store"
)

// Writer writes batches of messages (records.Writer).
type Writer interface {
	WriteBatch(ctx context.Context, ins []records.Input) ([]records.BatchResult, error)
}

// Options configure Write and Recover.
type Options struct {
	Batch       int             // messages per transaction (default 100)
	Concurrency int             // batches written at once (default 4)
	Decode      message.Options // remote messages
	Retries     int             // tries of a batch the database refuses whole (default 5)
	RetryWait   time.Duration   // first wait between tries, doubled each time (default 500ms)
	// Timeout bounds each try of a batch: past it, the try is dropped
	// with its connection and made again (default 10m). It ends a wait
	// on a database the network has gone silent on.
	Timeout time.Duration
	Log     func(string) // one line per archived or failed message; nil: none
	// MaxInFlight bounds the bytes of the messages read and not yet
	// written (their text, and the remote messages they load): reading
	// waits while the batches in flight hold that much, so a file of huge
	// messages costs memory in proportion to it, not to Batch times
	// Concurrency messages (default DefaultMaxInFlight). One message
	// larger than it goes alone.
	MaxInFlight int64
}

// DefaultMaxInFlight is Options.MaxInFlight's default.
const DefaultMaxInFlight = 64 << 20

func (o *Options) defaults() {
	if o.Batch <= 0 {
		o.Batch = 100
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 4
	}
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = DefaultMaxInFlight
	}
	if o.Retries <= 0 {
		o.Retries = 5
	}
	if o.RetryWait <= 0 {
		o.RetryWait = 500 * time.Millisecond
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Minute
	}
	if o.Log == nil {
		o.Log = func(string) {}
	}
}

// Stats count what became of the inputs.
type Stats struct {
	Messages int // inputs read
	OK       int // messages written without error
	Archived int // messages that failed: put in the archive (Write) or moved to failed-sqs (Recover)
	Deleted  int // Recover: records written and removed from the archive

	Granules        int // granules in the messages written
	GranulesWritten int
	GranulesDropped int // kept out by the write constraints (not an error)
	// GranulesMarked failed schema validation with a final status: their
	// records were set to status failed, as Cumulus does.
	GranulesMarked int
	GranulesFailed int // not written

	// Left counts what was left where it is, each named in the log: an
	// input that is not a regular file (Write), an entry of the archive
	// that is not a record (Recover).
	Left int
}

func (s *Stats) add(r records.BatchResult) {
	if r.Err == nil {
		s.OK++
	} else {
		s.Archived++
	}
	for _, g := range r.Result.Granules {
		s.Granules++
		switch g.Outcome {
		case records.Written:
			s.GranulesWritten++
		case records.Dropped:
			s.GranulesDropped++
		case records.MarkedFailed:
			s.GranulesMarked++
		default:
			s.GranulesFailed++
		}
	}
}

// job is one message on its way: where it came from, its envelope, and
// for Recover its archive key and text.
type job struct {
	where  string
	env    *message.Envelope
	key    string
	raw    []byte
	weight int64 // of Options.MaxInFlight it holds
}

// weigh sets j's weight: its text and remote message, at most the whole
// budget.
func (j *job) weigh(text int, budget int64) {
	j.weight = min(int64(text)+j.env.Remote, budget)
}

// pipeline runs the writers: batches of jobs in, each job's result to
// done, which is called from one goroutine at a time.
type pipeline struct {
	w      Writer
	opt    Options
	budget *semaphore.Weighted // Options.MaxInFlight
	mu     sync.Mutex
	stats  Stats
	done   func(j job, r records.BatchResult) error
}

// run writes the batches produce sends, with opt.Concurrency writers.
func (p *pipeline) run(ctx context.Context, produce func(ctx context.Context, send func(job) error) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	batches := make(chan []job)
	var wg sync.WaitGroup
	for range p.opt.Concurrency {
		wg.Go(func() {
			for b := range batches {
				if err := p.write(ctx, b); err != nil {
					cancel(err)
				}
			}
		})
	}
	var batch []job
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		select {
		case batches <- batch:
			batch = nil
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	p.budget = semaphore.NewWeighted(p.opt.MaxInFlight)
	err := produce(ctx, func(j job) error {
		if !p.budget.TryAcquire(j.weight) {
			// The batch being filled holds part of the budget: it goes
			// first, then this message waits for its share.
			if err := flush(); err != nil {
				return err
			}
			if err := p.budget.Acquire(ctx, j.weight); err != nil {
				return context.Cause(ctx)
			}
		}
		batch = append(batch, j)
		if len(batch) >= p.opt.Batch {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	close(batches)
	wg.Wait()
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	if err == nil {
		err = ctx.Err()
	}
	return err
}

// write writes one batch, retrying while the database refuses it whole,
// and gives its share of the budget back.
func (p *pipeline) write(ctx context.Context, b []job) error {
	defer func() {
		var w int64
		for _, j := range b {
			w += j.weight
		}
		p.budget.Release(w)
	}()
	ins := make([]records.Input, len(b))
	for i, j := range b {
		ins[i] = records.Input{Message: j.env.Message, Exception: j.env.Exception, StartDate: j.env.StartDate, StopDate: j.env.StopDate}
	}
	var res []records.BatchResult
	var err error
	wait := p.opt.RetryWait
	for try := 1; ; try++ {
		tctx, cancel := context.WithTimeout(ctx, p.opt.Timeout)
		res, err = p.w.WriteBatch(tctx, ins)
		if err != nil && tctx.Err() != nil && ctx.Err() == nil {
			err = fmt.Errorf("no answer from the database within %s (--pg-timeout)", p.opt.Timeout)
		}
		cancel()
		if err == nil || ctx.Err() != nil {
			break
		}
		if try == p.opt.Retries {
			return fmt.Errorf("database: %w (after %d tries; the messages from %s on are not all written, and running again is safe)", err, try, b[0].where)
		}
		p.opt.Log(fmt.Sprintf("database: %v; trying again in %v", err, wait))
		select {
		case <-time.After(wait):
		case <-ctx.Done():
		}
		wait *= 2
	}
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	// Every result of the batch is counted and handed on, even after one
	// that could not be (an archive that cannot be written): the counts
	// say what was written, and the error names the first input lost.
	var first error
	more := 0
	for i, j := range b {
		p.stats.add(res[i])
		if err := p.done(j, res[i]); err != nil {
			if first == nil {
				first = err
			} else {
				more++
			}
		}
	}
	if more > 0 {
		return fmt.Errorf("%w (and %d more of its batch)", first, more)
	}
	return first
}

// Write reads the messages of inputs (files of JSON lines or JSON
// documents, folders of them, "-" for stdin), writes them with w, and
// puts each message that fails in arch with its error.
func Write(ctx context.Context, inputs []string, stdin io.Reader, w Writer, arch *dla.Archive, opt Options) (Stats, error) {
	opt.defaults()
	archive := func(j job, errText string) error {
		key, err := arch.Put(ctx, message.DeadLetter(j.env, errText))
		if err != nil {
			opt.Log(fmt.Sprintf("%s: %s (NOT archived: %v)", j.where, errText, err))
			return fmt.Errorf("%s failed and could not be put in the archive: %w", j.where, err)
		}
		opt.Log(fmt.Sprintf("%s: %s (archived as %s)", j.where, errText, key))
		return nil
	}
	p := &pipeline{w: w, opt: opt}
	p.done = func(j job, r records.BatchResult) error {
		if r.Err == nil {
			return nil
		}
		return archive(j, r.Err.Error())
	}
	err := p.run(ctx, func(ctx context.Context, send func(job) error) error {
		refuse := func(name, why string) {
			p.mu.Lock()
			p.stats.Left++
			p.mu.Unlock()
			opt.Log(fmt.Sprintf("%s: %s: refused, left where it is", name, why))
		}
		skip := func(name, why string) { opt.Log(fmt.Sprintf("%s: %s: skipped", name, why)) }
		return eachInput(ctx, inputs, stdin, func(name string, r io.Reader) error {
			return message.Scan(ctx, r, func(it message.Item) error {
				where := name + ":" + it.Where()
				env, err := &message.Envelope{Meta: map[string]any{}}, it.Err
				if err == nil {
					env, err = message.Decode(it.Raw, opt.Decode)
				}
				if err != nil {
					p.mu.Lock()
					defer p.mu.Unlock()
					p.stats.Messages++
					p.stats.Archived++
					return archive(job{where: where, env: env}, err.Error())
				}
				p.mu.Lock()
				p.stats.Messages++
				p.mu.Unlock()
				j := job{where: where, env: env}
				j.weigh(len(it.Raw), opt.MaxInFlight)
				return send(j)
			})
		}, refuse, skip)
	})
	return p.stats, err
}

// eachInput opens each input in turn: "-" is stdin, a folder gives its
// files in name order, at any depth. Only regular files are read: a
// link inside a folder is followed when it leads to a regular file inside
// that folder; anything else (a link out of the folder or to a folder, a
// FIFO, a device, a socket; a named input that is not a regular file) is
// refused by name with refuse, and the others are read. Hidden files and
// folders inside a folder are left out, each named with skip.
func eachInput(ctx context.Context, inputs []string, stdin io.Reader, fn func(name string, r io.Reader) error, refuse, skip func(name, why string)) error {
	for _, in := range inputs {
		if in == "-" {
			if err := fn("stdin", stdin); err != nil {
				return err
			}
			continue
		}
		st, err := os.Stat(in)
		if err != nil {
			return err
		}
		if !st.IsDir() {
			f, err := store.OpenRegular(in)
			var nr *store.NotRegularError
			if errors.As(err, &nr) {
				refuse(in, store.KindOf(nr.Mode)+", not a regular file")
				continue
			}
			if err != nil {
				return err
			}
			err = fn(in, f)
			f.Close()
			if err != nil {
				return fmt.Errorf("%s: %w", in, err)
			}
			continue
		}
		if err := eachInFolder(ctx, in, fn, refuse, skip); err != nil {
			return err
		}
	}
	return nil
}

// eachInFolder is eachInput for the folder dir, read inside an os.Root so
// that no name leads out of it.
func eachInFolder(ctx context.Context, dir string, fn func(name string, r io.Reader) error, refuse, skip func(name, why string)) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	var files []string
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := filepath.Join(dir, filepath.FromSlash(p))
		switch {
		case p == ".":
			return nil
		case strings.HasPrefix(d.Name(), "."):
			skip(name, "hidden")
			if d.IsDir() {
				return fs.SkipDir
			}
		case d.IsDir():
		case d.Type().IsRegular():
			files = append(files, p)
		case d.Type()&fs.ModeSymlink != 0:
			st, err := root.Stat(p)
			switch {
			case err != nil:
				refuse(name, "a symbolic link that leads out of "+dir+" or nowhere")
			case !st.Mode().IsRegular():
				refuse(name, "a symbolic link to "+store.KindOf(st.Mode())+", not to a regular file")
			default:
				files = append(files, p)
			}
		default:
			refuse(name, store.KindOf(d.Type())+", not a regular file")
		}
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(files)
	for _, p := range files {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		name := filepath.Join(dir, filepath.FromSlash(p))
		f, err := root.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			return err
		}
		if f, err = store.Regular(f, name, false); err != nil {
			refuse(name, "not a regular file when opened")
			continue
		}
		err = fn(name, f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

// Recover writes every record of the archive's sqs/ folder with w: a
// record written is deleted; one that fails again is moved to
// failed-sqs/<date>/. Killed at any moment and run again, it ends with
// every record written or moved: a record leaves sqs/ only after its
// write has committed or its failed copy is stored.
func Recover(ctx context.Context, arch *dla.Archive, w Writer, opt Options) (Stats, error) {
	opt.defaults()
	p := &pipeline{w: w, opt: opt}
	fail := func(j job, errText string) error {
		dst, err := arch.Fail(ctx, j.key, j.raw, j.env.Meta["time"])
		if err != nil {
			return err
		}
		opt.Log(fmt.Sprintf("%s: %s (moved to failed-sqs/%s)", j.key, errText, dst))
		return nil
	}
	p.done = func(j job, r records.BatchResult) error {
		if r.Err != nil {
			return fail(j, r.Err.Error())
		}
		p.stats.Deleted++
		return arch.Delete(ctx, j.key)
	}
	stray := func(name, what string) error {
		p.mu.Lock()
		p.stats.Left++
		p.mu.Unlock()
		opt.Log(fmt.Sprintf("%s: %s: left in place", name, what))
		return nil
	}
	err := p.run(ctx, func(ctx context.Context, send func(job) error) error {
		return arch.List(ctx, false, func(key string) error {
			raw, err := arch.Read(ctx, key)
			var nr *store.NotRegularError
			var big *dla.TooLargeError
			switch {
			case errors.Is(err, fs.ErrNotExist):
				return nil // taken by a concurrent recovery
			case errors.As(err, &nr):
				return stray("sqs/"+key, store.KindOf(nr.Mode)+", not a record")
			case errors.As(err, &big):
				return stray("sqs/"+key, fmt.Sprintf("%d bytes, larger than any record (%d)", big.Size, dla.MaxRecord))
			case err != nil:
				return err
			}
			env, err := message.Decode(raw, opt.Decode)
			p.mu.Lock()
			p.stats.Messages++
			p.mu.Unlock()
			j := job{where: key, env: env, key: key, raw: raw}
			j.weigh(len(raw), opt.MaxInFlight)
			if err != nil {
				p.mu.Lock()
				defer p.mu.Unlock()
				p.stats.Archived++
				return fail(j, err.Error())
			}
			return send(j)
		}, stray)
	})
	return p.stats, err
}
