package pgcopy

import (
	"cmp"
	"context"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/backfill-dev/backfill/pipeline/collisions"
	"github.com/backfill-dev/backfill/pipeline/deadletter"
	"github.com/backfill-dev/backfill/pipeline/sink"
)

// stored is a committed report as the collision verdicts see it.
type stored struct {
	bucket    string
	seq       int32
	textname  string
	rg        collisions.Range
	winner    string // rejected_by; "" when it keeps its IDs
	container string
	offset    int64
}

type storedKey struct {
	bucket string
	seq    int32
}

// settle decides the collision verdicts of the bucket's reports against
// every committed report, and changes those of committed reports that now
// lose (or, their winner gone with the bucket's old rows, win) their IDs.
// It runs under the verdict lock, after the bucket's old rows are gone, and
// returns, for each report of the bucket, the winner's textname ("" when it
// keeps its IDs) and the dead-letter message.
//
// A report is rejected exactly when a report it collides with sorts first;
// its winner is the first-sorting such report (docs/design.md §3, as
// collisions.Resolver applies it). So a committed report's winner is the
// first of the winner it has and the new reports that beat it; the
// committed reports whose winner was in the bucket (orphans) are decided
// again from all the reports they collide with.
func (s *Sink) settle(ctx context.Context, tx pgx.Tx, w *bucketWriter) ([]string, []string, error) {
	bits := w.m.Scheme.CounterBits
	res, refs, ranges := ownReports(w)
	defer func() { _ = res.Close() }() // its textnames are read
	hit, err := s.colliders(ctx, tx, ranges, bits)
	if err != nil {
		return nil, nil, err
	}
	orphans, err := s.query(ctx, tx, `SELECT `+storedColumns+` FROM `+s.q("reports")+` r
		WHERE left(r.rejected_by, 10) = $1 AND r.rejected_by IS NOT NULL`, w.m.Bucket)
	if err != nil {
		return nil, nil, err
	}
	all := map[storedKey]*stored{}
	orphan := map[storedKey]bool{}
	var oranges []collisions.Range
	for _, o := range orphans {
		k := storedKey{o.bucket, o.seq}
		all[k], orphan[k] = o, true
		oranges = append(oranges, o.rg)
	}
	theirs, err := s.colliders(ctx, tx, oranges, bits)
	if err != nil {
		return nil, nil, err
	}
	decide := map[storedKey]bool{} // hit by a new report, or an orphan
	for _, x := range hit {
		k := storedKey{x.bucket, x.seq}
		all[k], decide[k] = x, true
	}
	for k := range orphan {
		decide[k] = true
	}
	for _, x := range theirs {
		if _, ok := all[storedKey{x.bucket, x.seq}]; !ok {
			all[storedKey{x.bucket, x.seq}] = x
		}
	}
	keys := make([]storedKey, 0, len(all))
	for k := range all {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b storedKey) int { return cmp.Or(cmp.Compare(a.bucket, b.bucket), cmp.Compare(a.seq, b.seq)) })
	ref := map[storedKey]uint32{}
	for _, k := range keys {
		ref[k], _ = res.Add(all[k].textname, all[k].rg, 1)
	}

	winners, msgs, err := verdicts(res, refs, ranges, bits)
	if err != nil {
		return nil, nil, err
	}
	var withdrawn []sink.Withdrawal
	for _, k := range keys {
		if !decide[k] {
			continue
		}
		x := all[k]
		want, msg := "", ""
		wr, beaten := res.Winner(ref[k])
		if beaten {
			want, msg = res.Name(wr), collisions.Message(res.Name(wr), res.Range(wr), x.rg, bits)
		}
		if !orphan[k] && x.winner != "" && (want == "" || x.winner < want) {
			continue // its winner stands
		}
		if want == x.winner {
			continue
		}
		if x.winner == "" && x.bucket != w.m.Bucket && s.published(x.bucket, x.textname) {
			// IDs published before the run, taken back.
			withdrawn = append(withdrawn, sink.Withdrawal{Bucket: x.bucket, Textname: x.textname, N: x.rg.N, Winner: want, Cause: sink.CauseCollision})
			if s.opt.NoWithdraw {
				continue
			}
		}
		if err := s.reassign(ctx, tx, x, want, msg, bits); err != nil {
			return nil, nil, err
		}
	}
	if len(withdrawn) > 0 && s.opt.NoWithdraw {
		return nil, nil, &permanentError{&sink.WithdrawError{Bucket: w.m.Bucket, Withdrawals: withdrawn}}
	}
	w.withdrawn = withdrawn
	return winners, msgs, res.Err()
}

// ownReports returns a Resolver holding the bucket's reports (group 0),
// their refs in it and their ranges.
func ownReports(w *bucketWriter) (*collisions.Resolver, []uint32, []collisions.Range) {
	res := collisions.NewResolver(w.m.Scheme.CounterBits)
	refs := make([]uint32, len(w.reports))
	ranges := make([]collisions.Range, len(w.reports))
	for i := range w.reports {
		ranges[i] = collisions.RangeOf(w.reports[i].ID, w.reports[i].N)
		refs[i], _ = res.Add(w.reports[i].Textname, ranges[i], 0)
	}
	return res, refs, ranges
}

// verdicts returns, for each of the bucket's reports (refs in res, with
// their ranges), its winner's textname ("" when it keeps its IDs) and its
// collision message.
func verdicts(res *collisions.Resolver, refs []uint32, ranges []collisions.Range, bits int) (winners, msgs []string, err error) {
	winners, msgs = make([]string, len(refs)), make([]string, len(refs))
	for i, ref := range refs {
		if wr, ok := res.Winner(ref); ok {
			winners[i] = res.Name(wr)
			msgs[i] = collisions.Message(res.Name(wr), res.Range(wr), ranges[i], bits)
		}
	}
	return winners, msgs, res.Err()
}

