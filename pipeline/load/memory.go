package load

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/backfill-dev/backfill/pipeline/collisions"
	"github.com/backfill-dev/backfill/pipeline/deadletter"
	"github.com/backfill-dev/backfill/pipeline/ooid"
	"github.com/backfill-dev/backfill/pipeline/sink"
	"github.com/backfill-dev/backfill/pipeline/stamped"
)

// Memory is the in-memory Settler: it keeps the collision verdicts of
// every report of the output, committed before the run or in it, and what
// the sink holds of them.
//
// It loads the report manifests of the committed buckets the run does not
// rewrite that the run's reports can reach (of a sink.Zoned, those whose
// zone meets a settled bucket's, read when the first such bucket is
// settled; of any other sink, all of them, at Start: two reports that
// share no day share no ID, and so neither do the chains of reports
// whose verdicts depend on each other), adds each bucket's reports before it is committed, and tells
// the sink of every committed report whose verdict changes (the textname
// that sorts first keeps its IDs). A report only loses to one whose
// textname sorts first, which lives in the same bucket or an earlier one,
// so buckets run in order never change the buckets of the same run; the
// changes fall on buckets committed before, out of order.
//
// A committed report of a bucket the run keeps that loses its IDs, or one
// of a bucket the run writes again that kept them before, is a withdrawal
// (sink.Withdrawal): Withdrawn lists them. With forbid set, the run
// refuses one instead (a *sink.WithdrawError, before anything of the
// bucket is written or any committed bucket changes): every committed
// report that keeps its IDs and that the run can reach is loaded into a
// second resolver, the published one, which each bucket is checked
// against before it is settled.
type Memory struct {
	scheme    ooid.Scheme
	s         sink.Rewriter
	res       *collisions.Resolver
	buckets   []string          // by tag
	persisted map[uint32]string // by ref: the winner the sink holds, where there is one
	kept      map[uint32]bool   // the tags of the buckets committed before the run and kept
	before    map[string]bool   // the buckets committed when the run started
	withdrawn []sink.Withdrawal
	forbid    bool
	pub       *collisions.Resolver // with forbid: the reports that keep their IDs in the output (tagged i+1 for pubOf[i]), and the run's (0)
	pubOf     []string
	// settling is the bucket being settled; journaled is set while the
	// journal of its settlement is kept (sink.Journal); repairing, for
	// the Settler that repairs a settlement left unfinished, which keeps
	// none.
	settling             string
	journaled, repairing bool
	// The zones of the committed buckets (none when the sink is not
	// sink.Zoned); those not read yet, by bucket and by day; and the days
	// reached by the buckets settled so far.
	zones   map[string]*stamped.Zone
	waiting map[string]*waiting
	byDay   map[int32][]*waiting
	reached map[int32]bool
	// pending are the tags of the reports other writers of the same plan
	// commit (Expect): settled against, never written.
	pending map[uint32]bool
	names   []string // the buckets of Start
	// The settlement's journal (sink.Journal): every committed report
	// whose verdict a writer changed since the journal began, with its
	// verdict before the first change (a writer that stopped left the
	// first entries: prior, by textname); kept until the run's end,
	// when the withdrawals it holds are named. named are the reports
	// named so far.
	log   []sink.SettlingChange
	prior map[string]sink.SettlingChange
	named map[string]bool
	// unpublished are, with forbid, the reports that had IDs before a
	// writer that stopped left their bucket uncommitted: published, for
	// the run to refuse what would take their IDs.
	unpublished []sink.Withdrawal
}

var _ Settler = (*Memory)(nil)

// NewMemory returns the in-memory Settler of s.
func NewMemory(scheme ooid.Scheme, s sink.Rewriter) *Memory {
	return &Memory{scheme: scheme, s: s, res: collisions.NewResolver(scheme.CounterBits), persisted: map[uint32]string{},
		kept: map[uint32]bool{}, before: map[string]bool{}, waiting: map[string]*waiting{}, byDay: map[int32][]*waiting{}, reached: map[int32]bool{},
		pending: map[uint32]bool{}, prior: map[string]sink.SettlingChange{}, named: map[string]bool{}}
}

// Forbid makes the Settler refuse any withdrawal (--no-withdraw).
func (v *Memory) Forbid() { v.forbid = true }

