// Package job is the orchestrator of a backfill run: it walks the bucket
// folders, reads their containers on a pool of workers, stamps every
// measurement with its OOID and hands each bucket, in a deterministic
// order, to a sink that commits it atomically.
//
// Three kinds of goroutine share the work, under one errgroup:
//
//	feeder ──tasks──▶ workers (N) ──result per container──▶ writer ──▶ sink
//	   └──────────────── buckets, in order ─────────────────▶ ┘
//
// The feeder opens one bucket at a time and queues its containers; each
// worker reads a container with its own reader and decompressor; the
// writer takes the buckets in name order and each bucket's containers in
// name order, so the output does not depend on the number of workers. A
// semaphore bounds the containers between feeder and writer, which bounds
// memory whatever the corpus size.
package job

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/backfill-dev/backfill/pipeline/deadletter"
	"github.com/backfill-dev/backfill/pipeline/ooid"
	"github.com/backfill-dev/backfill/pipeline/reader"
	"github.com/backfill-dev/backfill/pipeline/sink"
	"github.com/backfill-dev/backfill/pipeline/stamped"
)

// Config says what to run.
type Config struct {
	In      string   // the folder of bucket folders
	Buckets []string // to run; all bucket folders when empty
	Workers int      // containers read at once; 0 means 1
	Scheme  ooid.Scheme
	Resume  bool  // skip buckets the sink has committed with the same input and scheme
	MaxBlob int64 // blob size over which a measurement is flagged; 0 for the default
	// VerifySHA1 checks every report's and file's SHA-1 against the index
	// too (sizes and CRC-32s always are); it costs about half the CPU.
	VerifySHA1 bool
	// Format is the bucket layout: reader.FormatAuto (detected per
	// bucket, the default when empty), FormatCanned or FormatAutoclaved.
	Format reader.Format
	// FromIndex enumerates autoclaved buckets from their index alone,
	// reading no data; canned buckets are read as usual.
	FromIndex bool
	// Ndx is reader.NdxBlobs (the default when empty) or NdxDatums.
	Ndx reader.Ndx
	// Canned, when set, is a folder of the same buckets in canned form:
	// each autoclaved file is compared with its canned form
	// (reader.CannedCheck), which checks every orig_sha1.
	Canned string
	// Ignored are folders beside the buckets whose names are not bucket
	// dates (Input.Ignored); each is a notice of the summary.
	Ignored []string
	Version string
	// Progress, when set, is called by one goroutine after every
	// container.
	Progress func(Progress)
}

// Progress is how far a run is.
type Progress struct {
	Buckets, BucketsTotal int
	BytesIn, BytesTotal   int64 // compressed
	Reports, Measurements int64
}

// Summary is what a run did, and the state it leaves: its counts cover
// every bucket in scope, those --resume skipped included (as their
// ledger records them), so they do not depend on how the run was started.
type Summary struct {
	Buckets int `json:"buckets"` // committed by this run
	Skipped int `json:"skipped"` // already committed (--resume), or loaded by another run
	// Tally's rejects are the records that lost an input or left a report
	// or measurement without IDs; its notices the others.
	stamped.Tally
	// DeadLetters counts every record, Reasons by reason.
	DeadLetters int64            `json:"dead_letters"`
	Reasons     map[string]int64 `json:"dead_letters_by_reason"`
	// Ignored are the folders under the input that are not buckets, each
	// counted as a notice (reason not_a_bucket).
	Ignored []string `json:"ignored_folders,omitempty"`
	// Written is the measurements of the buckets this run committed;
	// BytesIn and BytesOut what it read of them.
	Written  int64         `json:"measurements_written"`
	BytesIn  int64         `json:"compressed_bytes_read"`
	BytesOut int64         `json:"decompressed_bytes_read"`
	Elapsed  time.Duration `json:"-"`
}

// add adds a bucket's committed counts.
func (s *Summary) add(c stamped.Counts) {
	s.Tally.Add(c)
	for r, n := range c.DeadLetters {
		s.Reasons[r] += n
		s.DeadLetters += n
	}
}

