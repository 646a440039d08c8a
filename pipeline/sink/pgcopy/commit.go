package pgcopy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/backfill-dev/backfill/pipeline/collisions"
	"github.com/backfill-dev/backfill/pipeline/deadletter"
	"github.com/backfill-dev/backfill/pipeline/ooid"
	"github.com/backfill-dev/backfill/pipeline/sink"
	"github.com/backfill-dev/backfill/pipeline/stamped"
)

// commit runs one bucket's transaction: under the bucket's lock, the
// bucket's earlier rows go, its rows are written ahead of the verdict lock
// when they collide with nothing committed (writeAhead), and otherwise
// written after settle, under the verdict lock.
func (s *Sink) commit(ctx context.Context, conn *pgx.Conn, w *bucketWriter, c stamped.Counts) (stamped.Counts, error) {
	w.withdrawn = nil
	tx, err := conn.Begin(ctx)
	if err != nil {
		return c, err
	}
	defer rollback(ctx, tx)
	if err := s.lockBucket(ctx, tx, w.m); err != nil {
		return c, err
	}
	old, was, err := s.keptBefore(ctx, tx, w.m.Bucket)
	if err != nil {
		return c, err
	}
	w.was = was
	if err := s.removeBucket(ctx, tx, w.m.Bucket); err != nil {
		return c, err
	}
	out, winners, ahead, err := s.writeAhead(ctx, tx, w, c)
	if err != nil {
		return c, err
	}
	if !ahead {
		if err := s.verdictLock(ctx, tx); err != nil {
			return c, err
		}
		if err := s.checkScheme(ctx, tx, w.m); err != nil {
			return c, err
		}
		var msgs []string
		winners, msgs, err = s.settle(ctx, tx, w)
		if err != nil {
			return c, err
		}
		winners, msgs = w.withFloor(winners, msgs)
		out = adjustCounts(c, w.reports, winners)
		if err := s.writeRows(ctx, tx, w, winners, msgs); err != nil {
			return c, err
		}
		if err := s.markLedger(ctx, tx, w, out); err != nil {
			return c, err
		}
	}
	if ws := rewritten(w, winners, old, was); len(ws) > 0 {
		if s.opt.NoWithdraw {
			return c, &permanentError{&sink.WithdrawError{Bucket: w.m.Bucket, Withdrawals: ws}}
		}
		w.withdrawn = append(w.withdrawn, ws...)
	}
	if err := tx.Commit(ctx); err != nil {
		return out, err
	}
	s.committedBy(w)
	return out, nil
}

