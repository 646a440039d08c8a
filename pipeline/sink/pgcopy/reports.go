package pgcopy

import (
	"context"
	"errors"
	"fmt"
	"github.com/backfill-dev/backfill/pipeline/deadletter"

	"github.com/backfill-dev/backfill/pipeline/ooniuid"
	"github.com/backfill-dev/backfill/pipeline/sink/pgcopy/pgschema"
	"github.com/jackc/pgx/v5"
)

// EachReport calls fn for every report of the committed buckets, rejected
// ones included, by bucket and in the order they were written: the
// schema's report manifests, as backfill audit reads them. The textname
// is only valid during the call. A report whose n is negative (not a
// count) is an error. Nothing is retried: fn may have seen part of the
// rows.
func (s *Sink) EachReport(ctx context.Context, fn func(textname []byte, n uint32) error) error {
	rows, err := s.conn.Query(ctx, `SELECT r.textname, r.n FROM `+s.q("reports")+` r
		JOIN `+s.q("ledger")+` l ON l.bucket = r.bucket AND l.status = 'committed'
		ORDER BY r.bucket, r.seq`)
	if err != nil {
		return s.clean(err)
	}
	defer rows.Close()
	var name []byte
	var n int32
	for rows.Next() {
		if err := rows.Scan(&name, &n); err != nil {
			return s.clean(err)
		}
		if n < 0 {
			return fmt.Errorf("report %s: n = %d", name, n)
		}
		if err := fn(name, uint32(n)); err != nil {
			return err
		}
	}
	return s.clean(rows.Err())
}

// StoredReport is a report row as verify reads it.
type StoredReport struct {
	Seq        int32
	Textname   string
	N          int32
	RejectedBy string // "" when kept
}

// BucketReports returns the reports of a bucket, in seq order.
func (s *Sink) BucketReports(ctx context.Context, bucket string) ([]StoredReport, error) {
	var out []StoredReport
	err := s.retry(ctx, "reading the reports of "+bucket, func(ctx context.Context, conn *pgx.Conn) error {
		rows, err := conn.Query(ctx, `SELECT seq, textname, n, coalesce(rejected_by, '') FROM `+s.q("reports")+`
			WHERE bucket = $1::date ORDER BY seq`, bucket)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (r StoredReport, err error) {
			err = row.Scan(&r.Seq, &r.Textname, &r.N, &r.RejectedBy)
			return r, err
		})
		return err
	})
	return out, err
}

// EachMeasurement calls fn with every row of the measurements table, in
// the order the table holds them (one sequential read, no sort, no
// index): its bucket as days since 2000-01-01 (pgschema.Day), its report's seq,
// its ndx and its ID. Nothing is retried: fn may have seen part of the
// rows. It takes the sink's first connection: call it from one goroutine,
// with no other call under way.
func (s *Sink) EachMeasurement(ctx context.Context, fn func(day, report, ndx int32, ooid int64) error) error {
	if err := s.connect(ctx, &s.conn); err != nil { // a retry before may have closed it
		return s.named(err)
	}
	r := pgschema.NewMeasurementRows(fn)
	_, err := s.conn.PgConn().CopyTo(ctx, r, `COPY `+s.q("measurements")+` (bucket, report, ndx, ooid) TO STDOUT (FORMAT binary)`)
	switch {
	case r.Err() != nil:
		return r.Err() // fn's
	case err == nil && !r.Ended():
		err = errors.New("the rows ended early")
	case err == nil:
		return nil
	}
	return s.named(fmt.Errorf("reading %s: %w", s.q("measurements"), s.clean(err)))
}

// IdentityReport is a report as EachIdentity gives it: where its IDs are
// (ts, counter base, the bucket's counter bits), whether it lost them to
// a collision, and the content hash of each of its measurements, by ndx.
type IdentityReport struct {
	Bucket, Textname string
	TS, Base         uint32
	Bits             int
	Loser            bool
	Hashes           [][]byte
}

