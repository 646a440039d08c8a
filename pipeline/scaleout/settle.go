package scaleout

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/pipeline/collisions"
	"github.com/backfill-dev/backfill/pipeline/deadletter"
	"github.com/backfill-dev/backfill/pipeline/ooid"
	"github.com/backfill-dev/backfill/pipeline/sink"
	"github.com/backfill-dev/backfill/pipeline/sink/parquetfile"
	"github.com/backfill-dev/backfill/pipeline/stamped"
)

// OutsideLockName is the lock a load takes to rewrite buckets from
// outside its plan: shards that load side by side take turns at it.
const OutsideLockName = ".lock-load-outside"

// outsideLockWait bounds the wait for OutsideLockName.
const outsideLockWait = 2 * time.Minute

// loadOf is a shard's load: its plan, buckets, check's verdicts and the
// header they came with, and the shard output they are read from.
type loadOf struct {
	p        Plan
	names    []string
	verdicts map[string][]stamped.Verdict
	head     VerdictsHeader
	from     *parquetfile.Sink
	where    string // of from
	out      store.Store
}

// settlement is what a load does besides copying its buckets: the
// verdicts each of its buckets gets once copied (check's, and those its
// reports get from the output's reports outside the plan), the verdicts
// of the buckets outside the plan that its reports change, and the
// published IDs all of it withdraws.
type settlement struct {
	scheme    ooid.Scheme
	plan      map[string][]stamped.Verdict
	outside   map[string][]stamped.Verdict
	withdrawn []sink.Withdrawal
}

// guard checks the shard's buckets against the output s and settles them
// against it (see Load), before anything is copied.
func guard(ctx context.Context, l loadOf, s *parquetfile.Sink, opt LoadOptions) (*settlement, error) {
	states, err := s.State(ctx)
	if err != nil {
		return nil, err
	}
	committed := stamped.Committed(states)
	inPlan := map[string]bool{}
	for _, b := range l.p.Buckets {
		inPlan[b.Name] = true
	}
	st := &settlement{plan: map[string][]stamped.Verdict{}, outside: map[string][]stamped.Verdict{}}
	days := map[int32]bool{} // the days the shard's reports, new and old, fall on
	buckets := make([]*stamped.Bucket, len(l.names))
	type version struct {
		m       stamped.Meta
		entries []stamped.ManifestEntry
	}
	was := map[string]version{} // the committed versions of the shard's buckets
	for i, b := range l.names {
		m, entries, err := l.from.Manifest(ctx, b)
		if err != nil {
			return nil, fmt.Errorf("bucket %s of shard output %s: %w", b, l.where, err)
		}
		if i == 0 {
			st.scheme = m.Scheme
			if err := oneScheme(m, committed, inPlan); err != nil {
				return nil, err
			}
		}
		if !opt.Replace {
			if err := sink.CheckSource(m.Source, []string{b}, committed); err != nil {
				return nil, err
			}
		}
		if buckets[i], err = becomes(m, entries, l.verdicts[b]); err != nil {
			return nil, err
		}
		for _, r := range buckets[i].Reports {
			days[stamped.Day(r.ID.TS)] = true
		}
		if _, ok := committed[b]; ok {
			om, old, err := s.Manifest(ctx, b)
			if err != nil {
				return nil, err
			}
			was[b] = version{om, old}
			for _, e := range old {
				if id, err := om.Scheme.Report(e.Textname); err == nil {
					days[stamped.Day(id.TS)] = true
				}
			}
		}
	}
	outside, err := reachedOutside(ctx, s, committed, inPlan, days)
	if err != nil {
		return nil, err
	}
	if len(outside) > 0 {
		planned, err := planReports(ctx, l, days)
		if err != nil {
			return nil, err
		}
		if err := st.settle(buckets, planned, outside); err != nil {
			return nil, err
		}
	}
	for _, sb := range buckets {
		if v, ok := was[sb.Meta.Bucket]; ok {
			st.withdrawn = append(st.withdrawn, sink.Withdrawals(sb, v.m, v.entries)...)
		}
	}
	st.addCheck(l.verdicts, l.names)
	if opt.NoWithdraw && len(st.withdrawn) > 0 {
		return nil, &sink.WithdrawError{Bucket: st.withdrawn[0].Bucket, Withdrawals: st.withdrawn}
	}
	return st, nil
}