// verdictLock takes the schema's verdict lock for the transaction: it
// serialises the reading and writing of collision verdicts.
func (s *Sink) verdictLock(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext($1), 0)`, "backfill verdicts "+s.schema)
	return err
}

// writeAhead writes the bucket's rows before taking the verdict lock, with
// the verdicts its own reports give each other, so that buckets on other
// connections write theirs meanwhile. Under the lock it then checks that
// no committed report of another bucket collides with the bucket's and
// that none was rejected by the bucket's earlier rows: then settle would
// find those same verdicts and change nothing elsewhere, and the bucket's
// ledger row is written (ahead is true). Otherwise, or when a row's ID is
// taken meanwhile (a unique violation, or a deadlock with the transaction
// that took it), everything since the savepoint is undone and ahead is
// false: the bucket is settled under the lock, as if it had waited.
func (s *Sink) writeAhead(ctx context.Context, tx pgx.Tx, w *bucketWriter, c stamped.Counts) (out stamped.Counts, winners []string, ahead bool, err error) {
	if _, err := tx.Exec(ctx, `SAVEPOINT write_ahead`); err != nil {
		return c, nil, false, err
	}
	res, refs, ranges := ownReports(w)
	bits := w.m.Scheme.CounterBits
	winners, msgs, err := verdicts(res, refs, ranges, bits)
	if cerr := res.Close(); err != nil || cerr != nil {
		return c, nil, false, errors.Join(err, cerr)
	}
	winners, msgs = w.withFloor(winners, msgs)
	out = adjustCounts(c, w.reports, winners)
	err = s.writeRows(ctx, tx, w, winners, msgs)
	if err == nil {
		err = s.verdictLock(ctx, tx)
	}
	if err == nil {
		if err := s.checkScheme(ctx, tx, w.m); err != nil {
			return c, nil, false, err
		}
		ahead, err = s.alone(ctx, tx, w.m.Bucket, ranges, bits)
	}
	if err == nil && ahead {
		return out, winners, true, s.markLedger(ctx, tx, w, out)
	}
	switch {
	case err == nil:
		s.opt.Log("bucket %s: its reports collide with committed ones; settling them under the verdict lock", w.m.Bucket)
	case taken(err):
		s.opt.Log("bucket %s: an ID of it is held by another report, committed before or meanwhile (%v); settling it under the verdict lock", w.m.Bucket, s.clean(err))
	default:
		return c, nil, false, err
	}
	if _, err := tx.Exec(ctx, `ROLLBACK TO SAVEPOINT write_ahead`); err != nil {
		return c, nil, false, err
	}
	return c, nil, false, nil
}

// keptBefore returns how the bucket was made when another run committed
// it, and its reports that kept their IDs, with their measurements; none
// when it was never committed.
func (s *Sink) keptBefore(ctx context.Context, tx pgx.Tx, bucket string) (stamped.Meta, []stamped.ManifestEntry, error) {
	old := stamped.Meta{Bucket: bucket}
	err := tx.QueryRow(ctx, `SELECT counter_bits, sha1_offset, key_table, ndx_policy FROM `+s.q("ledger")+`
		WHERE bucket = $1 AND status = 'committed'`, bucket).Scan(&old.Scheme.CounterBits, &old.Scheme.SHA1Offset, &old.Scheme.Table, &old.NdxPolicy)
	if err == pgx.ErrNoRows {
		return old, nil, nil
	}
	if err != nil {
		return old, nil, err
	}
	rows, err := tx.Query(ctx, `SELECT textname, n FROM `+s.q("reports")+` WHERE bucket = $1 AND rejected_by IS NULL AND n > 0`, bucket)
	if err != nil {
		return old, nil, err
	}
	kept, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (stamped.ManifestEntry, error) {
		var e stamped.ManifestEntry
		var n int32
		err := r.Scan(&e.Textname, &n)
		e.N = uint32(n)
		return e, err
	})
	return old, kept, err
}

// rewritten returns the withdrawals of committing w, with its reports'
// winners, over the bucket's committed version (old, and the reports that
// kept their IDs in it): every cause of sink.Withdrawals. A bucket this
// sink committed has none: it is written once a run.
func rewritten(w *bucketWriter, winners []string, old stamped.Meta, was []stamped.ManifestEntry) []sink.Withdrawal {
	if len(was) == 0 || w.s.isMine(w.m.Bucket) {
		return nil
	}
	b := &stamped.Bucket{Meta: w.m, Reports: slices.Clone(w.reports)}
	for i := range b.Reports {
		b.Reports[i].RejectedBy = winners[i]
	}
	return sink.Withdrawals(b, old, was)
}

// taken reports whether err is a row's ID found taken by another
// transaction: a unique violation, or a deadlock while waiting to know.
func taken(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "23505" || pe.Code == "40P01")
}

// alone reports whether no committed report outside the bucket collides
// with ranges, and none was rejected by a report of the bucket.
func (s *Sink) alone(ctx context.Context, tx pgx.Tx, bucket string, ranges []collisions.Range, bits int) (bool, error) {
	hit, err := s.colliders(ctx, tx, ranges, bits)
	if err != nil {
		return false, err
	}
	for _, x := range hit {
		if x.bucket != bucket {
			return false, nil
		}
	}
	var orphans bool
	err = tx.QueryRow(ctx, `SELECT EXISTS (SELECT FROM `+s.q("reports")+` r
		WHERE left(r.rejected_by, 10) = $1 AND r.rejected_by IS NOT NULL AND r.bucket <> $1::date)`, bucket).Scan(&orphans)
	return !orphans, err
}

// adjustCounts takes the reports that lost their IDs out of the counts the
// run made (it counted every report as kept that came without a verdict).
func adjustCounts(c stamped.Counts, rs []stamped.Report, winners []string) stamped.Counts {
	out := c.Clone()
	for i := range rs {
		if winners[i] != "" && rs[i].RejectedBy == "" {
			out.Reports--
			out.Measurements -= int64(rs[i].N)
			out.AddCollisions(1)
		}
	}
	return out
}

// lockBucket takes the bucket's advisory lock for the transaction, waiting
// for (or, with SkipLocked, skipping) another run that holds it. With
// Resume, a bucket committed meanwhile with the same meta is skipped.
func (s *Sink) lockBucket(ctx context.Context, tx pgx.Tx, m stamped.Meta) error {
	key := "backfill bucket " + s.schema
	var ok bool
	if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock(hashtext($1), $2::date - date '1970-01-01')`, key, m.Bucket).Scan(&ok); err != nil {
		return err
	}
	if !ok {
		holder := "another session"
		var pid int32
		var app string
		if tx.QueryRow(ctx, `SELECT l.pid, coalesce(a.application_name, '') FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid
			WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
			AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
			AND l.classid = (hashtext($1)::bigint & 4294967295)::text::oid AND l.objid = ($2::date - date '1970-01-01')::text::oid
			LIMIT 1`, key, m.Bucket).Scan(&pid, &app) == nil {
			holder = fmt.Sprintf("server backend %d (%s)", pid, app)
		}
		if s.opt.SkipLocked {
			s.opt.Log("bucket %s: another run is loading it (%s); skipped (--skip-locked)", m.Bucket, holder)
			return fmt.Errorf("bucket %s is being loaded by another run: %w", m.Bucket, sink.ErrSkipped)
		}
		s.opt.Log("bucket %s: another run is loading it (%s); waiting for it to finish", m.Bucket, holder)
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext($1), $2::date - date '1970-01-01')`, key, m.Bucket); err != nil {
			return err
		}
	}
	if s.opt.Resume {
		done, err := s.committed(ctx, tx, m)
		if err != nil {
			return err
		}
		if done {
			s.opt.Log("bucket %s: committed meanwhile by another run with the same input and scheme; skipped (--resume)", m.Bucket)
			return fmt.Errorf("bucket %s was committed by another run: %w", m.Bucket, sink.ErrSkipped)
		}
	}
	return nil
}

// checkScheme refuses a bucket whose scheme differs from the committed
// buckets': IDs of two schemes cannot be checked against each other.
func (s *Sink) checkScheme(ctx context.Context, tx pgx.Tx, m stamped.Meta) error {
	var other string
	var theirs ooid.Scheme
	err := tx.QueryRow(ctx, `SELECT bucket::text, counter_bits, sha1_offset, key_table FROM `+s.q("ledger")+`
		WHERE status = 'committed' AND bucket <> $1 AND (counter_bits <> $2 OR sha1_offset <> $3 OR key_table <> $4) LIMIT 1`,
		m.Bucket, m.Scheme.CounterBits, m.Scheme.SHA1Offset, m.Scheme.Table).Scan(&other, &theirs.CounterBits, &theirs.SHA1Offset, &theirs.Table)
	if err == pgx.ErrNoRows {
		return nil
	}
	if err != nil {
		return err
	}
	return permanent("bucket %s of schema %s was made under %s and this run uses %s: IDs of two schemes cannot be checked against each other; load into another schema",
		other, pgx.Identifier{s.schema}.Sanitize(), theirs, m.Scheme)
}

// removeBucket deletes what an earlier run committed of the bucket. The
// measurement rows go by primary-key ranges of the bucket's kept reports.
func (s *Sink) removeBucket(ctx context.Context, tx pgx.Tx, bucket string) error {
	var bits int
	err := tx.QueryRow(ctx, `SELECT counter_bits FROM `+s.q("ledger")+` WHERE bucket = $1`, bucket).Scan(&bits)
	if err == pgx.ErrNoRows {
		return nil // never committed
	}
	if err != nil {
		return err
	}
	rows, err := tx.Query(ctx, `SELECT ts, counter_base, n FROM `+s.q("reports")+` WHERE bucket = $1 AND rejected_by IS NULL AND n > 0`, bucket)
	if err != nil {
		return err
	}
	var lo, hi []int64
	for rows.Next() {
		var ts int64
		var base, n int32
		if err := rows.Scan(&ts, &base, &n); err != nil {
			return err
		}
		lo, hi = appendIDRanges(lo, hi, collisions.Range{TS: uint32(ts), Base: uint32(base), N: uint32(n)}, bits)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if err := s.deleteMeasurements(ctx, tx, bucket, lo, hi); err != nil {
		return err
	}
	for _, t := range []string{"reports", "dead_letters", "measurement_identities"} {
		if _, err := tx.Exec(ctx, `DELETE FROM `+s.q(t)+` WHERE bucket = $1`, bucket); err != nil {
			return err
		}
	}
	return nil
}

func (s *Sink) deleteMeasurements(ctx context.Context, tx pgx.Tx, bucket string, lo, hi []int64) error {
	if len(lo) == 0 {
		return nil
	}
	_, err := tx.Exec(ctx, `DELETE FROM `+s.q("measurements")+` m USING unnest($2::int8[], $3::int8[]) r(lo, hi)
		WHERE m.ooid BETWEEN r.lo AND r.hi AND m.bucket = $1`, bucket, lo, hi)
	return err
}

// appendIDRanges appends the OOID ranges [lo, hi] of a report's counters:
// one, or two where the counters wrap.
func appendIDRanges(lo, hi []int64, r collisions.Range, bits int) ([]int64, []int64) {
	l1, h1, l2, h2 := spans(r, bits)
	top := ooid.NewBackfilledID(r.TS, 0).Int64()
	if h1 > l1 {
		lo, hi = append(lo, top|int64(l1)), append(hi, top|int64(h1-1))
	}
	if h2 > l2 {
		lo, hi = append(lo, top|int64(l2)), append(hi, top|int64(h2-1))
	}
	return lo, hi
}

// spans returns a report's counters as the half-open ranges [l1, h1) and
// [l2, h2) (empty when the counters do not wrap), as collisions.Range.Spans
// gives them.
func spans(r collisions.Range, bits int) (l1, h1, l2, h2 int32) {
	first, second, _ := r.Spans(bits)
	return int32(first[0]), int32(first[1]), int32(second[0]), int32(second[1])
}

// writeRows COPYs the bucket's reports, measurements and dead letters.
func (s *Sink) writeRows(ctx context.Context, tx pgx.Tx, w *bucketWriter, winners, msgs []string) error {
	b, bits := w.m.Bucket, w.m.Scheme.CounterBits
	day, _ := time.Parse(time.DateOnly, b)
	var kept []copyReport
	for i := range w.reports {
		if r := &w.reports[i]; winners[i] == "" && r.N > 0 {
			kept = append(kept, copyReport{ts: r.ID.TS, base: r.ID.CounterBase(), n: r.N, seq: int32(i)})
		}
	}
	if err := s.copyBinary(ctx, tx, "reports", reportColumns, whole(ctx, reportRows(pgDay(day), w.reports, winners, bits))); err != nil {
		return err
	}
	if err := s.copyMeasurements(ctx, tx, b, bits, kept); err != nil {
		return err
	}
	if w.m.UIDs {
		if err := s.copyIdentities(ctx, tx, day, w.reports); err != nil {
			return err
		}
	}
	dead := make([][]any, 0, len(w.dead))
	for i, d := range w.dead {
		dead = append(dead, []any{day, int32(i), d.File, d.Textname, d.Offset, d.Reason, d.Classified().Kind, d.Message, d.MeasurementUIDs})
	}
	var collided []deadletter.Record
	for i := range w.reports {
		if winners[i] != "" {
			collided = append(collided, collisions.Record(b, &w.reports[i], msgs[i]))
		}
	}
	collisions.SortRecords(collided)
	for _, d := range collided {
		dead = append(dead, []any{day, nil, d.File, d.Textname, d.Offset, d.Reason, d.Classified().Kind, d.Message, nil})
	}
	_, err := tx.CopyFrom(ctx, pgx.Identifier{s.schema, "dead_letters"}, deadColumns, pgx.CopyFromRows(dead))
	return err
}

// copyIdentities COPYs OONI's identity of every measurement of the
// bucket's reports, collision losers' too: its content hash, and the date
// of its measurement_uid (null where it has none).
func (s *Sink) copyIdentities(ctx context.Context, tx pgx.Tx, day time.Time, reports []stamped.Report) error {
	for i := range reports {
		if r := &reports[i]; len(r.IDs) != int(r.N) {
			return fmt.Errorf("pgcopy: report %s has %d measurements and %d identities", r.Textname, r.N, len(r.IDs))
		}
	}
	return s.copyBinary(ctx, tx, "measurement_identities", identityColumns, &identityRows{chunks: chunks{ctx: ctx}, day: pgDay(day), reports: reports})
}

var (
	identityColumns    = []string{"bucket", "report", "ndx", "content_hash", "uid_date"}
	measurementColumns = []string{"ooid", "bucket", "report", "ndx"}
	reportColumns      = []string{"bucket", "seq", "textname", "ts", "ts_source", "counter_base", "n", "span", "container", "offset", "size", "sha1", "rejected_by"}
	deadColumns        = []string{"bucket", "seq", "file", "textname", "offset", "reason", "kind", "message", "measurement_uids"}
)

func (s *Sink) markLedger(ctx context.Context, tx pgx.Tx, w *bucketWriter, c stamped.Counts) error {
	c = c.Clone()
	rejects, notices := c.Totals()
	_, err := tx.Exec(ctx, `INSERT INTO `+s.q("ledger")+` (bucket, input_fingerprint, counter_bits, sha1_offset, ndx_policy,
			reports, measurements, dead_letters, dead_letters_by_reason, rejects, notices, rejects_by_reason,
			bytes_in, bytes_out, status, error, started_at, finished_at, version, key_table, input, measurement_uid)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, 'committed', NULL, $15, clock_timestamp(), $16, $17, $18, $19)
		ON CONFLICT (bucket) DO UPDATE SET input_fingerprint = EXCLUDED.input_fingerprint, counter_bits = EXCLUDED.counter_bits,
			sha1_offset = EXCLUDED.sha1_offset, key_table = EXCLUDED.key_table, ndx_policy = EXCLUDED.ndx_policy, reports = EXCLUDED.reports,
			measurements = EXCLUDED.measurements, dead_letters = EXCLUDED.dead_letters,
			dead_letters_by_reason = EXCLUDED.dead_letters_by_reason, rejects = EXCLUDED.rejects, notices = EXCLUDED.notices,
			rejects_by_reason = EXCLUDED.rejects_by_reason, bytes_in = EXCLUDED.bytes_in, bytes_out = EXCLUDED.bytes_out,
			status = 'committed', error = NULL, started_at = EXCLUDED.started_at, finished_at = EXCLUDED.finished_at, version = EXCLUDED.version,
			input = EXCLUDED.input, measurement_uid = EXCLUDED.measurement_uid`,
		w.m.Bucket, w.m.Fingerprint, w.m.Scheme.CounterBits, w.m.Scheme.SHA1Offset, w.m.NdxPolicy,
		c.Reports, c.Measurements, rejects+notices, c.DeadLetters, rejects, notices, c.Rejects, c.BytesIn, c.BytesOut, w.started, w.m.Version,
		w.m.Scheme.Table, w.m.Source, w.m.UIDs)
	return err
}
