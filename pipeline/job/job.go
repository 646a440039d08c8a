// Package job is the orchestrator of `backfill run`: it joins the two
// stages, ingest and load, and keeps the run's summary.
//
//	bucket folders ──▶ ingest.Run ──stamped.Bucket, in order──▶ queue ──▶ load.Loader ──▶ sink.Sink
//	                       ▲                                                 │
//	                       └──────── Skip: the sink's state, read once ──────┘
//
// The two stages run side by side: while the loader commits a bucket, the
// ingest stage reads the next ones (the queue holds Lookahead stamped
// buckets: their reports' IDs and names, a few hundred bytes a report,
// never the measurements' bytes, so memory stays bounded). The
// sink's state is read once, before anything is stamped: the buckets
// --resume skips are known without asking the sink again, so the sink is
// only ever called from the loader's goroutine.
package job

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/pipeline/deadletter"
	"github.com/backfill-dev/backfill/pipeline/ingest"
	"github.com/backfill-dev/backfill/pipeline/load"
	"github.com/backfill-dev/backfill/pipeline/ooid"
	"github.com/backfill-dev/backfill/pipeline/reader"
	"github.com/backfill-dev/backfill/pipeline/sink"
	"github.com/backfill-dev/backfill/pipeline/stamped"
)

// Config says what to run.
type Config struct {
	In      store.Store // the folder of bucket folders
	Buckets []string    // to run; all bucket folders when empty
	Workers int         // containers read at once; 0 means 1
	Scheme  ooid.Scheme
	Resume  bool // skip buckets the sink has committed with the same input and scheme
	// Source is where In is (an absolute path or an s3:// URL), recorded
	// in each bucket's ledger entry. A bucket committed from another
	// source is not replaced, unless Replace: the run fails first with a
	// *sink.OtherSourceError.
	Source  string
	Replace bool
	// NoWithdraw refuses to commit a bucket that would withdraw the IDs
	// of a committed report (sink.WithdrawError); without it the run
	// withdraws them, names them in the summary and counts them as
	// rejects. A PostgreSQL sink is told by its own options too.
	NoWithdraw bool
	MaxBlob    int64 // blob size over which a measurement is flagged; 0 for the default
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
	// UIDs gives every measurement OONI's identity of it, its content
	// hash and measurement_uid (--measurement-uid; canned buckets only).
	UIDs bool
	// Canned, when set, is a folder of the same buckets in canned form:
	// each autoclaved file is compared with its canned form
	// (reader.CannedCheck), which checks every orig_sha1.
	Canned store.Store
	// InputRecords are the dead-letter records of the folders beside the
	// buckets that are not read (ingest.Input.Records): counted in the
	// summary, and kept by a sink that is a [sink.InputRecorder].
	InputRecords []deadletter.Record
	Version      string
	// Progress, when set, is called after every container and every
	// bucket, never twice at once.
	Progress func(Progress)
}

// Lookahead is how many stamped buckets wait for the loader while it
// commits one: the ingest stage reads on meanwhile.
const Lookahead = 4

// ingest returns the configuration of the ingest stage.
func (cfg Config) ingest() ingest.Config {
	return ingest.Config{In: cfg.In, Buckets: cfg.Buckets, Workers: cfg.Workers, Scheme: cfg.Scheme, Format: cfg.Format,
		Read:   reader.ReadOptions{Ndx: cfg.Ndx, MaxBlob: cfg.MaxBlob, Verify: cfg.VerifySHA1, FromIndex: cfg.FromIndex, UIDs: cfg.UIDs},
		Canned: cfg.Canned, Version: cfg.Version, Source: cfg.Source}
}

// Progress is how far a run is.
type Progress struct {
	Buckets, BucketsTotal int   // committed or skipped, of all
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
	// Ignored are the folders under the input that were not read: a
	// reject each when it holds bucket files (misnamed_bucket), else a
	// notice (not_a_bucket).
	Ignored []string `json:"ignored_folders,omitempty"`
	// Withdrawn are the committed reports whose IDs the run withdrew
	// (sink.Withdrawal): each is a reject, counted once (in its bucket's
	// counts when the bucket is in the run's scope, else on its own).
	Withdrawn []sink.Withdrawal `json:"withdrawn,omitempty"`
	// Written is the measurements of the buckets this run committed;
	// BytesIn and BytesOut what it read of them.
	Written  int64         `json:"measurements_written"`
	BytesIn  int64         `json:"compressed_bytes_read"`
	BytesOut int64         `json:"decompressed_bytes_read"`
	Elapsed  time.Duration `json:"-"`
	// Strays are the files of the output's folders that no committed
	// bucket holds (a sink.StrayFinder's), once the run is done: a run
	// with any completes with exit 3, naming them.
	Strays []string `json:"stray_files,omitempty"`
	// FromIndex is set for a run that read autoclaved buckets' indexes
	// alone: it read no container, and says so rather than "0 B".
	FromIndex bool `json:"from_index,omitempty"`
}

