package scaleout

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"

	"golang.org/x/sync/errgroup"

	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/pipeline/collisions"
	"github.com/backfill-dev/backfill/pipeline/deadletter"
	"github.com/backfill-dev/backfill/pipeline/load"
	"github.com/backfill-dev/backfill/pipeline/sink"
	"github.com/backfill-dev/backfill/pipeline/sink/parquetfile"
	"github.com/backfill-dev/backfill/pipeline/stamped"
)

// ShardLockName is the lock a load takes on the shard output it reads
// (not on the job's output, whose own lock the sink it loads into holds).
const ShardLockName = ".lock-load"

// LoadOptions are what a load is allowed to do to the output.
type LoadOptions struct {
	// Replace replaces buckets the output holds from another input.
	Replace bool
	// NoWithdraw refuses a bucket that would withdraw IDs the output
	// published (a *sink.WithdrawError), before anything of it is
	// written or any committed bucket changes. A PostgreSQL sink is told
	// by its own options too.
	NoWithdraw bool
}

// LoadSummary is what a load did.
type LoadSummary struct {
	Buckets int `json:"buckets"` // committed
	// Withdrawn are the committed reports whose IDs the load withdrew,
	// each named once, by the load that withdrew it.
	Withdrawn []sink.Withdrawal `json:"withdrawn,omitempty"`
	// Strays are the files of the output's folders that no committed
	// bucket holds, once the load is done (a sink.StrayFinder's).
	Strays []string `json:"stray_files,omitempty"`
}

// Load loads the buckets of shard of p, from its shard output under out,
// into dst, through the Loader of a run: the same settlement, the same
// commits, the same journal, whatever dst is (the job's Parquet output,
// opened under its lock for the whole load, or a PostgreSQL schema). A
// load writes nothing a run would not write.
//
// Every bucket starts from the verdicts check settled (so check must have
// run, from this plan and the manifests the shards hold now). A sink that
// settles verdicts itself (PostgreSQL) takes them as a floor and settles
// against what it holds and the other shards load; the in-memory
// Settler (Parquet) is told the reports of the plan's other shards
// (load.Pending), from their manifests, on the days the shard's buckets
// reach, and settles against them and against the output: a report the
// plan rejects is never published, however the shards' loads
// interleave, and an outside report one of the plan's beats loses its
// IDs once, named by the load that takes them.
//
// Before anything is written, the load refuses a shard whose scheme or
// ndx policy differs from what the output holds outside the plan, and
// (unless opt.Replace) buckets the output holds from another input (a
// *sink.OtherSourceError).
func Load(ctx context.Context, p Plan, shard int, out store.Store, dst sink.Sink, opt LoadOptions) (sum LoadSummary, err error) {
	names := p.Names(shard)
	if len(names) == 0 {
		return sum, nil
	}
	src := ShardOut(out, shard)
	if err := Mapped(ctx, src, shard); err != nil {
		return sum, err
	}
	byBucket, head, err := readVerdicts(ctx, p, out)
	if err != nil {
		return sum, err
	}
	from, err := parquetfile.OpenLocked(ctx, src, ShardLockName)
	if err != nil {
		return sum, err
	}
	defer func() { err = errors.Join(err, from.Close()) }()
	ledgers := make([]parquetfile.Ledger, len(names))
	for i, b := range names {
		if ledgers[i], err = from.ReadLedger(ctx, b); err != nil {
			return sum, fmt.Errorf("bucket %s of %s: %w", b, src.Where("."), err)
		}
	}
	first := ledgers[0]
	states, err := dst.State(ctx)
	if err != nil {
		return sum, err
	}
	committed := stamped.Committed(states)
	if !opt.Replace {
		if err := sink.CheckSource(first.Source, names, committed); err != nil {
			return sum, err
		}
	}
	scope := make([]string, len(p.Buckets))
	for i, b := range p.Buckets {
		scope[i] = b.Name
	}
	slices.Sort(scope)
	if err := sink.OneScheme(first.Scheme(), first.NdxPolicy, scope, committed); err != nil {
		return sum, err
	}
	ld, err := load.New(dst, first.Scheme())
	if err != nil {
		return sum, err
	}
	if opt.NoWithdraw {
		ld.Forbid()
	}
	// Every bucket of the plan is the plan's: the other shards' are
	// settled against as their manifests hold them, not as the output
	// may hold an older version of them.
	if err := ld.Start(ctx, scope); err != nil {
		return sum, err
	}
	days, err := shardDays(ctx, from, names, ledgers)
	if err != nil {
		return sum, err
	}
	if err := ld.Expect(ctx, days, func(days []int32) ([]load.Pending, error) {
		return otherShards(ctx, p, shard, out, head, days)
	}); err != nil {
		return sum, err
	}
	// Buckets are read one at a time and committed ld.Commits() at once.
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(ld.Commits())
	for _, name := range names {
		if gctx.Err() != nil {
			break
		}
		b, err := from.Stamped(ctx, name)
		if err != nil {
			_ = g.Wait()
			return sum, err
		}
		withVerdicts(b, byBucket[name])
		g.Go(func() error {
			if _, err := ld.Commit(ctx, b); err != nil {
				return fmt.Errorf("bucket %s: %w", name, err)
			}
			return nil
		})
	}
	err = g.Wait()
	if err == nil {
		err = ld.Finish(ctx)
	}
	sum.Withdrawn = ld.Withdrawn()
	if err != nil {
		return sum, err
	}
	sum.Buckets = len(names)
	if sf, ok := dst.(sink.StrayFinder); ok {
		sum.Strays, err = sf.Strays(ctx)
	}
	return sum, err
}

