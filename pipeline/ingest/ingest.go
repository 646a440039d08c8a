// Package ingest is the first stage of a run: it reads bucket folders and
// turns them into stamped buckets, each report of each bucket with its OOIDs and every
// problem as a dead-letter record, and hands them on one at a time, in
// bucket order. It knows nothing of sinks: `run` loads what it stamps
// (package load), `audit` counts it.
//
// Four kinds of goroutine share the work, under one errgroup:
//
//	opener ──buckets, opened──▶ feeder ──containers──▶ workers (N) ──result per container──▶ emitter ──▶ emit
//	                              └──────────────────── buckets, in order ───────────────────▶ ┘
//
// The opener opens up to N buckets at once, ahead (listing each folder and
// reading its index once), and hands them on in order; the feeder queues
// each bucket's containers; each worker reads a container
// with its own reader.Readers; the emitter takes the buckets in name order
// and each bucket's containers in name order, so what it emits does not
// depend on the number of workers. A semaphore bounds the containers
// between feeder and emitter, which bounds memory whatever the corpus size.
package ingest

import (
	"context"
	"fmt"
	"sort"

	"golang.org/x/sync/errgroup"

	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/pipeline/deadletter"
	"github.com/backfill-dev/backfill/pipeline/ooid"
	"github.com/backfill-dev/backfill/pipeline/ooniuid"
	"github.com/backfill-dev/backfill/pipeline/reader"
	"github.com/backfill-dev/backfill/pipeline/reader/report"
	"github.com/backfill-dev/backfill/pipeline/stamped"
)

// Config says what to stamp.
type Config struct {
	In      store.Store // the folder of bucket folders: a local folder or an s3:// prefix
	Buckets []string    // to stamp; all bucket folders of In when empty
	Workers int         // containers read at once; 0 means 1
	Scheme  ooid.Scheme
	Format  reader.Format      // FormatAuto when empty
	Read    reader.ReadOptions // how containers are read, the ndx policy among them
	// Canned, when set, is a folder (or s3:// prefix) of the same buckets in canned form:
	// each autoclaved file is compared with its canned form.
	Canned  store.Store
	Version string // recorded in each bucket's Meta
	Source  string // recorded in each bucket's Meta: where In is, absolute
	// Skip, when set, is asked of each bucket, when its input is known:
	// first from its folder's listing alone (Meta.Listing set,
	// Meta.Fingerprint not), then, unless that skipped it, once its index
	// is read (Meta.Fingerprint set). A bucket it skips is emitted with
	// Skipped set and nothing more of it read. It is called from several
	// goroutines at once, never the emitter's.
	Skip func(stamped.Meta) bool
	// Progress, when set, is called from the emitter's goroutine after
	// every container.
	Progress func(Progress)
}

// Progress is how far the stamping is.
type Progress struct {
	BucketsTotal          int
	BytesIn, BytesTotal   int64 // compressed, of the buckets' files
	Reports, Measurements int64
}