// add adds a bucket's committed counts.
func (s *Summary) add(c stamped.Counts) {
	s.Tally.Add(c)
	for r, n := range c.DeadLetters {
		s.Reasons[r] += n
		s.DeadLetters += n
	}
}

// Run runs the backfill into s. Problems with the data become dead-letter
// records; the error is for the run itself (a sink failure, ctx).
func Run(ctx context.Context, cfg Config, s sink.Sink) (sum Summary, err error) {
	start := time.Now()
	sum = Summary{Reasons: map[string]int64{}, Tally: stamped.NewTally(), FromIndex: cfg.FromIndex}
	defer func() { sum.Elapsed = time.Since(start) }()
	scfg := cfg.ingest()
	plan, err := ingest.NewWork(ctx, scfg)
	if err != nil {
		return sum, err
	}
	committed, err := committedState(ctx, s)
	if err != nil {
		return sum, err
	}
	if !cfg.Replace {
		if err := sink.CheckSource(cfg.Source, plan.Buckets, committed); err != nil {
			return sum, err
		}
	}
	if err := sink.OneScheme(cfg.Scheme, cfg.policy(), plan.Buckets, committed); err != nil {
		return sum, err
	}
	if cfg.NoWithdraw {
		if err := sameNumbering(cfg, plan.Buckets, committed); err != nil {
			return sum, err
		}
	}
	ld, err := load.New(s, cfg.Scheme)
	if err != nil {
		return sum, err
	}
	if cfg.NoWithdraw {
		ld.Forbid()
	}
	// The collision verdicts start from the committed buckets this run
	// leaves alone; the others are added as they are written or kept.
	if err := ld.Start(ctx, plan.Buckets); err != nil {
		return sum, err
	}
	if err := recordInput(ctx, cfg.InputRecords, s, &sum); err != nil {
		return sum, err
	}
	if cfg.Resume {
		scfg.Skip = func(m stamped.Meta) bool { return sameMeta(committed[m.Bucket].Meta, m) }
	}
	prog := Progress{BucketsTotal: len(plan.Buckets), BytesTotal: plan.Bytes}
	var progMu sync.Mutex // the ingest stage and the loader both report
	report := func(update func(*Progress)) {
		progMu.Lock()
		defer progMu.Unlock()
		update(&prog)
		if cfg.Progress != nil {
			cfg.Progress(prog)
		}
	}
	scfg.Progress = func(p ingest.Progress) {
		report(func(prog *Progress) {
			prog.BytesIn, prog.Reports, prog.Measurements = p.BytesIn, p.Reports, p.Measurements
		})
	}
	var sumMu sync.Mutex // the loader's goroutines all add to sum
	commit := func(b *stamped.Bucket) error {
		defer report(func(prog *Progress) { prog.Buckets++ })
		if b.Skipped {
			sumMu.Lock()
			defer sumMu.Unlock()
			sum.add(committed[b.Meta.Bucket].Counts)
			sum.Skipped++
			return ld.Keep(ctx, b)
		}
		c, err := ld.Commit(ctx, b)
		sumMu.Lock()
		defer sumMu.Unlock()
		switch {
		case errors.Is(err, sink.ErrSkipped):
			// The sink left the bucket to another run: committed by it
			// meanwhile, or still being loaded. Its counts are those
			// the output holds once the run is done (recount), not read
			// here: the ledger is read once, not once a bucket.
			sum.Skipped++
			return nil
		case err != nil:
			var we *sink.WithdrawError
			if fr, ok := s.(sink.FailureRecorder); ok && ctx.Err() == nil && !errors.As(err, &we) {
				fr.RecordFailure(ctx, b.Meta, err)
			}
			return err
		}
		sum.Buckets++
		sum.add(c)
		sum.Written += c.Measurements
		sum.BytesIn += c.BytesIn
		sum.BytesOut += c.BytesOut
		return nil
	}
	// The loader commits with ctx, so a commit under way is not cut short
	// when reading fails; it takes no further bucket once either stage
	// has failed. A sink that commits several buckets at once
	// (sink.Concurrent) gets that many goroutines taking buckets in turn;
	// Keep, for a skipped bucket, is then a no-op of its Settler.
	g, gctx := errgroup.WithContext(ctx)
	queue := make(chan *stamped.Bucket, Lookahead)
	g.Go(func() error {
		defer close(queue)
		return ingest.Run(gctx, scfg, plan, func(b *stamped.Bucket) error {
			select {
			case queue <- b:
				return nil
			case <-gctx.Done():
				return gctx.Err()
			}
		})
	})
	for range ld.Commits() {
		g.Go(func() error {
			for b := range queue {
				if err := gctx.Err(); err != nil {
					return err
				}
				if err := commit(b); err != nil {
					return err
				}
			}
			return nil
		})
	}
	err = g.Wait()
	if err == nil {
		err = ld.Finish(ctx)
	}
	sum.Withdrawn = ld.Withdrawn()
	if err == nil {
		err = sum.recount(ctx, s, plan.Buckets, cfg.InputRecords)
	}
	if sf, ok := s.(sink.StrayFinder); ok && err == nil {
		sum.Strays, err = sf.Strays(ctx)
	}
	return sum, err
}

