package pgcopy

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/backfill-dev/backfill/pipeline/deadletter"
	"github.com/backfill-dev/backfill/pipeline/ooid"
	"github.com/backfill-dev/backfill/pipeline/stamped"
)

// State implements sink.Sink: every bucket of the ledger with its status,
// counts and, for a failed one, its error, by bucket.
func (s *Sink) State(ctx context.Context) ([]stamped.State, error) {
	var out []stamped.State
	err := s.retry(ctx, "reading the ledger", func(ctx context.Context, conn *pgx.Conn) (err error) {
		out, err = s.state(ctx, conn)
		return err
	})
	return out, err
}

func (s *Sink) state(ctx context.Context, conn *pgx.Conn) ([]stamped.State, error) {
	rows, err := conn.Query(ctx, `SELECT bucket::text, input_fingerprint, input, counter_bits, sha1_offset, key_table, ndx_policy, version,
		status, coalesce(error, ''), reports, measurements, dead_letters_by_reason, rejects_by_reason, bytes_in, bytes_out,
		coalesce(finished_at, started_at), measurement_uid
		FROM `+s.q("ledger")+` ORDER BY bucket`)
	if err != nil {
		return nil, s.clean(err)
	}
	defer rows.Close()
	var out []stamped.State
	for rows.Next() {
		st := stamped.State{Counts: stamped.NewCounts()}
		var bits, off int16
		var table string
		var finished time.Time
		if err := rows.Scan(&st.Meta.Bucket, &st.Meta.Fingerprint, &st.Meta.Source, &bits, &off, &table, &st.Meta.NdxPolicy, &st.Meta.Version,
			&st.Status, &st.Error, &st.Counts.Reports, &st.Counts.Measurements, &st.Counts.DeadLetters, &st.Counts.Rejects,
			&st.Counts.BytesIn, &st.Counts.BytesOut, &finished, &st.Meta.UIDs); err != nil {
			return nil, s.clean(err)
		}
		st.Meta.Scheme = ooid.Scheme{CounterBits: int(bits), SHA1Offset: int(off), Table: table}
		st.Finished = finished.UTC()
		out = append(out, st)
	}
	return out, s.clean(rows.Err())
}

// RecordInput implements sink.InputRecorder: it replaces the rows of
// input_dead_letters, in one transaction.
func (s *Sink) RecordInput(ctx context.Context, recs []deadletter.Record) error {
	return s.retry(ctx, "recording the input's dead letters", func(ctx context.Context, conn *pgx.Conn) error {
		return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `DELETE FROM `+s.q("input_dead_letters")); err != nil {
				return s.clean(err)
			}
			for _, r := range recs {
				r = r.Classified()
				if _, err := tx.Exec(ctx, `INSERT INTO `+s.q("input_dead_letters")+` (file, reason, kind, message) VALUES ($1, $2, $3, $4)`,
					r.File, r.Reason, r.Kind, r.Message); err != nil {
					return s.clean(err)
				}
			}
			return nil
		})
	})
}

// InputDeadLetters reads what RecordInput recorded last.
func (s *Sink) InputDeadLetters(ctx context.Context) ([]deadletter.Record, error) {
	var out []deadletter.Record
	err := s.retry(ctx, "reading the input's dead letters", func(ctx context.Context, conn *pgx.Conn) error {
		out = nil
		rows, err := conn.Query(ctx, `SELECT file, reason, kind, message FROM `+s.q("input_dead_letters")+` ORDER BY kind, file`)
		if err != nil {
			return s.clean(err)
		}
		defer rows.Close()
		for rows.Next() {
			var r deadletter.Record
			if err := rows.Scan(&r.File, &r.Reason, &r.Kind, &r.Message); err != nil {
				return s.clean(err)
			}
			out = append(out, r)
		}
		return s.clean(rows.Err())
	})
	return out, err
}