// ListBuckets returns the bucket folders (YYYY-MM-DD names) of the folder
// or s3:// prefix fsys, in order.
func ListBuckets(ctx context.Context, fsys store.Store) ([]string, error) {
	ents, err := fsys.ReadDir(ctx, ".")
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

// Work is what a run will stamp.
type Work struct {
	Buckets []string // sorted
	Bytes   int64    // compressed, of their files but the indexes
}

// NewWork checks cfg and returns the work it names.
func NewWork(ctx context.Context, cfg Config) (Work, error) {
	var p Work
	if err := cfg.Scheme.Validate(); err != nil {
		return p, err
	}
	fsys := cfg.In
	names := cfg.Buckets
	if len(names) == 0 {
		var err error
		if names, err = ListBuckets(ctx, fsys); err != nil {
			return p, err
		}
	}
	p.Buckets = append([]string(nil), names...)
	sort.Strings(p.Buckets)
	for _, n := range p.Buckets {
		if !reader.IsBucketName(n) {
			return p, fmt.Errorf("%q is not a bucket name (YYYY-MM-DD)", n)
		}
	}
	// The folders are listed a few at a time: on S3 each is a request.
	sizes := make([]int64, len(p.Buckets))
	errs := make([]error, len(p.Buckets))
	var g errgroup.Group
	g.SetLimit(planListings)
	for i, n := range p.Buckets {
		g.Go(func() error {
			ents, err := fsys.ReadDir(ctx, n)
			switch {
			case store.Failed(err):
				errs[i] = err
			case err != nil:
				errs[i] = fmt.Errorf("bucket %s: no folder %s", n, fsys.Where(n))
			}
			for _, e := range ents {
				if info, err := e.Info(); err == nil && e.Name() != reader.IndexName {
					sizes[i] += info.Size()
				}
			}
			return nil
		})
	}
	_ = g.Wait() // each goroutine keeps its error in errs
	for i := range p.Buckets {
		if errs[i] != nil {
			return p, errs[i] // the first bucket's, whatever order they came in
		}
		p.Bytes += sizes[i]
	}
	return p, nil
}

// planListings bounds the bucket folders NewWork lists at once.
const planListings = 8

// Run stamps the buckets of plan (NewWork's, of cfg) and calls emit with
// each, in bucket order, from one goroutine. It stops at the first error
// of emit, of reading (not of the data: problems with the data are
// records), or of ctx.
func Run(ctx context.Context, cfg Config, plan Work, emit func(*stamped.Bucket) error) error {
	if cfg.Format == "" {
		cfg.Format = reader.FormatAuto
	}
	if cfg.Read.Ndx == "" {
		cfg.Read.Ndx = reader.NdxBlobs
	}
	if err := cfg.Format.Set(string(cfg.Format)); err != nil {
		return fmt.Errorf("format %w", err)
	}
	if err := cfg.Read.Ndx.Set(string(cfg.Read.Ndx)); err != nil {
		return fmt.Errorf("ndx policy %w", err)
	}
	cfg.Read.Canned = cfg.Canned != nil
	in, canned := cfg.In, cfg.Canned
	names := plan.Buckets
	prog := Progress{BucketsTotal: len(names), BytesTotal: plan.Bytes}
	workers := max(cfg.Workers, 1)
	g, ctx := errgroup.WithContext(ctx)
	tasks := make(chan task)
	jobs := make(chan *bucketJob, 2)
	sem := make(chan struct{}, 2*workers+2)

	// The opener opens up to workers buckets ahead of the feeder, at once
	// (reading an index is the whole work of --from-index), and hands them
	// on in order.
	opened := make(chan chan *bucketJob, workers)
	g.Go(func() error { // opener
		defer close(opened)
		for _, name := range names {
			f := make(chan *bucketJob, 1)
			select {
			case opened <- f:
			case <-ctx.Done():
				return ctx.Err()
			}
			g.Go(func() error {
				f <- open(ctx, cfg, in, canned, name)
				return nil
			})
		}
		return nil
	})
	g.Go(func() error { // feeder
		defer close(tasks)
		defer close(jobs)
		for f := range opened {
			var j *bucketJob
			select {
			case j = <-f:
			case <-ctx.Done():
				return ctx.Err()
			}
			if j.err != nil {
				return j.err
			}
			if j.bucket != nil && cfg.Skip != nil && cfg.Skip(j.out.Meta) {
				j.out.Skipped = true
			}
			if j.bucket != nil && !j.out.Skipped {
				j.results = make([]chan containerResult, len(j.bucket.Containers))
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
			rd := reader.NewReaders(cfg.Read)
			for t := range tasks {
				res, err := readContainer(ctx, rd, cfg.Scheme, t.job, t.i)
				if err != nil {
					return err
				}
				t.job.results[t.i] <- res
			}
			return nil
		})
	}
	g.Go(func() error { // emitter
		for j := range jobs {
			if err := j.collect(ctx, sem, &prog, cfg.Progress); err != nil {
				return err
			}
			if err := emit(&j.out); err != nil {
				return err
			}
		}
		return nil
	})
	return g.Wait()
}

// bucketJob is a bucket on its way through the pipeline.
type bucketJob struct {
	out     stamped.Bucket
	capper  deadletter.Capper // the bucket's records past deadletter.MaxListed, counted
	bucket  *reader.Bucket    // nil when the folder cannot be read
	canned  *reader.Bucket    // its canned form, with Config.Canned
	results []chan containerResult
	err     error // of the store, which stops the run
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

// open opens bucket name of in: its folder, its index and, with canned,
// its canned form. A bucket that cannot be read is a record of its own; a
// failure of the store is j.err, which stops the run.
func open(ctx context.Context, cfg Config, in, canned store.Store, name string) *bucketJob {
	j := &bucketJob{out: stamped.Bucket{Meta: stamped.Meta{Bucket: name, Scheme: cfg.Scheme, NdxPolicy: string(cfg.Read.Ndx), Version: cfg.Version, Source: cfg.Source, UIDs: cfg.Read.UIDs}}}
	if cfg.Skip != nil {
		l, err := reader.List(ctx, in, name)
		if store.Failed(err) {
			j.err = err
			return j
		}
		if err == nil {
			m := j.out.Meta
			m.Listing = l.Fingerprint
			if cfg.Skip(m) {
				j.out.Meta, j.out.Skipped, j.out.Size = m, true, l.Bytes
				return j
			}
		}
	}
	b, err := reader.OpenIn(ctx, in, name, cfg.Read.OpenOptions(cfg.Format))
	if store.Failed(err) {
		j.err = err
		return j
	}
	if err == nil && cfg.Read.UIDs && b.Format == reader.FormatAutoclaved && canned == nil {
		// Its files hold OONI's re-serialised JSON, not the raw bytes.
		j.err = fmt.Errorf("bucket %s is autoclaved: --measurement-uid hashes a measurement's raw bytes, which only the canned form holds; name the canned buckets with --canned DIR, or run over them", name)
		return j
	}
	if err != nil {
		j.out.Records = []deadletter.Record{{Bucket: name, Reason: deadletter.Unreadable, Message: err.Error()}}
		j.out.Meta.Fingerprint = "unreadable"
		return j
	}
	j.bucket, j.out.Meta.Fingerprint, j.out.Meta.Listing, j.out.Size = b, b.Fingerprint, b.Listing, b.Bytes
	j.record(b.Problems)
	if canned != nil && b.Format == reader.FormatAutoclaved {
		var p *deadletter.Record
		if j.canned, p, j.err = openCanned(ctx, canned, name); j.err != nil {
			return j
		}
		if p != nil && cfg.Read.UIDs {
			p.Message += "; its measurements get no content_hash nor measurement_uid"
		}
		if p != nil {
			j.out.Records = append(j.out.Records, *p)
		}
	}
	return j
}

// collect takes the bucket's container results in order into j.out.
func (j *bucketJob) collect(ctx context.Context, sem chan struct{}, prog *Progress, progress func(Progress)) error {
	if j.out.Skipped {
		prog.BytesIn += j.out.Size
		if progress != nil {
			progress(*prog)
		}
		return nil
	}
	for i := range j.results {
		var res containerResult
		select {
		case res = <-j.results[i]:
		case <-ctx.Done():
			return ctx.Err()
		}
		<-sem
		j.record(res.problems)
		j.out.Reports = append(j.out.Reports, res.reports...)
		j.out.BytesIn += res.stats.BytesIn
		j.out.BytesOut += res.stats.BytesOut
		for k := range res.reports {
			prog.Reports++
			prog.Measurements += int64(res.reports[k].N)
		}
		prog.BytesIn += j.bucket.Containers[i].Size
		if progress != nil {
			progress(*prog)
		}
	}
	j.out.Records = append(j.out.Records, j.capper.Rest()...)
	return nil
}

// record adds a container's records to the bucket's, past
// deadletter.MaxListed of a reason only counted.
func (j *bucketJob) record(recs []deadletter.Record) {
	for _, r := range recs {
		if j.capper.Keep(r) {
			j.out.Records = append(j.out.Records, r)
		}
	}
}

// openCanned opens the canned form of bucket name in fsys, or tells why it
// cannot be compared with.
func openCanned(ctx context.Context, fsys store.Store, name string) (*reader.Bucket, *deadletter.Record, error) {
	cb, err := reader.OpenIn(ctx, fsys, name, reader.Options{Format: reader.FormatAuto})
	switch {
	case store.Failed(err):
		return nil, nil, err
	case err != nil:
		return nil, &deadletter.Record{Bucket: name, Reason: deadletter.CannedMismatch, Message: "the canned form cannot be read (" + err.Error() + "); no orig_sha1 is checked"}, nil
	case cb.Format != reader.FormatCanned:
		return nil, &deadletter.Record{Bucket: name, Reason: deadletter.CannedMismatch, Message: cb.Dir + " is not a canned bucket; no orig_sha1 is checked"}, nil
	}
	return cb, nil, nil
}

// readContainer reads container i of j's bucket and stamps its reports.
func readContainer(ctx context.Context, rd *reader.Readers, scheme ooid.Scheme, j *bucketJob, i int) (containerResult, error) {
	b, c := j.bucket, j.bucket.Containers[i]
	var res containerResult
	problem := func(p deadletter.Record) { res.problems = append(res.problems, p) }
	// With UIDs, each measurement's identity, of the report being read.
	var ids []ooniuid.ID
	idsOf := ""
	var blob func(string, report.Measurement)
	if j.out.Meta.UIDs {
		blob = func(textname string, m report.Measurement) {
			if textname != idsOf {
				ids, idsOf = nil, textname
			}
			ids = append(ids, m.ID)
		}
	}
	st, err := rd.Read(ctx, b, j.canned, c, reader.Handler{
		Problem: problem,
		Blob:    blob,
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
			// so the output does not depend on --verify.
			sr := stamped.Report{Textname: r.Textname, Container: c.Name, Offset: r.Offset,
				Size: r.Stats.Size, SHA1: r.IndexSHA1, ID: id, N: r.Stats.N}
			if j.out.Meta.UIDs {
				if idsOf != r.Textname || len(ids) != int(r.Stats.N) {
					ids = make([]ooniuid.ID, r.Stats.N) // none read (an empty report)
				}
				sr.IDs, ids, idsOf = ids, nil, ""
			}
			res.reports = append(res.reports, sr)
		},
	})
	res.stats = st
	return res, err
}