// Withdrawn returns the withdrawals so far, in the order they were made.
func (v *Memory) Withdrawn() []sink.Withdrawal { return slices.Clone(v.withdrawn) }

// Start registers the committed buckets: those not among names (sorted)
// are kept as they are, and with forbid every committed report that keeps
// its IDs is published. A committed bucket's reports of a day are read
// when the first bucket the run settles reaches that day (their zones
// meet, see sink.Zoned); a bucket whose zone the sink cannot say is read
// at once, for its zone.
func (v *Memory) Start(ctx context.Context, names []string) error {
	if !v.repairing {
		if err := v.repair(ctx); err != nil {
			return err
		}
	}
	var committed []string
	var err error
	if z, ok := v.s.(sink.Zoned); ok {
		if v.zones, err = z.Zones(ctx); err != nil {
			return err
		}
		committed = slices.Sorted(maps.Keys(v.zones))
	} else if committed, err = v.s.Buckets(ctx); err != nil {
		return err
	}
	if v.forbid {
		v.pub = collisions.NewResolver(v.scheme.CounterBits)
		for _, w := range v.unpublished {
			v.pubOf = append(v.pubOf, w.Bucket)
			id, err := v.scheme.Report(w.Textname)
			if err != nil {
				return fmt.Errorf("bucket %s: report %s of the journal: %w", w.Bucket, w.Textname, err)
			}
			v.pub.Add(w.Textname, collisions.RangeOf(id, w.N), uint32(len(v.pubOf)))
		}
		if err := v.pub.Err(); err != nil {
			return err
		}
	}
	v.names = names
	for _, b := range committed {
		v.before[b] = true
		_, in := slices.BinarySearch(names, b)
		if in && !v.forbid {
			continue
		}
		w, err := v.waitFor(ctx, b)
		if err != nil {
			return err
		}
		w.keep, w.pub = !in, v.forbid
	}
	return nil
}

// waiting is a committed bucket the run reads a day at a time: its
// reports of a day are added once a bucket the run settles reaches the
// day, and not before (those of the other days may lose to, or beat,
// reports of buckets not read yet).
type waiting struct {
	bucket    string
	zone      stamped.Zone
	keep, pub bool // to be added to the resolver, to the published one
	pending   bool // reports another writer of the plan commits (Expect)
	// Read once the first of its days is reached: its meta, its
	// reports by day, and the days added to each resolver so far.
	m              *stamped.Meta
	byDay          map[int32][]stamped.ManifestEntry
	kept, pubd     map[int32]bool
	tag, pubTag    uint32
	tagged, pubbed bool
}

// waitFor returns the waiting bucket of a committed bucket, registered
// under each of its days; one whose zone the sink cannot say is read
// now.
func (v *Memory) waitFor(ctx context.Context, bucket string) (*waiting, error) {
	if w := v.waiting[bucket]; w != nil {
		return w, nil
	}
	w := &waiting{bucket: bucket, kept: map[int32]bool{}, pubd: map[int32]bool{}}
	if z := v.zones[bucket]; z != nil {
		w.zone = *z
	} else if err := v.read(ctx, w); err != nil {
		return nil, err
	}
	v.waiting[bucket] = w
	for _, d := range w.zone.Days {
		v.byDay[d] = append(v.byDay[d], w)
	}
	return w, nil
}

// read reads a waiting bucket's manifest; a bucket without a zone gets
// the zone of its reports.
func (v *Memory) read(ctx context.Context, w *waiting) error {
	m, reports, err := v.s.Manifest(ctx, w.bucket)
	if err != nil {
		return err
	}
	w.m, w.byDay = &m, map[int32][]stamped.ManifestEntry{}
	var days []int32
	for _, r := range reports {
		t, err := ooid.ParseTextname(r.Textname)
		if err != nil {
			return fmt.Errorf("bucket %s: committed report %s: %w", w.bucket, r.Textname, err)
		}
		d := stamped.Day(t.TS)
		w.byDay[d] = append(w.byDay[d], r)
		days = append(days, d)
	}
	if v.zones[w.bucket] == nil { // a zone the sink keeps, it checked against the manifest
		w.zone = stamped.NewZone(days)
	}
	return nil
}

