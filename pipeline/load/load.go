// Package load is the last stage of a run: it commits stamped buckets to a
// sink, one at a time (or, for a sink.Concurrent that settles its own
// verdicts, several at once), and settles the collision verdicts (docs/design.md §3) through one seam, the Settler.
//
//	ingest ──stamped.Bucket──▶ Loader ──Settle──▶ Settler
//	                              └──Begin/Report/DeadLetter/Commit──▶ sink.Sink
//
// Two Settlers implement the policy. The in-memory one (for Parquet and
// bulk loads, whose sinks are sink.Rewriters) keeps every report of the
// output in a collisions.Resolver and rewrites committed buckets whose
// verdicts change; the database one (for PostgreSQL, a
// sink.SelfSettling sink) leaves every verdict to the sink's own
// transaction. Both settle the same reports the same way.
package load

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/backfill-dev/backfill/pipeline/collisions"
	"github.com/backfill-dev/backfill/pipeline/deadletter"
	"github.com/backfill-dev/backfill/pipeline/ooid"
	"github.com/backfill-dev/backfill/pipeline/sink"
	"github.com/backfill-dev/backfill/pipeline/stamped"
)

// Settler settles the collision verdicts of the buckets a Loader commits,
// against every bucket of the output.
type Settler interface {
	// Start is told, before anything is committed, the buckets the run
	// will commit or keep (sorted); the others of the output stand as
	// they are.
	Start(ctx context.Context, buckets []string) error
	// Expect adds, after Start, the reports other writers of the same
	// plan commit (a scale-out load: the plan's other shards), on the
	// days the run's buckets (days) and their committed versions reach;
	// pending returns them, by day. A Settler that settles in the sink
	// has the sink settle against them as they commit, and calls nothing.
	Expect(ctx context.Context, days []int32, pending func(days []int32) ([]Pending, error)) error
	// Keep adds a committed bucket the run leaves as it is (--resume).
	Keep(ctx context.Context, bucket string) error
	// Settle decides the verdicts of the bucket's reports before it is
	// written: it sets their RejectedBy and returns the collision records
	// of the rejected ones, sorted. Committed buckets whose verdicts change
	// are brought in line first, so no two committed reports ever share
	// an ID.
	Settle(ctx context.Context, b *stamped.Bucket) ([]deadletter.Record, error)
	// Done is told that the bucket settled last has committed.
	Done(ctx context.Context, bucket string) error
	// Finish brings every verdict in line once all buckets are known.
	Finish(ctx context.Context) error
}

// SettlerFor returns the Settler of s: in memory for a sink.Rewriter (a
// Rewriter wins: a bulk load is one, though its connection could settle),
// in the sink for a sink.SelfSettling one.
func SettlerFor(s sink.Sink, scheme ooid.Scheme) (Settler, error) {
	switch s := s.(type) {
	case sink.Rewriter:
		return NewMemory(scheme, s), nil
	case sink.SelfSettling:
		return InSink{}, nil
	}
	return nil, fmt.Errorf("load: sink %T neither settles collisions itself nor can be rewritten", s)
}

// InSink is the Settler of a sink that settles the verdicts itself, in
// the transaction that commits each bucket: it leaves every report as
// kept, and the sink rejects the losers.
type InSink struct{}

var _ Settler = InSink{}

func (InSink) Start(context.Context, []string) error { return nil }
func (InSink) Expect(context.Context, []int32, func([]int32) ([]Pending, error)) error {
	return nil
}
func (InSink) Keep(context.Context, string) error { return nil }
func (InSink) Finish(context.Context) error       { return nil }
func (InSink) Done(context.Context, string) error { return nil }
func (InSink) Settle(context.Context, *stamped.Bucket) ([]deadletter.Record, error) {
	return nil, nil
}

// Loader commits stamped buckets to a sink. Commit is safe for
// Commits() goroutines at once; Start, Keep and Finish for one.
type Loader struct {
	s       sink.Sink
	settler Settler
}

// New returns a Loader of s, with the Settler SettlerFor chooses.
func New(s sink.Sink, scheme ooid.Scheme) (*Loader, error) {
	st, err := SettlerFor(s, scheme)
	if err != nil {
		return nil, err
	}
	return &Loader{s: s, settler: st}, nil
}

