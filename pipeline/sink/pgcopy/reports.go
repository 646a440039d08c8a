package pgcopy

import (
	"context"
	"fmt"
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
