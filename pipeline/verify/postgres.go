package verify

import (
	"bytes"
	"context"

	"github.com/backfill-dev/backfill/pipeline/ooid"
	"github.com/backfill-dev/backfill/pipeline/sink/pgcopy"
	"github.com/backfill-dev/backfill/pipeline/stamped"
)

// Postgres is a PostgreSQL schema loaded by backfill run: its committed
// buckets. Verify a schema no run is loading.
type Postgres struct {
	Sink   *pgcopy.Sink
	bucket string // the bucket of reports, read with its scheme
	meta   stamped.Meta
	rows   []stamped.ManifestEntry
}

var _ Source = (*Postgres)(nil)

// Buckets implements Source.
func (p *Postgres) Buckets(ctx context.Context) ([]string, error) {
	return p.Sink.Buckets(ctx)
}

// Scheme implements Source.
func (p *Postgres) Scheme(ctx context.Context, bucket string) (ooid.Scheme, error) {
	err := p.read(ctx, bucket)
	return p.meta.Scheme, err
}

// Reports implements Source.
func (p *Postgres) Reports(ctx context.Context, bucket string) ([]Report, error) {
	if err := p.read(ctx, bucket); err != nil {
		return nil, err
	}
	out := make([]Report, len(p.rows))
	for i, r := range p.rows {
		out[i] = Report{Textname: r.Textname, N: r.N, RejectedBy: r.RejectedBy}
	}
	return out, nil
}

// read reads a bucket's ledger entry and reports, once.
func (p *Postgres) read(ctx context.Context, bucket string) error {
	if p.bucket == bucket {
		return nil
	}
	m, rows, err := p.Sink.Manifest(ctx, bucket)
	if err != nil {
		return err
	}
	p.bucket, p.meta, p.rows = bucket, m, rows
	return nil
}

// Rows implements Source.
func (p *Postgres) Rows(ctx context.Context, bucket string, fn func(int64, Row) error) error {
	var i int64
	var last []byte
	var name string
	return p.Sink.EachMeasurement(ctx, bucket, func(id int64, textname []byte, ndx int32) error {
		if !bytes.Equal(textname, last) { // a report's rows come together: one string each
			last, name = append(last[:0], textname...), string(textname)
		}
		err := fn(i, Row{OOID: id, Textname: name, Ndx: ndx})
		i++
		return err
	})
}

// Where implements Source.
func (p *Postgres) Where(bucket string) string {
	return p.Sink.String() + ": bucket " + bucket
}