const storedColumns = `r.bucket::text, r.seq, r.textname, r.ts, r.counter_base, r.n, coalesce(r.rejected_by, ''), r.container, r."offset"`

func (s *Sink) query(ctx context.Context, tx pgx.Tx, sql string, args ...any) ([]*stored, error) {
	rows, err := tx.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	var out []*stored
	for rows.Next() {
		x := new(stored)
		var ts int64
		var base, n int32
		if err := rows.Scan(&x.bucket, &x.seq, &x.textname, &ts, &base, &n, &x.winner, &x.container, &x.offset); err != nil {
			return nil, err
		}
		x.rg = collisions.Range{TS: uint32(ts), Base: uint32(base), N: uint32(n)}
		out = append(out, x)
	}
	return out, rows.Err()
}

// colliders returns the committed reports whose IDs overlap any of
// ranges. The btree on ts finds the reports of the ranges' timestamps
// (few reports share one), and their spans are compared here.
func (s *Sink) colliders(ctx context.Context, tx pgx.Tx, ranges []collisions.Range, bits int) ([]*stored, error) {
	byTS := map[uint32][]collisions.Range{}
	var ts []int64
	for _, rg := range ranges {
		if rg.N == 0 {
			continue
		}
		if _, ok := byTS[rg.TS]; !ok {
			ts = append(ts, int64(rg.TS))
		}
		byTS[rg.TS] = append(byTS[rg.TS], rg)
	}
	if len(ts) == 0 {
		return nil, nil
	}
	same, err := s.query(ctx, tx, `SELECT `+storedColumns+` FROM `+s.q("reports")+` r WHERE r.ts = ANY($1::int8[]) AND r.n > 0`, ts)
	if err != nil {
		return nil, err
	}
	out := same[:0]
	for _, x := range same {
		for _, rg := range byTS[x.rg.TS] {
			if rg.Overlaps(x.rg, bits) {
				out = append(out, x)
				break
			}
		}
	}
	return out, nil
}

// reassign records a committed report's new verdict: want is its winner
// ("" when it keeps its IDs again) and msg the dead-letter message.
func (s *Sink) reassign(ctx context.Context, tx pgx.Tx, x *stored, want, msg string, bits int) error {
	var winner any
	if want != "" {
		winner = want
	}
	if _, err := tx.Exec(ctx, `UPDATE `+s.q("reports")+` SET rejected_by = $3 WHERE bucket = $1 AND seq = $2`, x.bucket, x.seq, winner); err != nil {
		return err
	}
	collision := `bucket = $1 AND seq IS NULL AND reason = '` + deadletter.Collision + `' AND textname = $2`
	switch {
	case x.winner == "": // loses its IDs
		s.opt.Log("bucket %s: report %s loses its IDs to %s (collision)", x.bucket, x.textname, want)
		lo, hi := appendIDRanges(nil, nil, x.rg, bits)
		if err := s.deleteMeasurements(ctx, tx, x.bucket, lo, hi); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO `+s.q("dead_letters")+` (bucket, seq, file, textname, "offset", reason, kind, message)
			VALUES ($1, NULL, $2, $3, $4, $5, $6, $7)`, x.bucket, x.container, x.textname, x.offset, deadletter.Collision, deadletter.Reject, msg); err != nil {
			return err
		}
		return s.adjustLedger(ctx, tx, x.bucket, -1, -int64(x.rg.N), 1)
	case want != "": // loses them to another report
		_, err := tx.Exec(ctx, `UPDATE `+s.q("dead_letters")+` SET message = $3 WHERE `+collision, x.bucket, x.textname, msg)
		return err
	default: // keeps them again
		s.opt.Log("bucket %s: report %s keeps its IDs again (its winner %s is gone)", x.bucket, x.textname, x.winner)
		if _, err := tx.Exec(ctx, `DELETE FROM `+s.q("dead_letters")+` WHERE `+collision, x.bucket, x.textname); err != nil {
			return err
		}
		if err := s.copyMeasurements(ctx, tx, x.bucket, bits, []copyReport{{ts: x.rg.TS, base: x.rg.Base, n: x.rg.N, seq: x.seq}}); err != nil {
			return err
		}
		return s.adjustLedger(ctx, tx, x.bucket, 1, int64(x.rg.N), -1)
	}
}

func (s *Sink) adjustLedger(ctx context.Context, tx pgx.Tx, bucket string, reports, measurements, collided int64) error {
	// bump adds $4 to the collision count of a by-reason column, dropping
	// the key at zero as stamped.Counts does.
	bump := func(col string) string {
		return col + ` = CASE WHEN coalesce((` + col + `->>'collision')::bigint, 0) + $4 = 0
			THEN ` + col + ` - 'collision'
			ELSE jsonb_set(` + col + `, '{collision}', to_jsonb(coalesce((` + col + `->>'collision')::bigint, 0) + $4)) END`
	}
	_, err := tx.Exec(ctx, `UPDATE `+s.q("ledger")+` SET reports = reports + $2, measurements = measurements + $3,
		dead_letters = dead_letters + $4, rejects = rejects + $4, `+bump("dead_letters_by_reason")+`, `+bump("rejects_by_reason")+`
		WHERE bucket = $1`, bucket, reports, measurements, collided)
	return err
}
