package job

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"github.com/backfill-dev/backfill/pipeline/collisions"
	"github.com/backfill-dev/backfill/pipeline/ooid"
	"github.com/backfill-dev/backfill/pipeline/sink"
	"github.com/backfill-dev/backfill/pipeline/stamped"
)

// verdicts keeps the collision verdicts of every report of the output,
// committed before the run or in it, and what the sink holds of them.
//
// A run loads the report manifests of the committed buckets it does not
// rewrite, adds each bucket's reports before committing it, and tells the
// sink of every committed report whose verdict changes (docs/design.md §3: the
// textname that sorts first keeps its IDs). A report only loses to one
// whose textname sorts first, which lives in the same bucket or an earlier
// one, so buckets run in order never change the buckets of the same run;
// the changes fall on buckets committed before, out of order.
//
// With a sink that is not a sink.Rewriter, verdicts does nothing: every
// report is written as kept and the sink settles the verdicts itself.
type verdicts struct {
	scheme    ooid.Scheme
	s         sink.Rewriter // nil: the sink settles the verdicts
	res       *collisions.Resolver
	buckets   []string // by tag
	persisted []string // by ref: the winner the sink holds ("" none)
}

func newVerdicts(scheme ooid.Scheme, s sink.Sink) *verdicts {
	v := &verdicts{scheme: scheme, res: collisions.NewResolver(scheme.CounterBits)}
	v.s, _ = s.(sink.Rewriter)
	return v
}

// start loads the committed buckets that are not among names (sorted).
func (v *verdicts) start(ctx context.Context, names []string) error {
	if v.s == nil {
		return nil
	}
	committed, err := v.s.Buckets(ctx)
	if err != nil {
		return err
	}
	for _, b := range committed {
		if _, in := slices.BinarySearch(names, b); !in {
			if err := v.load(ctx, b); err != nil {
				return err
			}
		}
	}
	return nil
}

func (v *verdicts) tag(bucket string) uint32 {
	v.buckets = append(v.buckets, bucket)
	return uint32(len(v.buckets) - 1)
}

// load adds a committed bucket's reports as the sink holds them.
func (v *verdicts) load(ctx context.Context, bucket string) error {
	if v.s == nil {
		return nil
	}
	m, reports, err := v.s.Manifest(ctx, bucket)
	if err != nil {
		return err
	}
	if m.Scheme != v.scheme {
		return fmt.Errorf("bucket %s of the output was made under %s and this run uses %s: IDs of two schemes cannot be checked against each other; rerun that bucket too, or write to another folder",
			bucket, m.Scheme, v.scheme)
	}
	tag := v.tag(bucket)
	for _, r := range reports {
		id, err := m.Scheme.Report(r.Textname)
		if err != nil {
			return fmt.Errorf("bucket %s: committed report %s: %w", bucket, r.Textname, err)
		}
		v.res.Add(r.Textname, collisions.RangeOf(id, r.N), tag)
		v.persisted = append(v.persisted, r.RejectedBy)
	}
	return nil
}

// add adds a report of the bucket being written and returns its ref and
// the refs of other buckets' reports whose verdict changed.
func (v *verdicts) add(r *stamped.Report, tag uint32, others []uint32) (uint32, []uint32) {
	if v.s == nil {
		return 0, others
	}
	ref, changed := v.res.Add(r.Textname, collisions.RangeOf(r.ID, r.N), tag)
	v.persisted = append(v.persisted, "")
	for _, c := range changed {
		if v.res.Tag(c) != tag {
			others = append(others, c)
		}
	}
	return ref, others
}

// winner returns the textname of the report that keeps the IDs ref would
// share, and the dead-letter message; "" when ref keeps its own.
func (v *verdicts) winner(ref uint32) (string, string) {
	if v.s == nil {
		return "", ""
	}
	w, ok := v.res.Winner(ref)
	if !ok {
		return "", ""
	}
	return v.res.Name(w), collisions.Message(v.res.Name(w), v.res.Range(w), v.res.Range(ref), v.res.Bits())
}

// written records what the sink now holds of a report.
func (v *verdicts) written(ref uint32, winner string) {
	if v.s != nil {
		v.persisted[ref] = winner
	}
}

// sync tells the sink of every verdict among refs that differs from what
// it holds, bucket by bucket.
func (v *verdicts) sync(ctx context.Context, refs []uint32) error {
	byBucket := map[uint32][]uint32{}
	for _, ref := range refs {
		if w, _ := v.winner(ref); w != v.persisted[ref] {
			byBucket[v.res.Tag(ref)] = append(byBucket[v.res.Tag(ref)], ref)
		}
	}
	tags := make([]uint32, 0, len(byBucket))
	for t := range byBucket {
		tags = append(tags, t)
	}
	sort.Slice(tags, func(i, j int) bool { return v.buckets[tags[i]] < v.buckets[tags[j]] })
	for _, t := range tags {
		var vs []stamped.Verdict
		seen := map[uint32]bool{}
		for _, ref := range byBucket[t] {
			if seen[ref] {
				continue
			}
			seen[ref] = true
			w, msg := v.winner(ref)
			vs = append(vs, stamped.Verdict{Textname: v.res.Name(ref), RejectedBy: w, Message: msg})
		}
		if err := v.s.Reassign(ctx, v.buckets[t], vs); err != nil {
			return fmt.Errorf("bucket %s: recording collision verdicts: %w", v.buckets[t], err)
		}
		for _, ref := range byBucket[t] {
			v.persisted[ref], _ = v.winner(ref)
		}
	}
	return nil
}

// reconcile syncs every report: at the end of a run, when every bucket of
// the output is known, verdicts that differ (buckets committed by runs that
// did not see each other, a winner whose bucket changed) are set right.
func (v *verdicts) reconcile(ctx context.Context) error {
	if v.s == nil {
		return nil
	}
	refs := make([]uint32, v.res.Len())
	for i := range refs {
		refs[i] = uint32(i)
	}
	return v.sync(ctx, refs)
}