// Commits returns how many buckets the Loader commits at once: those of a
// sink.Concurrent whose verdicts it settles itself, else one.
func (l *Loader) Commits() int {
	if c, ok := l.s.(sink.Concurrent); ok {
		if _, ok := l.settler.(InSink); ok {
			return max(1, c.Commits())
		}
	}
	return 1
}

// Forbid makes the run refuse to withdraw the IDs of a committed report
// (--no-withdraw): a commit that would fails with a *sink.WithdrawError.
// A sink that settles collisions itself is told so by its own options.
func (l *Loader) Forbid() {
	if m, ok := l.settler.(*Memory); ok {
		m.Forbid()
	}
}

// Withdrawn returns the committed reports whose IDs the run withdrew
// (sink.Withdrawal), sorted by bucket and textname.
func (l *Loader) Withdrawn() []sink.Withdrawal {
	var out []sink.Withdrawal
	if m, ok := l.settler.(*Memory); ok {
		out = m.Withdrawn()
	} else if w, ok := l.s.(sink.Withdrawer); ok {
		out = w.Withdrawn()
	}
	slices.SortFunc(out, func(a, b sink.Withdrawal) int {
		return cmp.Or(cmp.Compare(a.Bucket, b.Bucket), cmp.Compare(a.Textname, b.Textname))
	})
	return slices.CompactFunc(out, func(a, b sink.Withdrawal) bool { return a.Bucket == b.Bucket && a.Textname == b.Textname })
}

// Start tells the settler the buckets of the run.
func (l *Loader) Start(ctx context.Context, buckets []string) error {
	return l.settler.Start(ctx, buckets)
}

// Keep leaves a committed bucket as it is.
func (l *Loader) Keep(ctx context.Context, b *stamped.Bucket) error {
	return l.settler.Keep(ctx, b.Meta.Bucket)
}

// Expect tells the settler of the reports the plan's other shards
// commit (Settler.Expect).
func (l *Loader) Expect(ctx context.Context, days []int32, pending func([]int32) ([]Pending, error)) error {
	return l.settler.Expect(ctx, days, pending)
}

// Finish settles what only the whole output shows.
func (l *Loader) Finish(ctx context.Context) error { return l.settler.Finish(ctx) }

// Commit settles the bucket's verdicts, writes it and commits it, and
// returns what it committed. An error wrapping sink.ErrSkipped means the
// sink left the bucket to another run.
func (l *Loader) Commit(ctx context.Context, b *stamped.Bucket) (c stamped.Counts, err error) {
	collided, err := l.settler.Settle(ctx, b)
	if err != nil {
		return c, err
	}
	bw, err := l.s.Begin(ctx, b.Meta)
	if err != nil {
		return c, err
	}
	defer func() {
		if err != nil {
			bw.Abort()
		}
	}()
	c = stamped.NewCounts()
	dead := func(d deadletter.Record) error {
		d = d.Classified()
		c.Add(d)
		return bw.DeadLetter(d)
	}
	for _, d := range b.Records {
		if err := dead(d); err != nil {
			return c, err
		}
	}
	for i := range b.Reports {
		r := &b.Reports[i]
		if err := bw.Report(r); err != nil {
			return c, err
		}
		if r.RejectedBy == "" {
			c.Reports++
			c.Measurements += int64(r.N)
		}
	}
	for _, d := range collided {
		if err := dead(d); err != nil {
			return c, err
		}
	}
	c.BytesIn, c.BytesOut = b.BytesIn, b.BytesOut
	if c, err = bw.Commit(ctx, c); err != nil {
		return c, err
	}
	return c, l.settler.Done(ctx, b.Meta.Bucket)
}

// collisionRecords returns the collision records of b's rejected reports,
// in the order a bucket lists them; msgs are their messages, by report.
func collisionRecords(b *stamped.Bucket, msgs []string) []deadletter.Record {
	var out []deadletter.Record
	for i := range b.Reports {
		if b.Reports[i].RejectedBy != "" {
			out = append(out, collisions.Record(b.Meta.Bucket, &b.Reports[i], msgs[i]))
		}
	}
	collisions.SortRecords(out)
	return out
}