// recount computes the summary's counts from what the output holds once
// the run is done, not from what the run added up as it went: the
// buckets of the run's scope as the sink holds them committed (those
// --resume skipped, and those whose verdicts changed after they were
// committed, included), the input's records, and a collision reject for
// each withdrawal outside the scope. So an interrupted run resumed gives
// the counts an uninterrupted one does.
func (sum *Summary) recount(ctx context.Context, s sink.Sink, scope []string, input []deadletter.Record) error {
	states, err := s.State(ctx)
	if err != nil {
		return err
	}
	sum.Tally, sum.Reasons, sum.DeadLetters = stamped.NewTally(), map[string]int64{}, 0
	var c stamped.Counts
	for _, r := range input {
		c.Add(r)
	}
	sum.add(c)
	in := map[string]bool{}
	for _, b := range scope {
		in[b] = true
	}
	for _, st := range states {
		if st.Status == stamped.StatusCommitted && in[st.Meta.Bucket] {
			sum.add(st.Counts)
		}
	}
	// A withdrawal is a reject of the run that made it: a collision's
	// outside the scope (those inside are the buckets' own collision
	// records), every other cause's (the bucket written again holds no
	// record of what it no longer has).
	var out stamped.Counts
	for _, w := range sum.Withdrawn {
		switch {
		case w.Cause != sink.CauseCollision:
			out.Add(deadletter.Record{Bucket: w.Bucket, Textname: w.Textname, Reason: deadletter.Withdrawn})
		case !in[w.Bucket]:
			out.AddCollisions(1)
		}
	}
	sum.add(out)
	return nil
}

// sameNumbering refuses, before anything is written, a run that forbids
// withdrawals and would write a committed bucket of its scope under
// another scheme (every ID changes) or ndx policy (a report's IDs are
// renumbered where the policies count its blobs otherwise, which only
// reading every bucket would tell).
func sameNumbering(cfg Config, scope []string, committed map[string]stamped.State) error {
	policy := cfg.policy()
	for _, b := range scope {
		st, ok := committed[b]
		if !ok || (st.Meta.Scheme.Equal(cfg.Scheme) && st.Meta.NdxPolicy == policy) {
			continue
		}
		return fmt.Errorf("bucket %s was committed under %s with --ndx %s; writing it under %s with --ndx %s would withdraw or renumber IDs it published: refused before anything was written (--no-withdraw)",
			b, st.Meta.Scheme, st.Meta.NdxPolicy, cfg.Scheme, policy)
	}
	return nil
}

// policy is the ndx policy the run writes with.
func (cfg Config) policy() string {
	if cfg.Ndx == "" {
		return string(reader.NdxBlobs)
	}
	return string(cfg.Ndx)
}

// committedState returns the committed buckets of the ledger of s.
func committedState(ctx context.Context, s sink.Sink) (map[string]stamped.State, error) {
	states, err := s.State(ctx)
	if err != nil {
		return nil, err
	}
	return stamped.Committed(states), nil
}

// recordInput counts the input's records in sum and has the sink keep
// them, before any bucket: an interrupted run has recorded them too.
func recordInput(ctx context.Context, recs []deadletter.Record, s sink.Sink, sum *Summary) error {
	var c stamped.Counts
	for _, r := range recs {
		sum.Ignored = append(sum.Ignored, r.File)
		c.Add(r)
	}
	sum.add(c)
	if ir, ok := s.(sink.InputRecorder); ok {
		return ir.RecordInput(ctx, recs)
	}
	return nil
}

// sameMeta reports whether a bucket committed with a was made as b would
// be: the same input (the same fingerprint, or the same listing where the
// output keeps one and b has not read its index), scheme and ndx policy,
// with or without OONI's identities of its measurements.
func sameMeta(a, b stamped.Meta) bool {
	sameInput := a.Fingerprint == b.Fingerprint
	if b.Fingerprint == "" {
		sameInput = a.Listing != "" && a.Listing == b.Listing
	}
	return a.Bucket == b.Bucket && sameInput && a.Scheme.Equal(b.Scheme) && a.NdxPolicy == b.NdxPolicy && a.UIDs == b.UIDs
}