// reach adds the reports of every committed bucket waiting on a day of
// z, before a bucket of zone z is settled.
func (v *Memory) reach(ctx context.Context, z stamped.Zone) error {
	for _, d := range z.Days {
		if v.reached[d] {
			continue
		}
		v.reached[d] = true
		for _, w := range v.byDay[d] {
			if err := v.add(ctx, w, d); err != nil {
				return err
			}
		}
	}
	return nil
}

// add adds a waiting bucket's reports of day d to what asks for them.
func (v *Memory) add(ctx context.Context, w *waiting, d int32) error {
	if (!w.keep || w.kept[d]) && (!w.pub || w.pubd[d]) {
		return nil
	}
	if w.m == nil {
		if err := v.read(ctx, w); err != nil {
			return err
		}
	}
	if w.pub && !w.pubd[d] {
		w.pubd[d] = true
		if !w.m.Scheme.Equal(v.scheme) {
			return fmt.Errorf("bucket %s of the output was made under %s: writing it under %s would withdraw every ID it holds (--no-withdraw)", w.bucket, w.m.Scheme, v.scheme)
		}
		if !w.pubbed {
			v.pubOf = append(v.pubOf, w.bucket)
			w.pubTag, w.pubbed = uint32(len(v.pubOf)), true
		}
		if err := v.publish(w.bucket, w.pubTag, w.byDay[d]); err != nil {
			return err
		}
	}
	if w.keep && !w.kept[d] {
		w.kept[d] = true
		if !w.tagged {
			if err := v.sameScheme(w.bucket, *w.m); err != nil {
				return err
			}
			w.tag, w.tagged = v.tag(w.bucket), true
			v.kept[w.tag], v.pending[w.tag] = !w.pending, w.pending
		}
		return v.keep(w.bucket, w.tag, w.byDay[d])
	}
	return nil
}

// publish adds the reports of a committed bucket that keep their IDs to
// the published resolver, under tag.
func (v *Memory) publish(bucket string, tag uint32, reports []stamped.ManifestEntry) error {
	for _, r := range reports {
		if r.RejectedBy != "" {
			continue
		}
		id, err := v.scheme.Report(r.Textname)
		if err != nil {
			return fmt.Errorf("bucket %s: committed report %s: %w", bucket, r.Textname, err)
		}
		v.pub.Add(r.Textname, collisions.RangeOf(id, r.N), tag)
	}
	return v.pub.Err()
}

// checkPublished refuses the bucket when one of its reports would take
// the IDs of a report that keeps them in the output (forbid).
func (v *Memory) checkPublished(b *stamped.Bucket) error {
	var ws []sink.Withdrawal
	for i := range b.Reports {
		r := &b.Reports[i]
		ref, changed := v.pub.Add(r.Textname, collisions.RangeOf(r.ID, r.N), 0)
		for _, c := range changed {
			if c == ref || v.pub.Tag(c) == 0 || v.pub.Name(c) == r.Textname {
				continue // the run's own, or the report itself published
			}
			ws = append(ws, sink.Withdrawal{Bucket: v.pubOf[v.pub.Tag(c)-1], Textname: v.pub.Name(c), N: v.pub.Range(c).N, Winner: r.Textname, Cause: sink.CauseCollision})
		}
	}
	if err := v.pub.Err(); err != nil {
		return err
	}
	if len(ws) > 0 {
		return &sink.WithdrawError{Bucket: b.Meta.Bucket, Withdrawals: ws}
	}
	return nil
}

func (v *Memory) tag(bucket string) uint32 {
	v.buckets = append(v.buckets, bucket)
	return uint32(len(v.buckets) - 1)
}

// Pending is a report that another writer of the same plan commits (a
// shard of a plan loaded by another process): the Settler settles
// against it, as against a committed report, and never writes it.
type Pending struct {
	Bucket string
	Report stamped.ManifestEntry
}