// shardDays returns the days the reports of the shard's buckets fall on:
// their ledgers' zones, or their reports where a ledger has none.
func shardDays(ctx context.Context, from *parquetfile.Sink, names []string, ledgers []parquetfile.Ledger) ([]int32, error) {
	var days []int32
	for i, l := range ledgers {
		if l.Zone != nil {
			days = append(days, l.Zone.Days...)
			continue
		}
		m, entries, err := from.Manifest(ctx, names[i])
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			id, err := m.Scheme.Report(e.Textname)
			if err != nil {
				return nil, fmt.Errorf("bucket %s: report %s: %w", names[i], e.Textname, err)
			}
			days = append(days, stamped.Day(id.TS))
		}
	}
	return stamped.NewZone(days).Days, nil
}

// otherShards returns the reports of every shard of p but shard on days,
// from the shards' manifests, each checked against the digest check made
// the verdicts from.
func otherShards(ctx context.Context, p Plan, shard int, out store.Store, head VerdictsHeader, days []int32) ([]load.Pending, error) {
	on := map[int32]bool{}
	for _, d := range days {
		on[d] = true
	}
	var ps []load.Pending
	for i := range p.Shards {
		if i == shard || len(p.Names(i)) == 0 {
			continue
		}
		so := ShardOut(out, i)
		f, err := so.Open(ctx, ManifestName)
		if err != nil {
			return nil, err
		}
		h := sha256.New()
		r, err := NewManifestReader(so.Where(ManifestName), io.TeeReader(f, h))
		for err == nil {
			var e ManifestEntry
			if e, err = r.Next(); err == nil && on[stamped.Day(e.TS)] {
				ps = append(ps, load.Pending{Bucket: e.Bucket, Report: stamped.ManifestEntry{Textname: e.Textname, N: e.N, RejectedBy: e.RejectedBy}})
			}
		}
		if errors.Is(err, io.EOF) {
			_, err = io.Copy(h, f)
		}
		f.Close()
		if err != nil {
			return nil, err
		}
		if hex.EncodeToString(h.Sum(nil)) != head.Manifests[strconv.Itoa(i)] {
			return nil, &OrderError{fmt.Sprintf("%s changed since check made its verdicts (shard %d was mapped again): run backfill check again before load", so.Where(ManifestName), i)}
		}
	}
	return ps, nil
}

// withVerdicts gives the reports of b check's verdicts, with their
// collision records: the floor a sink that settles verdicts itself
// starts from (the in-memory Settler decides them again from every
// report of the plan).
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