// oneScheme refuses a shard made under m whose output holds a bucket
// from outside the plan made under another scheme or ndx policy.
func oneScheme(m stamped.Meta, committed map[string]stamped.State, inPlan map[string]bool) error {
	for _, o := range slices.Sorted(maps.Keys(committed)) {
		om := committed[o].Meta
		if !inPlan[o] && (!om.Scheme.Equal(m.Scheme) || om.NdxPolicy != m.NdxPolicy) {
			return fmt.Errorf("the output holds bucket %s made under %s with --ndx %s, and the shard's buckets are made under %s with --ndx %s: one output holds one scheme and one ndx policy; load into another folder",
				o, om.Scheme, om.NdxPolicy, m.Scheme, m.NdxPolicy)
		}
	}
	return nil
}

// becomes returns the bucket a shard's bucket (m, its report manifest)
// becomes with check's verdicts.
func becomes(m stamped.Meta, entries []stamped.ManifestEntry, verdicts []stamped.Verdict) (*stamped.Bucket, error) {
	changed := map[string]string{}
	for _, v := range verdicts {
		changed[v.Textname] = v.RejectedBy
	}
	sb := &stamped.Bucket{Meta: m}
	for _, e := range entries {
		if w, ok := changed[e.Textname]; ok {
			e.RejectedBy = w
		}
		id, err := m.Scheme.Report(e.Textname)
		if err != nil {
			return nil, fmt.Errorf("bucket %s: report %s: %w", m.Bucket, e.Textname, err)
		}
		sb.Reports = append(sb.Reports, stamped.Report{Textname: e.Textname, ID: id, N: e.N, RejectedBy: e.RejectedBy})
	}
	return sb, nil
}

// outsideReport is a report of a bucket the output holds from outside
// the plan, as committed.
type outsideReport struct {
	bucket string
	e      stamped.ManifestEntry
	rg     collisions.Range
}

// reachedOutside returns the reports, collision losers included, that
// the output holds outside the plan on days: reading only the buckets
// whose zone meets them.
func reachedOutside(ctx context.Context, s *parquetfile.Sink, committed map[string]stamped.State, inPlan map[string]bool, days map[int32]bool) ([]outsideReport, error) {
	zones, err := s.Zones(ctx)
	if err != nil {
		return nil, err
	}
	want := stamped.NewZone(slices.Collect(maps.Keys(days)))
	var out []outsideReport
	for _, o := range slices.Sorted(maps.Keys(committed)) {
		if inPlan[o] || (zones[o] != nil && !zones[o].Meets(want)) {
			continue
		}
		om, entries, err := s.Manifest(ctx, o)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			id, err := om.Scheme.Report(e.Textname)
			if err != nil {
				return nil, fmt.Errorf("bucket %s: committed report %s: %w", o, e.Textname, err)
			}
			if days[stamped.Day(id.TS)] {
				out = append(out, outsideReport{bucket: o, e: e, rg: collisions.RangeOf(id, e.N)})
			}
		}
	}
	return out, nil
}

// planReports returns the reports of every shard of the plan on days,
// from the shards' manifests, each checked against the digest check made
// the verdicts from.
func planReports(ctx context.Context, l loadOf, days map[int32]bool) ([]ManifestEntry, error) {
	var out []ManifestEntry
	for i := range l.p.Shards {
		if len(l.p.Names(i)) == 0 {
			continue
		}
		so := ShardOut(l.out, i)
		f, err := so.Open(ctx, ManifestName)
		if err != nil {
			return nil, err
		}
		h := sha256.New()
		r, err := NewManifestReader(so.Where(ManifestName), io.TeeReader(f, h))
		for err == nil {
			var e ManifestEntry
			if e, err = r.Next(); err == nil && days[stamped.Day(e.TS)] {
				out = append(out, e)
			}
		}
		if errors.Is(err, io.EOF) {
			_, err = io.Copy(h, f)
		}
		f.Close()
		if err != nil {
			return nil, err
		}
		if hex.EncodeToString(h.Sum(nil)) != l.head.Manifests[strconv.Itoa(i)] {
			return nil, &OrderError{fmt.Sprintf("%s changed since check made its verdicts (shard %d was mapped again): run backfill check again before load", so.Where(ManifestName), i)}
		}
	}
	return out, nil
}

