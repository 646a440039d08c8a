package verify

import (
	"context"
	"fmt"
	"strings"

	"github.com/backfill-dev/backfill/internal/cli"
	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/pipeline/ooid"
	"github.com/backfill-dev/backfill/pipeline/ooniuid"
	"github.com/backfill-dev/backfill/pipeline/sink/parquetfile"
	"github.com/backfill-dev/backfill/pipeline/stamped"
)

// Parquet is the output folder of a run to Parquet, local or on S3: its
// committed buckets (those of its ledger), a file of reports and one of
// measurements each. It takes no lock: verify an output no run is writing.
type Parquet struct {
	St      store.Store
	states  map[string]stamped.State
	buckets []string
	// The place of each textname among the reports of the bucket read
	// last: a measurement row names its report by textname.
	placesOf string
	places   map[string]int
}

var _ Source = (*Parquet)(nil)

// Buckets implements Source. It first checks the folder against its
// ledger: a file under it that no committed bucket holds is a failure
// (readers that glob the folder would count it), and so is a committed
// bucket whose files or counts are not those its ledger entry recorded
// (parquetfile.CheckBucket).
func (p *Parquet) Buckets(ctx context.Context) ([]string, error) {
	sv, err := parquetfile.Survey(ctx, p.St)
	if err != nil {
		return nil, err
	}
	states, strays := sv.States, sv.Strays
	if len(strays) > 0 {
		where := make([]string, len(strays))
		for i, f := range strays {
			where[i] = p.St.Where(f)
		}
		return nil, fmt.Errorf("%s that no committed bucket holds (a run stopped before its ledger entry, or put there; readers that glob the folders count them): %s",
			cli.Count(len(strays), "file", "files"), strings.Join(where, ", "))
	}
	p.states, p.buckets = map[string]stamped.State{}, nil
	for _, s := range states {
		if s.Status == stamped.StatusCommitted {
			if absent := sv.Absent[s.Meta.Bucket]; len(absent) > 0 {
				for i, f := range absent {
					absent[i] = p.St.Where(f)
				}
				return nil, &parquetfile.AbsentError{Bucket: s.Meta.Bucket, Files: absent}
			}
			if err := parquetfile.CheckBucket(ctx, p.St, s.Meta.Bucket); err != nil {
				return nil, err
			}
			p.states[s.Meta.Bucket] = s
			p.buckets = append(p.buckets, s.Meta.Bucket)
		}
	}
	return p.buckets, nil
}

// UIDs reports whether the output holds OONI's identities of its
// measurements (a bucket made with --measurement-uid).
func (p *Parquet) UIDs(ctx context.Context) (bool, error) {
	states, err := parquetfile.ReadState(ctx, p.St)
	return anyUIDs(states), err
}

// Scheme implements Source.
func (p *Parquet) Scheme(_ context.Context, bucket string) (ooid.Scheme, error) {
	return p.states[bucket].Meta.Scheme, nil
}

// Reports implements Source; a bucket made with --measurement-uid gives
// its reports' identities too.
func (p *Parquet) Reports(ctx context.Context, bucket string) ([]Report, error) {
	var ids [][]ooniuid.ID
	var rows []parquetfile.Report
	var err error
	if p.states[bucket].Meta.UIDs {
		_, rows, ids, err = parquetfile.ReadIdentities(ctx, p.St, bucket) // the manifest with its identities
	} else {
		rows, err = parquetfile.ReadReports(ctx, p.St, "reports/"+bucket+".parquet")
	}
	if err != nil {
		return nil, err
	}
	var listed map[string][]string
	if ids != nil {
		dead, err := parquetfile.ReadDeadLetters(ctx, p.St, "dead-letters/"+bucket+".jsonl")
		if err != nil {
			return nil, err
		}
		listed = map[string][]string{}
		for _, d := range dead {
			listed[d.Textname] = append(listed[d.Textname], d.MeasurementUIDs...)
		}
	}
	out := make([]Report, len(rows))
	p.placesOf, p.places = bucket, make(map[string]int, len(rows))
	for i, r := range rows {
		out[i] = Report{Textname: r.Textname, N: uint32(r.N), RejectedBy: r.RejectedBy}
		if ids != nil {
			out[i].IDs, out[i].Listed = ids[i], sortedUIDs(listed[r.Textname])
		}
		if r.N < 0 || r.N > 1<<32-1 {
			out[i].N = 1<<32 - 1 // no counter holds it: verify says so
		}
		if _, ok := p.places[r.Textname]; !ok {
			p.places[r.Textname] = i
		}
	}
	return out, nil
}

// PerBucket implements Source: each bucket has a file of its own.
func (p *Parquet) PerBucket() bool { return true }

// Rows implements Source.
func (p *Parquet) Rows(ctx context.Context, first, end int, fn func(Row) error) error {
	for bi := first; bi < end; bi++ {
		b := p.buckets[bi]
		if p.placesOf != b {
			if _, err := p.Reports(ctx, b); err != nil {
				return err
			}
		}
		err := parquetfile.EachMeasurement(ctx, p.St, "measurements/"+b+".parquet", func(i int64, m parquetfile.Measurement) error {
			place, ok := p.places[m.Textname]
			if !ok {
				place = -1
			}
			return fn(Row{Bucket: bi, Report: place, Ndx: m.Ndx, OOID: m.OOID, Pos: i, Textname: m.Textname})
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// Where implements Source.
func (p *Parquet) Where(bucket string) string {
	return p.St.Where("measurements/" + bucket + ".parquet")
}

// RowAt implements Source.
func (p *Parquet) RowAt(r Row) string {
	return fmt.Sprintf("%s: row %d (%s, ndx %d)", p.Where(p.buckets[r.Bucket]), r.Pos, r.Textname, r.Ndx)
}