// ListBuckets returns the bucket folders of dir (YYYY-MM-DD names) in
// order.
func ListBuckets(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() && reader.IsBucketName(e.Name()) {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

type bucketJob struct {
	meta     stamped.Meta
	bucket   *reader.Bucket
	canned   *reader.Bucket  // its canned form, with Config.Canned
	skip     *stamped.Counts // committed already (--resume): its counts
	results  []chan containerResult
	problems []deadletter.Record
}

type containerResult struct {
	reports  []stamped.Report
	problems []deadletter.Record
	stats    reader.ContainerStats
}

type task struct {
	job *bucketJob
	i   int
}

// Run runs the backfill into s. Problems with the data become dead-letter
// records; the error is for the run itself (a sink failure, ctx).
func Run(ctx context.Context, cfg Config, s sink.Sink) (Summary, error) {
	start := time.Now()
	sum := Summary{Reasons: map[string]int64{}, Tally: stamped.NewTally()}
	for _, name := range cfg.Ignored {
		sum.Ignored = append(sum.Ignored, name)
		sum.DeadLetters++
		sum.Notices++
		sum.Reasons[deadletter.NotABucket]++
		sum.NoticesByReason[deadletter.NotABucket]++
	}
	if err := cfg.Scheme.Validate(); err != nil {
		return sum, err
	}
	if cfg.Ndx == "" {
		cfg.Ndx = reader.NdxBlobs
	}
	if err := cfg.Ndx.Set(string(cfg.Ndx)); err != nil {
		return sum, fmt.Errorf("ndx policy %w", err)
	}
	if cfg.Format == "" {
		cfg.Format = reader.FormatAuto
	}
	if err := cfg.Format.Set(string(cfg.Format)); err != nil {
		return sum, fmt.Errorf("format %w", err)
	}
	names := cfg.Buckets
	if len(names) == 0 {
		var err error
		if names, err = ListBuckets(cfg.In); err != nil {
			return sum, err
		}
	}
	names = append([]string(nil), names...)
	sort.Strings(names)
	prog := Progress{BucketsTotal: len(names)}
	for _, n := range names {
		if !reader.IsBucketName(n) {
			return sum, fmt.Errorf("%q is not a bucket name (YYYY-MM-DD)", n)
		}
		st, err := os.Stat(filepath.Join(cfg.In, n))
		if err != nil || !st.IsDir() {
			return sum, fmt.Errorf("bucket %s: no folder %s", n, filepath.Join(cfg.In, n))
		}
		ents, _ := os.ReadDir(filepath.Join(cfg.In, n))
		for _, e := range ents {
			if info, err := e.Info(); err == nil && e.Name() != reader.IndexName {
				prog.BytesTotal += info.Size()
			}
		}
	}
	// The collision verdicts start from the committed buckets this run
	// leaves alone; the others are added as they are written or skipped.
	// A sink that is not a Rewriter settles them itself.
	col := newVerdicts(cfg.Scheme, s)
	if err := col.start(ctx, names); err != nil {
		return sum, err
	}
	workers := max(cfg.Workers, 1)
	g, ctx := errgroup.WithContext(ctx)
	tasks := make(chan task)
	jobs := make(chan *bucketJob, 2)
	sem := make(chan struct{}, 2*workers+2)

	g.Go(func() error { // feeder
		defer close(tasks)
		defer close(jobs)
		for _, name := range names {
			j := &bucketJob{meta: stamped.Meta{Bucket: name, Scheme: cfg.Scheme, NdxPolicy: string(cfg.Ndx), Version: cfg.Version}}
			b, err := reader.Open(filepath.Join(cfg.In, name), cfg.readOptions().OpenOptions(cfg.Format))
			if err != nil {
				j.problems = []deadletter.Record{{Bucket: name, Reason: deadletter.Unreadable, Message: err.Error()}}
				j.meta.Fingerprint = "unreadable"
			} else {
				j.bucket, j.problems, j.meta.Fingerprint = b, b.Problems, b.Fingerprint
				if cfg.Canned != "" && b.Format == reader.FormatAutoclaved {
					var p *deadletter.Record
					j.canned, p = openCanned(cfg.Canned, name)
					if p != nil {
						j.problems = append(j.problems, *p)
					}
				}
			}
			if cfg.Resume && j.bucket != nil {
				c, err := s.Committed(ctx, j.meta)
				if err != nil {
					return err
				}
				j.skip = c
			}
			if j.bucket != nil && j.skip == nil {
				j.results = make([]chan containerResult, len(b.Containers))
				for i := range j.results {
					j.results[i] = make(chan containerResult, 1)
				}
			}
			select {
			case jobs <- j:
			case <-ctx.Done():
				return ctx.Err()
			}
			for i := range j.results {
				select {
				case sem <- struct{}{}:
				case <-ctx.Done():
					return ctx.Err()
				}
				select {
				case tasks <- task{j, i}:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
		}
		return nil
	})
	for range workers {
		g.Go(func() error {
			rd := reader.NewReaders(cfg.readOptions())
			for t := range tasks {
				res, err := readContainer(ctx, rd, cfg, t.job, t.i)
				if err != nil {
					return err
				}
				t.job.results[t.i] <- res
			}
			return nil
		})
	}
	g.Go(func() error { // writer
		for j := range jobs {
			if j.skip == nil {
				err := writeBucket(ctx, s, j, col, &sum, &prog, sem, cfg)
				if errors.Is(err, sink.ErrSkipped) { // the sink left the bucket to another run
					// Committed by it meanwhile (its counts are known),
					// or still being loaded (they are not).
					c, err := s.Committed(ctx, j.meta)
					if err != nil {
						return err
					}
					if c != nil {
						sum.add(*c)
					}
					sum.Skipped++
					prog.Buckets++
					report(cfg, prog)
					continue
				}
				if err != nil {
					if fr, ok := s.(sink.FailureRecorder); ok && ctx.Err() == nil {
						fr.RecordFailure(j.meta, err)
					}
					return err
				}
				continue
			}
			if err := col.load(ctx, j.meta.Bucket); err != nil {
				return err
			}
			sum.add(*j.skip)
			sum.Skipped++
			prog.Buckets++
			prog.BytesIn += j.bucket.Bytes
			report(cfg, prog)
		}
		return nil
	})
	err := g.Wait()
	if err == nil {
		err = col.reconcile(ctx)
	}
	sum.Elapsed = time.Since(start)
	return sum, err
}

func report(cfg Config, p Progress) {
	if cfg.Progress != nil {
		cfg.Progress(p)
	}
}

// writeBucket takes a bucket's container results in order, settles the
// collision verdicts of its reports (telling the sink first of any
// committed report that now loses to one of them, so no two committed
// reports ever share an ID), then writes the bucket and commits it.
func writeBucket(ctx context.Context, s sink.Sink, j *bucketJob, col *verdicts, sum *Summary, prog *Progress, sem chan struct{}, cfg Config) (err error) {
	results := make([]containerResult, len(j.results))
	for i := range j.results {
		select {
		case results[i] = <-j.results[i]:
		case <-ctx.Done():
			return ctx.Err()
		}
		<-sem
		for k := range results[i].reports {
			prog.Reports++
			prog.Measurements += int64(results[i].reports[k].N)
		}
		prog.BytesIn += j.bucket.Containers[i].Size
		report(cfg, *prog)
	}
	tag := col.tag(j.meta.Bucket)
	var refs [][]uint32
	var others []uint32
	for i := range results {
		rs := make([]uint32, len(results[i].reports))
		for k := range results[i].reports {
			rs[k], others = col.add(&results[i].reports[k], tag, others)
		}
		refs = append(refs, rs)
	}
	if err := col.sync(ctx, others); err != nil {
		return err
	}

	bw, err := s.Begin(ctx, j.meta)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			bw.Abort()
		}
	}()
	counts := stamped.NewCounts()
	dead := func(d deadletter.Record) error {
		d = d.Classified()
		counts.Add(d)
		return bw.DeadLetter(d)
	}
	for _, p := range j.problems {
		if err := dead(p); err != nil {
			return err
		}
	}
	var collided []deadletter.Record
	for i, res := range results {
		for _, p := range res.problems {
			if err := dead(p); err != nil {
				return err
			}
		}
		for k := range res.reports {
			r := &res.reports[k]
			var msg string
			r.RejectedBy, msg = col.winner(refs[i][k])
			col.written(refs[i][k], r.RejectedBy)
			if err := bw.Report(r); err != nil {
				return err
			}
			if r.RejectedBy != "" {
				collided = append(collided, stamped.CollisionRecord(j.meta.Bucket, r, msg))
				continue
			}
			counts.Reports++
			counts.Measurements += int64(r.N)
		}
		counts.BytesIn += res.stats.BytesIn
		counts.BytesOut += res.stats.BytesOut
	}
	slices.SortStableFunc(collided, func(a, b deadletter.Record) int { return strings.Compare(a.Textname, b.Textname) })
	for _, d := range collided {
		if err := dead(d); err != nil {
			return err
		}
	}
	if counts, err = bw.Commit(ctx, counts); err != nil {
		return err
	}
	sum.Buckets++
	prog.Buckets++
	sum.add(counts)
	sum.Written += counts.Measurements
	sum.BytesIn += counts.BytesIn
	sum.BytesOut += counts.BytesOut
	report(cfg, *prog)
	return nil
}

// openCanned opens the canned form of bucket name under dir, or tells
// why it cannot be compared with.
func openCanned(dir, name string) (*reader.Bucket, *deadletter.Record) {
	cb, err := reader.Open(filepath.Join(dir, name), reader.Options{Format: reader.FormatAuto})
	switch {
	case err != nil:
		return nil, &deadletter.Record{Bucket: name, Reason: deadletter.CannedMismatch, Message: "the canned form cannot be read (" + err.Error() + "); no orig_sha1 is checked"}
	case cb.Format != reader.FormatCanned:
		return nil, &deadletter.Record{Bucket: name, Reason: deadletter.CannedMismatch, Message: cb.Dir + " is not a canned bucket; no orig_sha1 is checked"}
	}
	return cb, nil
}

func (cfg Config) readOptions() reader.ReadOptions {
	return reader.ReadOptions{Ndx: cfg.Ndx, MaxBlob: cfg.MaxBlob, Verify: cfg.VerifySHA1, FromIndex: cfg.FromIndex, Canned: cfg.Canned != ""}
}

// readContainer reads container i of j's bucket and stamps its reports.
func readContainer(ctx context.Context, rd *reader.Readers, cfg Config, j *bucketJob, i int) (containerResult, error) {
	b, c := j.bucket, j.bucket.Containers[i]
	var res containerResult
	scheme := cfg.Scheme
	problem := func(p deadletter.Record) { res.problems = append(res.problems, p) }
	st, err := rd.Read(ctx, b, j.canned, c, reader.Handler{
		Problem: problem,
		Report: func(r reader.ContainerReport) {
			reject := func(reason, msg string) {
				problem(deadletter.Record{Bucket: b.Date, File: c.Name, Textname: r.Textname, Offset: r.Offset, Reason: reason, Message: msg})
			}
			id, err := scheme.Report(r.Textname)
			switch {
			case err != nil:
				reject(deadletter.BadTextname, err.Error())
				return
			case id.Bucket.String() != b.Date:
				reject(deadletter.BadTextname, fmt.Sprintf("the textname's bucket is %s, the report is in bucket %s", id.Bucket, b.Date))
				return
			case uint64(r.Stats.N) > uint64(scheme.Mask())+1:
				reject(deadletter.Collision, fmt.Sprintf("%d measurements: more than the 2^%d counter values, so the report's IDs would collide with each other", r.Stats.N, scheme.CounterBits))
				return
			}
			// The SHA-1 is the index's, whether or not it was verified,
			// so the output does not depend on --verify-sha1.
			res.reports = append(res.reports, stamped.Report{Textname: r.Textname, Container: c.Name, Offset: r.Offset,
				Size: r.Stats.Size, SHA1: r.IndexSHA1, ID: id, N: r.Stats.N})
		},
	})
	res.stats = st
	return res, err
}
