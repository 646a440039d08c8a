package verify

import (
	"context"
	"fmt"
	"time"

	"github.com/backfill-dev/backfill/pipeline/ooid"
	"github.com/backfill-dev/backfill/pipeline/ooniuid"
	"github.com/backfill-dev/backfill/pipeline/sink/pgcopy"
	"github.com/backfill-dev/backfill/pipeline/sink/pgcopy/pgschema"
	"github.com/backfill-dev/backfill/pipeline/stamped"
)

// Postgres is the schema of a run into PostgreSQL: its committed buckets
// (those of its ledger). The measurements table has no index on bucket, so
// its rows are read once, in the order the table holds them, after every
// bucket's reports. It takes no lock: verify a schema no run is writing.
type Postgres struct {
	S       *pgcopy.Sink
	states  map[string]stamped.State
	buckets []string
	byDay   map[int32]int // a bucket's day (pgschema.Day) -> its index in buckets
	lastDay int32         // the day of the last row read
}

var _ Source = (*Postgres)(nil)

// Buckets implements Source.
func (p *Postgres) Buckets(ctx context.Context) ([]string, error) {
	states, err := p.S.State(ctx)
	if err != nil {
		return nil, err
	}
	p.states, p.buckets, p.byDay = map[string]stamped.State{}, nil, map[int32]int{}
	for _, s := range states {
		if s.Status != stamped.StatusCommitted {
			continue
		}
		day, err := pgschema.Day(s.Meta.Bucket)
		if err != nil {
			return nil, err
		}
		p.states[s.Meta.Bucket], p.byDay[day] = s, len(p.buckets)
		p.buckets = append(p.buckets, s.Meta.Bucket)
	}
	return p.buckets, nil
}

// UIDs reports whether the schema holds OONI's identities of its
// measurements (a bucket loaded with --measurement-uid).
func (p *Postgres) UIDs(ctx context.Context) (bool, error) {
	states, err := p.S.State(ctx)
	return anyUIDs(states), err
}

// Scheme implements Source.
func (p *Postgres) Scheme(_ context.Context, bucket string) (ooid.Scheme, error) {
	return p.states[bucket].Meta.Scheme, nil
}

// Reports implements Source. A measurement row names its report by seq,
// which numbers a bucket's reports 0, 1, ... in the order they were
// written.
func (p *Postgres) Reports(ctx context.Context, bucket string) ([]Report, error) {
	rows, err := p.S.BucketReports(ctx, bucket)
	if err != nil {
		return nil, err
	}
	var ids map[int32][]ooniuid.ID
	var listed map[string][]string
	if p.states[bucket].Meta.UIDs {
		if ids, err = p.S.BucketIdentities(ctx, bucket); err != nil {
			return nil, err
		}
		if listed, err = p.S.BucketListedUIDs(ctx, bucket); err != nil {
			return nil, err
		}
	}
	out := make([]Report, len(rows))
	for i, r := range rows {
		if r.Seq != int32(i) {
			return nil, &Failure{At: p.Where(bucket) + ": report " + r.Textname,
				What: fmt.Sprintf("its seq is %d where %d was due: a bucket's reports are numbered 0, 1, ... with none missing", r.Seq, i)}
		}
		out[i] = Report{Textname: r.Textname, N: uint32(r.N), RejectedBy: r.RejectedBy}
		if ids != nil {
			out[i].IDs, out[i].Listed = ids[r.Seq], sortedUIDs(listed[r.Textname])
			if out[i].IDs == nil {
				out[i].IDs = []ooniuid.ID{} // none: the input's, if it has some, differ
			}
		}
		if r.N < 0 {
			out[i].N = 1<<32 - 1 // no counter holds it: verify says so
		}
	}
	return out, nil
}

// PerBucket implements Source: the table is read once.
func (p *Postgres) PerBucket() bool { return false }

// Rows implements Source: every row of the table, whatever the buckets
// asked for. A row of a bucket the ledger does not hold as committed is
// given with Bucket -1.
func (p *Postgres) Rows(ctx context.Context, _, _ int, fn func(Row) error) error {
	var i int64
	return p.S.EachMeasurement(ctx, func(day, report, ndx int32, id int64) error {
		b, ok := p.byDay[day]
		if !ok {
			b = -1
		}
		p.lastDay = day
		i++
		return fn(Row{Bucket: b, Report: int(report), Ndx: ndx, OOID: id, Pos: i - 1})
	})
}

// Where implements Source.
func (p *Postgres) Where(bucket string) string {
	if bucket == "*" {
		return p.S.String()
	}
	return fmt.Sprintf("%s: %s, bucket %s", p.S.Where(), p.S.Table("reports"), bucket)
}

// RowAt implements Source.
func (p *Postgres) RowAt(r Row) string {
	day := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, int(p.lastDay)).Format(time.DateOnly)
	name := ""
	if r.Textname != "" {
		name = " (" + r.Textname + ")"
	}
	return fmt.Sprintf("%s: %s, the row of bucket %s, report %d%s, ndx %d", p.S.Where(), p.S.Table("measurements"), day, r.Report, name, r.Ndx)
}
