// Package sinktest is an in-memory sink for tests: a sink.Rewriter that
// keeps each committed bucket's reports, records and counts as it was
// given them, so a test can see what a run committed without files or a
// server.
package sinktest

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"github.com/backfill-dev/backfill/pipeline/collisions"
	"github.com/backfill-dev/backfill/pipeline/deadletter"
	"github.com/backfill-dev/backfill/pipeline/ooid"
	"github.com/backfill-dev/backfill/pipeline/sink"
	"github.com/backfill-dev/backfill/pipeline/stamped"
)

// Bucket is a committed bucket.
type Bucket struct {
	Meta    stamped.Meta
	Reports []stamped.Report
	Records []deadletter.Record
	Counts  stamped.Counts
}

// Sink is an in-memory sink.Rewriter. Not safe for concurrent use, as a
// run does not need.
type Sink struct {
	Committed map[string]*Bucket
	// Commits counts the commits, rewrites included.
	Commits int
	// Read counts the reads of each bucket's manifest.
	Read map[string]int
}

// Zoned is a Sink that says each committed bucket's zone
// (sink.Zoned), as the Parquet sink does.
type Zoned struct{ *Sink }

var _ sink.Zoned = Zoned{}

// NewZoned returns an empty Zoned sink.
func NewZoned() Zoned { return Zoned{New()} }

// Check implements sink.Zoned: what it holds does not change.
func (z Zoned) Check(context.Context, string) error { return nil }

// Zones implements sink.Zoned.
func (z Zoned) Zones(context.Context) (map[string]*stamped.Zone, error) {
	out := map[string]*stamped.Zone{}
	for name, b := range z.Committed {
		zone := stamped.ZoneOf(b.Reports)
		out[name] = &zone
	}
	return out, nil
}

var (
	_ sink.Rewriter     = (*Sink)(nil)
	_ sink.BucketWriter = (*writer)(nil)
)

// New returns an empty sink.
func New() *Sink { return &Sink{Committed: map[string]*Bucket{}, Read: map[string]int{}} }

// State implements sink.Sink.
func (s *Sink) State(context.Context) ([]stamped.State, error) {
	var out []stamped.State
	for _, name := range s.names() {
		b := s.Committed[name]
		out = append(out, stamped.State{Meta: b.Meta, Status: stamped.StatusCommitted, Counts: b.Counts.Clone()})
	}
	return out, nil
}

func (s *Sink) names() []string {
	names := make([]string, 0, len(s.Committed))
	for n := range s.Committed {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Close implements sink.Sink.
func (s *Sink) Close() error { return nil }

// Begin implements sink.Sink.
func (s *Sink) Begin(_ context.Context, m stamped.Meta) (sink.BucketWriter, error) {
	return &writer{s: s, b: Bucket{Meta: m}}, nil
}

// Buckets implements sink.Rewriter.
func (s *Sink) Buckets(context.Context) ([]string, error) { return s.names(), nil }

// Manifest implements sink.Rewriter.
func (s *Sink) Manifest(_ context.Context, bucket string) (stamped.Meta, []stamped.ManifestEntry, error) {
	b, ok := s.Committed[bucket]
	if !ok {
		return stamped.Meta{}, nil, fmt.Errorf("sinktest: bucket %s is not committed", bucket)
	}
	s.Read[bucket]++
	var out []stamped.ManifestEntry
	for _, r := range b.Reports {
		out = append(out, stamped.ManifestEntry{Textname: r.Textname, N: r.N, RejectedBy: r.RejectedBy})
	}
	return b.Meta, out, nil
}

// Reassign implements sink.Rewriter, as a run with the new verdicts would
// commit the bucket: the other records first, then the collision records
// by textname.
func (s *Sink) Reassign(_ context.Context, _ ooid.Scheme, bucket string, verdicts []stamped.Verdict) error {
	old, ok := s.Committed[bucket]
	if !ok {
		return fmt.Errorf("sinktest: bucket %s is not committed", bucket)
	}
	b := &Bucket{Meta: old.Meta, Counts: old.Counts.Clone(), Reports: slices.Clone(old.Reports)}
	byName := map[string]stamped.Verdict{}
	for _, v := range verdicts {
		byName[v.Textname] = v
	}
	collided := map[string]deadletter.Record{}
	for _, d := range old.Records {
		if d.Reason == deadletter.Collision && d.Textname != "" {
			collided[d.Textname] = d
			continue
		}
		b.Records = append(b.Records, d)
	}
	var records []deadletter.Record
	for i := range b.Reports {
		r := &b.Reports[i]
		if v, ok := byName[r.Textname]; ok {
			if d, rejected := collisions.Apply(bucket, r, &b.Counts, v); rejected {
				collided[r.Textname] = d
			}
		}
		if r.RejectedBy != "" {
			records = append(records, collided[r.Textname])
		}
	}
	collisions.SortRecords(records)
	b.Records = append(b.Records, records...)
	s.Committed[bucket] = b
	s.Commits++
	return nil
}

type writer struct {
	s    *Sink
	b    Bucket
	done bool
}

func (w *writer) Report(r *stamped.Report) error {
	w.b.Reports = append(w.b.Reports, *r)
	return nil
}

func (w *writer) DeadLetter(d deadletter.Record) error {
	w.b.Records = append(w.b.Records, d)
	return nil
}

func (w *writer) Commit(ctx context.Context, c stamped.Counts) (stamped.Counts, error) {
	if err := ctx.Err(); err != nil {
		return c, err
	}
	w.b.Counts = c.Clone()
	w.s.Committed[w.b.Meta.Bucket] = &w.b
	w.s.Commits++
	w.done = true
	return c, nil
}

func (w *writer) Abort() error { return nil }