// EachIdentity calls fn for every report with measurements of the
// committed buckets, collision losers included, by bucket and seq, with
// OONI's identities of its measurements; a committed bucket loaded
// without --measurement-uid is an error naming it. Nothing is retried.
func (s *Sink) EachIdentity(ctx context.Context, fn func(IdentityReport) error) error {
	var without []string
	rows, err := s.conn.Query(ctx, `SELECT bucket::text FROM `+s.q("ledger")+` WHERE status = 'committed' AND NOT measurement_uid ORDER BY bucket LIMIT 4`)
	if err != nil {
		return s.clean(err)
	}
	if without, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		return s.clean(err)
	}
	if len(without) > 0 {
		return fmt.Errorf("bucket %s holds no identities of its measurements: load it again with --measurement-uid", without[0])
	}
	rows, err = s.conn.Query(ctx, `SELECT r.bucket::text, r.textname, r.ts, r.counter_base, l.counter_bits, r.rejected_by IS NOT NULL,
			array_agg(i.content_hash ORDER BY i.ndx)
		FROM `+s.q("reports")+` r
		JOIN `+s.q("ledger")+` l ON l.bucket = r.bucket AND l.status = 'committed'
		JOIN `+s.q("measurement_identities")+` i ON i.bucket = r.bucket AND i.report = r.seq
		GROUP BY r.bucket, r.seq, r.textname, r.ts, r.counter_base, l.counter_bits, r.rejected_by
		ORDER BY r.bucket, r.seq`)
	if err != nil {
		return s.clean(err)
	}
	defer rows.Close()
	for rows.Next() {
		var r IdentityReport
		var ts int64
		var base int32
		var bits int16
		if err := rows.Scan(&r.Bucket, &r.Textname, &ts, &base, &bits, &r.Loser, &r.Hashes); err != nil {
			return s.clean(err)
		}
		r.TS, r.Base, r.Bits = uint32(ts), uint32(base), int(bits)
		if err := fn(r); err != nil {
			return err
		}
	}
	return s.clean(rows.Err())
}

// BucketIdentities returns OONI's identities of the measurements of a
// bucket loaded with --measurement-uid, by report seq, each by ndx.
func (s *Sink) BucketIdentities(ctx context.Context, bucket string) (map[int32][]ooniuid.ID, error) {
	out := map[int32][]ooniuid.ID{}
	err := s.retry(ctx, "reading the identities of "+bucket, func(ctx context.Context, conn *pgx.Conn) error {
		clear(out)
		rows, err := conn.Query(ctx, `SELECT report, ndx, content_hash, uid_date FROM `+s.q("measurement_identities")+`
			WHERE bucket = $1::date ORDER BY report, ndx`, bucket)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var report, ndx int32
			var hash []byte
			var date *string
			if err := rows.Scan(&report, &ndx, &hash, &date); err != nil {
				return err
			}
			var id ooniuid.ID
			if hash != nil && len(hash) != len(id.Hash) || int(ndx) != len(out[report]) {
				return fmt.Errorf("bucket %s, report %d: identity %d out of place or %d bytes", bucket, report, ndx, len(hash))
			}
			copy(id.Hash[:], hash)
			if date != nil {
				id.UID = ooniuid.UID(*date, id.Hash)
			}
			out[report] = append(out[report], id)
		}
		return rows.Err()
	})
	return out, err
}

// BucketListedUIDs returns the measurement_uids the dead letters of a
// bucket list (those OONI gives to measurements no row carries), by
// textname.
func (s *Sink) BucketListedUIDs(ctx context.Context, bucket string) (map[string][]string, error) {
	out := map[string][]string{}
	err := s.retry(ctx, "reading the dead letters of "+bucket, func(ctx context.Context, conn *pgx.Conn) error {
		clear(out)
		rows, err := conn.Query(ctx, `SELECT textname, measurement_uids FROM `+s.q("dead_letters")+`
			WHERE bucket = $1::date AND measurement_uids IS NOT NULL`, bucket)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var tn string
			var uids []string
			if err := rows.Scan(&tn, &uids); err != nil {
				return err
			}
			out[tn] = append(out[tn], uids...)
		}
		return rows.Err()
	})
	return out, err
}

// ListedUIDs returns the dead letters of the committed buckets that list
// measurement_uids (those OONI gives to measurements no row carries):
// their bucket, textname and uids. Nothing is retried.
func (s *Sink) ListedUIDs(ctx context.Context) ([]deadletter.Record, error) {
	rows, err := s.conn.Query(ctx, `SELECT d.bucket::text, d.textname, d.measurement_uids FROM `+s.q("dead_letters")+` d
		JOIN `+s.q("ledger")+` l ON l.bucket = d.bucket AND l.status = 'committed'
		WHERE d.measurement_uids IS NOT NULL ORDER BY d.bucket, d.textname`)
	if err != nil {
		return nil, s.clean(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (deadletter.Record, error) {
		var d deadletter.Record
		err := r.Scan(&d.Bucket, &d.Textname, &d.MeasurementUIDs)
		return d, err
	})
	return out, s.clean(err)
}