// settle decides, by the rule of a run, the verdicts of the shard's
// buckets (as check left them) and of the outside reports on the days
// they reach, from every report of the plan and of the output's outside
// buckets on those days: a report loses its IDs to the first-sorting
// report it collides with. Every collider of such a report is among
// them, since reports collide only within a second.
func (st *settlement) settle(buckets []*stamped.Bucket, planned []ManifestEntry, outside []outsideReport) error {
	bits := st.scheme.CounterBits
	res := collisions.NewResolver(bits)
	defer func() { _ = res.Close() }()
	refOf := map[string]uint32{} // the shard's reports, by bucket and textname
	for _, e := range planned {
		ref, _ := res.Add(e.Textname, collisions.Range{TS: e.TS, Base: e.Base, N: e.N}, 0)
		refOf[e.Bucket+"/"+e.Textname] = ref
	}
	outRefs := make([]uint32, len(outside))
	for i, o := range outside {
		outRefs[i], _ = res.Add(o.e.Textname, o.rg, 1)
	}
	if err := res.Err(); err != nil {
		return err
	}
	verdict := func(ref uint32) (string, string) {
		w, ok := res.Winner(ref)
		if !ok {
			return "", ""
		}
		return res.Name(w), collisions.Message(res.Name(w), res.Range(w), res.Range(ref), bits)
	}
	for _, sb := range buckets {
		for i := range sb.Reports {
			r := &sb.Reports[i]
			ref, ok := refOf[sb.Meta.Bucket+"/"+r.Textname]
			if !ok {
				continue // on no day an outside report falls on
			}
			if w, msg := verdict(ref); w != r.RejectedBy {
				r.RejectedBy = w
				st.plan[sb.Meta.Bucket] = append(st.plan[sb.Meta.Bucket], stamped.Verdict{Textname: r.Textname, RejectedBy: w, Message: msg})
			}
		}
	}
	for i, o := range outside {
		w, msg := verdict(outRefs[i])
		if w == o.e.RejectedBy {
			continue
		}
		st.outside[o.bucket] = append(st.outside[o.bucket], stamped.Verdict{Textname: o.e.Textname, RejectedBy: w, Message: msg})
		if o.e.RejectedBy == "" && o.e.N > 0 {
			st.withdrawn = append(st.withdrawn, sink.Withdrawal{Bucket: o.bucket, Textname: o.e.Textname, N: o.e.N, Winner: w, Cause: sink.CauseCollision})
		}
	}
	return res.Err()
}

// addCheck merges check's verdicts of the shard's buckets under those of
// the settlement: a report the settlement decided has its verdict.
func (st *settlement) addCheck(verdicts map[string][]stamped.Verdict, names []string) {
	for _, b := range names {
		decided := map[string]bool{}
		for _, v := range st.plan[b] {
			decided[v.Textname] = true
		}
		for _, v := range verdicts[b] {
			if !decided[v.Textname] {
				st.plan[b] = append(st.plan[b], v)
			}
		}
	}
}

// applyOutside rewrites the buckets outside the plan whose verdicts the
// load changes, under OutsideLockName: shards loading side by side
// decide the same verdicts, and take turns to write them.
func (st *settlement) applyOutside(ctx context.Context, out store.Store, s *parquetfile.Sink) error {
	if len(st.outside) == 0 {
		return nil
	}
	lock, err := lockWithin(ctx, out, OutsideLockName, outsideLockWait)
	if err != nil {
		return err
	}
	defer func() { _ = lock.Unlock() }()
	for _, b := range slices.Sorted(maps.Keys(st.outside)) {
		if err := s.Reassign(ctx, st.scheme, b, st.outside[b]); err != nil {
			return fmt.Errorf("rewrite bucket %s, from outside the plan: %w", b, err)
		}
	}
	return nil
}

// lockWithin takes the lock name of st, waiting for another holder at
// most wait (a *store.LockedError past it).
func lockWithin(ctx context.Context, st store.Store, name string, wait time.Duration) (store.Lock, error) {
	deadline := time.Now().Add(wait)
	for {
		lock, err := st.Lock(ctx, name)
		var le *store.LockedError
		if !errors.As(err, &le) || time.Now().After(deadline) {
			return lock, err
		}
		t := time.NewTimer(200 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

// withVerdicts gives the reports of b check's verdicts, with their
// collision records.
func withVerdicts(b *stamped.Bucket, verdicts []stamped.Verdict) {
	if len(verdicts) == 0 {
		return
	}
	byName := map[string]stamped.Verdict{}
	for _, v := range verdicts {
		byName[v.Textname] = v
	}
	var collided []deadletter.Record
	for i := range b.Reports {
		r := &b.Reports[i]
		if v, ok := byName[r.Textname]; ok {
			r.RejectedBy = v.RejectedBy
			if v.RejectedBy != "" {
				collided = append(collided, collisions.Record(b.Meta.Bucket, r, v.Message))
			}
		}
	}
	b.Records = slices.DeleteFunc(b.Records, func(d deadletter.Record) bool {
		_, ok := byName[d.Textname]
		return ok && d.Reason == deadletter.Collision
	})
	b.Records = append(b.Records, collided...)
}
