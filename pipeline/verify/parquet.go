package verify

import (
	"context"

	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/pipeline/ooid"
	"github.com/backfill-dev/backfill/pipeline/sink/parquetfile"
	"github.com/backfill-dev/backfill/pipeline/stamped"
)

// Parquet is the output folder of a run to Parquet, local or on S3: its
// committed buckets (those of its ledger). It takes no lock: verify an
// output no run is writing.
type Parquet struct {
	St     store.Store
	states map[string]stamped.State
}

var _ Source = (*Parquet)(nil)

// Buckets implements Source.
func (p *Parquet) Buckets(ctx context.Context) ([]string, error) {
	states, err := parquetfile.ReadState(ctx, p.St)
	if err != nil {
		return nil, err
	}
	p.states = map[string]stamped.State{}
	var out []string
	for _, s := range states {
		if s.Status == stamped.StatusCommitted {
			p.states[s.Meta.Bucket] = s
			out = append(out, s.Meta.Bucket)
		}
	}
	return out, nil
}

// Scheme implements Source.
func (p *Parquet) Scheme(_ context.Context, bucket string) (ooid.Scheme, error) {
	return p.states[bucket].Meta.Scheme, nil
}

// Reports implements Source.
func (p *Parquet) Reports(ctx context.Context, bucket string) ([]Report, error) {
	rows, err := parquetfile.ReadReports(ctx, p.St, "reports/"+bucket+".parquet")
	if err != nil {
		return nil, err
	}
	out := make([]Report, len(rows))
	for i, r := range rows {
		out[i] = Report{Textname: r.Textname, N: uint32(r.N), RejectedBy: r.RejectedBy}
		if r.N < 0 || r.N > 1<<32-1 {
			out[i].N = 1<<32 - 1 // no counter holds it: verify says so
		}
	}
	return out, nil
}

// Rows implements Source.
func (p *Parquet) Rows(ctx context.Context, bucket string, fn func(int64, Row) error) error {
	return parquetfile.EachMeasurement(ctx, p.St, "measurements/"+bucket+".parquet", func(i int64, r parquetfile.Measurement) error {
		return fn(i, Row{OOID: r.OOID, Textname: r.Textname, Ndx: r.Ndx})
	})
}

// Where implements Source.
func (p *Parquet) Where(bucket string) string {
	return p.St.Where("measurements/" + bucket + ".parquet")
}