// Expect adds the reports other writers of the run's plan commit
// (Pending), on the days the run can reach: days, those of the reports
// of the buckets it will commit, and those of their committed versions.
// pending returns the reports on a set of days; it is called once. The
// buckets of the pending reports are among those Start was told of, so
// their committed versions are not kept.
func (v *Memory) Expect(ctx context.Context, days []int32, pending func(days []int32) ([]Pending, error)) error {
	all := slices.Clone(days)
	for _, b := range v.names {
		if v.before[b] {
			w, err := v.waitFor(ctx, b)
			if err != nil {
				return err
			}
			all = append(all, w.zone.Days...)
		}
	}
	ps, err := pending(stamped.NewZone(all).Days)
	if err != nil {
		return err
	}
	byBucket := map[string]*waiting{}
	var order []*waiting
	for _, p := range ps {
		w := byBucket[p.Bucket]
		if w == nil {
			w = &waiting{bucket: p.Bucket, keep: true, pending: true, m: &stamped.Meta{Bucket: p.Bucket, Scheme: v.scheme},
				byDay: map[int32][]stamped.ManifestEntry{}, kept: map[int32]bool{}, pubd: map[int32]bool{}}
			byBucket[p.Bucket] = w
			order = append(order, w)
		}
		id, err := v.scheme.Report(p.Report.Textname)
		if err != nil {
			return fmt.Errorf("bucket %s of the plan: report %s: %w", p.Bucket, p.Report.Textname, err)
		}
		d := stamped.Day(id.TS)
		w.byDay[d] = append(w.byDay[d], p.Report)
	}
	for _, w := range order {
		var ds []int32
		for d := range w.byDay {
			ds = append(ds, d)
		}
		w.zone = stamped.NewZone(ds)
		for _, d := range w.zone.Days {
			v.byDay[d] = append(v.byDay[d], w)
			if v.reached[d] {
				if err := v.add(ctx, w, d); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// Keep adds a committed bucket's reports as the sink holds them, a day
// at a time as buckets the run settles reach it; a sink.Zoned checks the
// bucket first (what it checks, the other sinks' Manifest does).
func (v *Memory) Keep(ctx context.Context, bucket string) error {
	if z, ok := v.s.(sink.Zoned); ok {
		if err := z.Check(ctx, bucket); err != nil {
			return err
		}
	}
	w, err := v.waitFor(ctx, bucket)
	if err != nil {
		return err
	}
	w.keep = true
	for _, d := range w.zone.Days {
		if v.reached[d] {
			if err := v.add(ctx, w, d); err != nil {
				return err
			}
		}
	}
	return nil
}

func (v *Memory) sameScheme(bucket string, m stamped.Meta) error {
	if !m.Scheme.Equal(v.scheme) {
		return fmt.Errorf("bucket %s of the output was made under %s and this run uses %s: IDs of two schemes cannot be checked against each other; rerun that bucket too, or write to another folder",
			bucket, m.Scheme, v.scheme)
	}
	return nil
}

// keep adds reports of a committed bucket, under its tag.
func (v *Memory) keep(bucket string, tag uint32, reports []stamped.ManifestEntry) error {
	for _, r := range reports {
		id, err := v.scheme.Report(r.Textname)
		if err != nil {
			return fmt.Errorf("bucket %s: committed report %s: %w", bucket, r.Textname, err)
		}
		ref, _ := v.res.Add(r.Textname, collisions.RangeOf(id, r.N), tag)
		if !v.pending[tag] {
			v.persist(ref, r.RejectedBy)
		}
	}
	return v.res.Err()
}

// persist records the winner the sink holds for ref ("" none).
func (v *Memory) persist(ref uint32, winner string) {
	if winner == "" {
		delete(v.persisted, ref)
		return
	}
	v.persisted[ref] = winner
}

// Settle adds the bucket's reports, rewrites the committed buckets whose
// verdicts change, and sets the bucket's own verdicts.
func (v *Memory) Settle(ctx context.Context, b *stamped.Bucket) ([]deadletter.Record, error) {
	// The bucket reaches the days of its reports, and those of the
	// reports its committed version held (a report it no longer holds
	// may have kept IDs that another report now gets back).
	v.settling = b.Meta.Bucket
	dropVerdicts(b)
	z := stamped.ZoneOf(b.Reports)
	if v.before[b.Meta.Bucket] {
		w, err := v.waitFor(ctx, b.Meta.Bucket)
		if err != nil {
			return nil, err
		}
		z = stamped.NewZone(append(z.Days, w.zone.Days...))
	}
	if err := v.reach(ctx, z); err != nil {
		return nil, err
	}
	var was map[string]uint32 // the reports that kept their IDs in the bucket as committed before, and their measurements
	var rewritten []sink.Withdrawal
	if v.before[b.Meta.Bucket] {
		var old stamped.Meta
		old, was = v.keptBefore(ctx, b.Meta.Bucket)
		rewritten = sink.Rewrites(b, old, was)
	}
	if v.forbid {
		if len(rewritten) > 0 {
			return nil, &sink.WithdrawError{Bucket: b.Meta.Bucket, Withdrawals: rewritten}
		}
		if err := v.checkPublished(b); err != nil {
			return nil, err
		}
	}
	for _, w := range rewritten {
		v.withdraw(w)
	}
	tag := v.tag(b.Meta.Bucket)
	refs := make([]uint32, len(b.Reports))
	var others []uint32
	for i := range b.Reports {
		r := &b.Reports[i]
		var changed []uint32
		refs[i], changed = v.res.Add(r.Textname, collisions.RangeOf(r.ID, r.N), tag)
		for _, c := range changed {
			if v.res.Tag(c) != tag {
				others = append(others, c)
			}
		}
	}
	if err := v.sync(ctx, others); err != nil {
		return nil, err
	}
	msgs := make([]string, len(b.Reports))
	for i := range b.Reports {
		r := &b.Reports[i]
		r.RejectedBy, msgs[i] = v.winner(refs[i])
		v.persist(refs[i], r.RejectedBy)
		if r.RejectedBy != "" && was[r.Textname] > 0 {
			v.withdraw(sink.Withdrawal{Bucket: b.Meta.Bucket, Textname: r.Textname, N: r.N, Winner: r.RejectedBy, Cause: sink.CauseCollision})
		}
	}
	if err := v.res.Err(); err != nil {
		return nil, err
	}
	return collisionRecords(b, msgs), nil
}

// dropVerdicts drops the collision verdicts a bucket comes with (a
// plan's, settled by check) and their records: the Settler decides them
// again, from every report it knows, the plan's other shards' included
// (Expect).
func dropVerdicts(b *stamped.Bucket) {
	rejected := map[string]bool{}
	for i := range b.Reports {
		if b.Reports[i].RejectedBy != "" {
			rejected[b.Reports[i].Textname] = true
			b.Reports[i].RejectedBy = ""
		}
	}
	if len(rejected) > 0 {
		b.Records = slices.DeleteFunc(b.Records, func(d deadletter.Record) bool { return d.Reason == deadletter.Collision && rejected[d.Textname] })
	}
}

// keptBefore returns how a committed bucket the run writes again was
// made, and the reports that keep their IDs in it, with their
// measurements; none when its manifest cannot be read (the bucket is
// replaced whole, and what it held is not known).
func (v *Memory) keptBefore(ctx context.Context, bucket string) (stamped.Meta, map[string]uint32) {
	m, reports, err := v.s.Manifest(ctx, bucket)
	if err != nil {
		return m, nil
	}
	out := map[string]uint32{}
	for _, r := range reports {
		if r.RejectedBy == "" && r.N > 0 {
			out[r.Textname] = r.N
		}
	}
	return m, out
}

// winner returns the textname of the report that keeps the IDs ref would
// share, and the dead-letter message; "" when ref keeps its own.
func (v *Memory) winner(ref uint32) (string, string) {
	w, ok := v.res.Winner(ref)
	if !ok {
		return "", ""
	}
	return v.res.Name(w), collisions.Message(v.res.Name(w), v.res.Range(w), v.res.Range(ref), v.res.Bits())
}

// sync tells the sink of every verdict among refs that differs from what
// it holds, bucket by bucket.
func (v *Memory) sync(ctx context.Context, refs []uint32) error {
	byBucket := map[uint32][]uint32{}
	for _, ref := range refs {
		if v.pending[v.res.Tag(ref)] {
			continue // another writer of the plan commits it
		}
		if w, _ := v.winner(ref); w != v.persisted[ref] {
			byBucket[v.res.Tag(ref)] = append(byBucket[v.res.Tag(ref)], ref)
		}
	}
	tags := make([]uint32, 0, len(byBucket))
	for t := range byBucket {
		tags = append(tags, t)
	}
	sort.Slice(tags, func(i, j int) bool { return v.buckets[tags[i]] < v.buckets[tags[j]] })
	if err := v.journal(ctx, tags, byBucket); err != nil {
		return err
	}
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
			if w != "" && v.persisted[ref] == "" && v.kept[t] && v.res.Range(ref).N > 0 {
				v.withdraw(sink.Withdrawal{Bucket: v.buckets[t], Textname: v.res.Name(ref), N: v.res.Range(ref).N, Winner: w, Cause: sink.CauseCollision})
			}
		}
		if err := v.res.Err(); err != nil {
			return err // the textnames could not be read back
		}
		if j, ok := v.s.(sink.Journal); ok && (v.journaled || v.repairing) {
			if err := j.Keep(ctx, v.buckets[t]); err != nil {
				return err
			}
		}
		if err := v.s.Reassign(ctx, v.scheme, v.buckets[t], vs); err != nil {
			return fmt.Errorf("bucket %s: recording collision verdicts: %w", v.buckets[t], err)
		}
		for _, ref := range byBucket[t] {
			w, _ := v.winner(ref)
			v.persist(ref, w)
		}
	}
	return nil
}

// journal records, before the first committed bucket changes, the
// changes of a sync (sink.Journal): a run killed before the bucket it
// settles commits leaves them for the next to undo or to name.
func (v *Memory) journal(ctx context.Context, tags []uint32, byBucket map[uint32][]uint32) error {
	j, ok := v.s.(sink.Journal)
	if !ok || v.repairing || len(tags) == 0 {
		return nil
	}
	in := map[string]int{}
	for i, c := range v.log {
		in[c.Textname] = i
	}
	for _, t := range tags {
		for _, ref := range byBucket[t] {
			w, _ := v.winner(ref)
			c := sink.SettlingChange{Bucket: v.buckets[t], Textname: v.res.Name(ref), N: v.res.Range(ref).N, Before: v.persisted[ref], After: w}
			if i, ok := in[c.Textname]; ok {
				v.log[i].After = w // the verdict before the first change stays
				continue
			}
			in[c.Textname] = len(v.log)
			v.log = append(v.log, c)
		}
	}
	if err := v.res.Err(); err != nil {
		return err
	}
	if err := j.Record(ctx, &sink.Settling{Bucket: v.settling, Changes: v.log}); err != nil {
		return fmt.Errorf("recording the settlement of %q: %w", v.settling, err)
	}
	v.journaled = true
	return nil
}

// Done implements Settler: the bucket settled last has committed. The
// journal stays until Finish has named its withdrawals.
func (v *Memory) Done(context.Context, string) error { return nil }

func (v *Memory) clearJournal(ctx context.Context) error {
	if !v.journaled {
		return nil
	}
	v.journaled = false
	return v.s.(sink.Journal).Clear(ctx)
}

// withdraw names a withdrawal, once per report, unless the report had
// no IDs before the settlement the journal holds began (a writer that
// stopped gave it IDs a moment, which the output never kept).
func (v *Memory) withdraw(w sink.Withdrawal) {
	if p, ok := v.prior[w.Textname]; (ok && p.Before != "") || v.named[w.Textname] {
		return
	}
	v.named[w.Textname] = true
	v.withdrawn = append(v.withdrawn, w)
}

// nameJournal names the withdrawals the journal holds that nothing named
// yet: each report that had IDs before its first change and has none
// now, as the output holds it at the end of the run (a writer that
// stopped made them, and never named them).
func (v *Memory) nameJournal(ctx context.Context) error {
	ws, err := v.journalWithdrawals(ctx)
	for _, w := range ws {
		v.withdraw(w)
	}
	return err
}

// journalWithdrawals returns the withdrawals the journal holds that
// nothing named yet, as the output holds its reports now.
func (v *Memory) journalWithdrawals(ctx context.Context) ([]sink.Withdrawal, error) {
	var out []sink.Withdrawal
	byBucket := map[string][]sink.SettlingChange{}
	for _, c := range v.log {
		if c.Before == "" && c.N > 0 && !v.named[c.Textname] {
			byBucket[c.Bucket] = append(byBucket[c.Bucket], c)
		}
	}
	if len(byBucket) == 0 {
		return nil, nil
	}
	states, err := v.s.State(ctx) // the buckets whole, not only those with a ledger entry
	if err != nil {
		return nil, err
	}
	committed := stamped.Committed(states)
	for _, b := range slices.Sorted(maps.Keys(byBucket)) {
		now := map[string]stamped.ManifestEntry{}
		if _, ok := committed[b]; ok {
			_, reports, err := v.s.Manifest(ctx, b)
			if err != nil {
				return nil, err
			}
			for _, r := range reports {
				now[r.Textname] = r
			}
		}
		for _, c := range byBucket[b] {
			w := sink.Withdrawal{Bucket: b, Textname: c.Textname, N: c.N, Cause: sink.CauseCollision}
			r, ok := now[c.Textname]
			switch {
			case !ok:
				w.Cause, w.Detail = sink.CauseVanished, "its bucket no longer holds it, or is not committed: a run of the bucket gives back what its input holds"
			case r.RejectedBy == "":
				continue
			default:
				w.Winner = r.RejectedBy
			}
			if _, ok := v.prior[c.Textname]; ok {
				w.Detail = strings.TrimPrefix(w.Detail+"; withdrawn by a writer that stopped before it named it", "; ")
			}
			out = append(out, w)
		}
	}
	return out, nil
}

// repair completes or undoes a settlement a writer began and did not
// finish (its journal is there), before anything else: the reports it
// changed are read again with every committed report of their days, and
// their verdicts set to what the output holds (a report that lost its
// IDs to a bucket that never committed gets them back). The journal's
// entries stay, with the verdicts they had before the first change,
// until Finish names the withdrawals that stand; with forbid, one that
// stands now is refused, and the reports that had IDs in a bucket the
// writer left uncommitted are published.
func (v *Memory) repair(ctx context.Context) error {
	j, ok := v.s.(sink.Journal)
	if !ok {
		return nil
	}
	st, err := j.Pending(ctx)
	if err != nil || st == nil {
		return err
	}
	v.journaled = true
	// A bucket the writer left half rewritten comes back as it was
	// before the settlement began; the fix below settles it again.
	if _, err := j.Restore(ctx); err != nil {
		return err
	}
	for _, c := range st.Changes {
		if _, ok := v.prior[c.Textname]; !ok {
			v.prior[c.Textname] = c
			v.log = append(v.log, c)
		}
	}
	fix := NewMemory(v.scheme, v.s)
	fix.repairing = true
	if err := fix.Start(ctx, nil); err != nil {
		return err
	}
	var days []int32
	for _, c := range st.Changes {
		t, err := ooid.ParseTextname(c.Textname)
		if err != nil {
			return fmt.Errorf("%s: %w", st.Bucket, err)
		}
		days = append(days, stamped.Day(t.TS))
	}
	if err := fix.reach(ctx, stamped.NewZone(days)); err != nil {
		return err
	}
	if err := fix.Finish(ctx); err != nil {
		return err
	}
	if !v.forbid {
		return nil
	}
	ws, err := v.journalWithdrawals(ctx)
	if err != nil {
		return err
	}
	var stands []sink.Withdrawal
	for _, w := range ws {
		if w.Cause == sink.CauseCollision {
			stands = append(stands, w)
		} else {
			v.unpublished = append(v.unpublished, w)
		}
	}
	if len(stands) > 0 {
		return &sink.WithdrawError{Bucket: st.Bucket, Withdrawals: stands}
	}
	return nil
}

// Finish syncs every report: at the end of a run, when every bucket of
// the output is known, verdicts that differ (buckets committed by runs
// that did not see each other, a winner whose bucket changed) are set
// right.
//
// It then releases the resolver's textnames' file; a run that fails
// before it leaves that to the process's end (the file has no name).
func (v *Memory) Finish(ctx context.Context) error {
	refs := make([]uint32, v.res.Len())
	for i := range refs {
		refs[i] = uint32(i)
	}
	v.settling = ""
	err := v.sync(ctx, refs)
	if err == nil && !v.repairing {
		err = v.nameJournal(ctx)
	}
	if err == nil && !v.repairing {
		err = v.clearJournal(ctx)
	}
	if v.pub != nil {
		err = errors.Join(err, v.pub.Close())
	}
	return errors.Join(err, v.res.Err(), v.res.Close())
}
