package pgcopy

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/backfill-dev/backfill/pipeline/ooid"
	"github.com/backfill-dev/backfill/pipeline/sink"
	"github.com/backfill-dev/backfill/pipeline/sink/pgcopy/pgschema"
	"github.com/backfill-dev/backfill/pipeline/stamped"
)

// BulkSink loads into tables without their indexes and constraints, the
// measurements' primary key included, one transaction per bucket, one
// bucket at a time, and builds them at Finish: a COPY into a table without
// a key and a build of the key afterwards cost the server less than
// keeping it up row by row. The run settles the collision verdicts (it is
// a sink.Rewriter), so the end state equals the per-bucket path's. It
// needs an empty schema, or one whose bulk load stopped before Finish
// (then --resume carries on).
type BulkSink struct{ *Sink }

var _ sink.Rewriter = (*BulkSink)(nil)

// OpenBulk is Open for a bulk load.
func OpenBulk(ctx context.Context, opt Options) (*BulkSink, error) {
	opt.Bulk = true
	s, err := Open(ctx, opt)
	if err != nil {
		return nil, err
	}
	return &BulkSink{s}, nil
}

// prepareBulk drops the indexes and constraints a bulk load builds at the
// end, in an empty schema.
func (s *Sink) prepareBulk(ctx context.Context, conn *pgx.Conn) error {
	var rows, indexed bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM `+s.q("reports")+`) OR EXISTS (SELECT FROM `+s.q("ledger")+`)`).Scan(&rows); err != nil {
		return s.clean(err)
	}
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_constraint WHERE conname = 'reports_pkey' AND conrelid = to_regclass($1))`,
		s.q("reports")).Scan(&indexed); err != nil {
		return s.clean(err)
	}
	if rows && indexed {
		return permanent("--bulk loads into an empty schema, and %s already holds buckets: load them per bucket (without --bulk), or into a new schema",
			pgx.Identifier{s.schema}.Sanitize())
	}
	if rows {
		s.opt.Log("schema %s holds a bulk load that stopped before its indexes were built; carrying on", pgx.Identifier{s.schema}.Sanitize())
	}
	return s.clean(pgschema.DropConstraints(ctx, conn, s.schema))
}

// Finish builds the indexes and constraints, with the session's memory
// for the builds sized to the data (Options.Build), and analyzes the
// columns the tool's statements are planned with (pgschema.Analyze).
// (Building the measurements' key beside the reports' indexes, on a
// second connection, saves nothing: the key's build already keeps both
// cores of a 2-core server busy.)
func (b *BulkSink) Finish(ctx context.Context) error {
	// Building an index is as long as the table is large, and silent: the
	// probes of the bound on silence find the session at work.
	return b.retry(ctx, "building indexes", func(ctx context.Context, conn *pgx.Conn) error {
		build := b.opt.Build
		build.Log = b.opt.Progress
		if err := pgschema.BuildConstraints(ctx, conn, b.schema, build); err != nil {
			return err
		}
		return pgschema.Analyze(ctx, conn, b.schema)
	})
}

// commitBulk runs a bucket's transaction of a bulk load: the verdicts are
// the run's, and earlier rows of the bucket are found without indexes.
func (s *Sink) commitBulk(ctx context.Context, conn *pgx.Conn, w *bucketWriter, c stamped.Counts) (stamped.Counts, error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return c, err
	}
	defer rollback(ctx, tx)
	if err := s.lockBucket(ctx, tx, w.m); err != nil {
		return c, err
	}
	if err := s.checkScheme(ctx, tx, w.m); err != nil {
		return c, err
	}
	var again bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT FROM `+s.q("ledger")+` WHERE bucket = $1)`, w.m.Bucket).Scan(&again); err != nil {
		return c, err
	}
	if again {
		for _, t := range []string{"measurements", "reports", "dead_letters", "measurement_identities"} {
			if _, err := tx.Exec(ctx, `DELETE FROM `+s.q(t)+` WHERE bucket = $1`, w.m.Bucket); err != nil {
				return c, err
			}
		}
	}
	// The run's verdicts, and their collision records, are the sink's.
	if err := s.writeRows(ctx, tx, w, w.floor, w.floorMsg); err != nil {
		return c, err
	}
	if err := s.markLedger(ctx, tx, w, c); err != nil {
		return c, err
	}
	return c, tx.Commit(ctx)
}

// Buckets implements sink.Rewriter.
func (b *BulkSink) Buckets(ctx context.Context) ([]string, error) {
	var out []string
	err := b.retry(ctx, "listing buckets", func(ctx context.Context, conn *pgx.Conn) error {
		rows, err := conn.Query(ctx, `SELECT bucket::text FROM `+b.q("ledger")+` WHERE status = 'committed' ORDER BY bucket`)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	return out, err
}

// Manifest implements sink.Rewriter.
func (b *BulkSink) Manifest(ctx context.Context, bucket string) (stamped.Meta, []stamped.ManifestEntry, error) {
	var m stamped.Meta
	var out []stamped.ManifestEntry
	err := b.retry(ctx, "reading bucket "+bucket, func(ctx context.Context, conn *pgx.Conn) error {
		m = stamped.Meta{Bucket: bucket}
		if err := conn.QueryRow(ctx, `SELECT input_fingerprint, input, counter_bits, sha1_offset, key_table, ndx_policy, version, measurement_uid FROM `+b.q("ledger")+`
			WHERE bucket = $1 AND status = 'committed'`, bucket).Scan(&m.Fingerprint, &m.Source, &m.Scheme.CounterBits, &m.Scheme.SHA1Offset, &m.Scheme.Table, &m.NdxPolicy, &m.Version, &m.UIDs); err != nil {
			return err
		}
		rows, err := conn.Query(ctx, `SELECT textname, n, coalesce(rejected_by, '') FROM `+b.q("reports")+`
			WHERE bucket = $1 ORDER BY seq`, bucket)
		if err != nil {
			return err
		}
		out = out[:0]
		for rows.Next() {
			var r stamped.ManifestEntry
			var n int32
			if err := rows.Scan(&r.Textname, &n, &r.RejectedBy); err != nil {
				return err
			}
			r.N = uint32(n)
			out = append(out, r)
		}
		return rows.Err()
	})
	return m, out, err
}

// Reassign implements sink.Rewriter.
func (b *BulkSink) Reassign(ctx context.Context, _ ooid.Scheme, bucket string, verdicts []stamped.Verdict) error {
	return b.retry(ctx, "bucket "+bucket, func(ctx context.Context, conn *pgx.Conn) error {
		tx, err := conn.Begin(ctx)
		if err != nil {
			return err
		}
		defer rollback(ctx, tx)
		var bits int
		if err := tx.QueryRow(ctx, `SELECT counter_bits FROM `+b.q("ledger")+` WHERE bucket = $1`, bucket).Scan(&bits); err != nil {
			return err
		}
		for _, v := range verdicts {
			xs, err := b.query(ctx, tx, `SELECT `+storedColumns+` FROM `+b.q("reports")+` r WHERE r.bucket = $1 AND r.textname = $2 ORDER BY r.seq LIMIT 1`, bucket, v.Textname)
			if err != nil {
				return err
			}
			if len(xs) == 0 {
				return permanent("bucket %s has no report %s", bucket, v.Textname)
			}
			if xs[0].winner == v.RejectedBy {
				continue
			}
			if err := b.reassign(ctx, tx, xs[0], v.RejectedBy, v.Message, bits); err != nil {
				return err
			}
		}
		return tx.Commit(ctx)
	})
}
