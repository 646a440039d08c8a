package records

import (
	"context"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// querier is what the writer sends its statements to: the pool (each
// statement commits on its own, as Cumulus's do) or a batch's transaction.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Begin(ctx context.Context) (pgx.Tx, error)
}

// savepoints runs each statement of a batch under its own savepoint, so
// that a statement that fails undoes itself only, as it would on its own
// outside a transaction, and the batch goes on. The savepoint, the
// statement and its release go to the server together, in one round trip
// (a pipeline); a statement that fails costs a second one, to roll back to
// its savepoint.
type savepoints struct{ tx pgx.Tx }

func (s savepoints) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	var tag pgconn.CommandTag
	err := s.run(ctx, sql, args, func(br pgx.BatchResults) (err error) {
		tag, err = br.Exec()
		return err
	})
	return tag, err
}

func (s savepoints) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return savepointRow{s, ctx, sql, args}
}

// Begin is a savepoint, as in a transaction.
func (s savepoints) Begin(ctx context.Context) (pgx.Tx, error) { return s.tx.Begin(ctx) }

// run sends the statement between a savepoint and its release, and reads
// its result with read; a statement that fails (pgx.ErrNoRows aside) is
// rolled back to the savepoint. When the savepoint or the rollback fails,
// the transaction is aborted, and every later statement of the batch
// fails with it, so the batch is written again message by message.
func (s savepoints) run(ctx context.Context, sql string, args []any, read func(pgx.BatchResults) error) error {
	b := &pgx.Batch{}
	b.Queue("SAVEPOINT statement")
	b.Queue(sql, args...)
	b.Queue("RELEASE SAVEPOINT statement")
	br := s.tx.SendBatch(ctx, b)
	if _, err := br.Exec(); err != nil {
		_ = br.Close() // its error is err
		return err
	}
	err := read(br)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		_ = br.Close() // its error is err
		if _, rerr := s.tx.Exec(ctx, "ROLLBACK TO SAVEPOINT statement; RELEASE SAVEPOINT statement"); rerr != nil {
			return errors.Join(err, rerr) // the transaction is lost with it
		}
		return err
	}
	if _, rerr := br.Exec(); rerr != nil {
		_ = br.Close() // its error is rerr
		return rerr
	}
	if cerr := br.Close(); cerr != nil {
		return cerr
	}
	return err
}

type savepointRow struct {
	s    savepoints
	ctx  context.Context
	sql  string
	args []any
}

func (r savepointRow) Scan(dest ...any) error {
	return r.s.run(r.ctx, r.sql, r.args, func(br pgx.BatchResults) error { return br.QueryRow().Scan(dest...) })
}

// granuleTx is the transaction of one granule's write: a transaction of
// its own, or a savepoint of a batch's.
type granuleTx interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
	Commit(ctx context.Context) error
	Rollback(ctx context.Context) error
}

// beginGranule begins a granule's write: its transaction, the advisory
// lock on the granule ID that every writer takes before it looks, and the
// look for the ID in another collection (other), in one round trip in a
// batch (two on their own: the BEGIN, then the rest). In a batch, the
// write is a savepoint, or, when direct, the batch's transaction itself.
func beginGranule(ctx context.Context, q querier, direct pgx.Tx, granuleID string, collCID int64) (granuleTx, bool, error) {
	b := &pgx.Batch{}
	var tx granuleTx
	sp, inBatch := q.(savepoints)
	switch {
	case direct != nil:
		tx, inBatch = batchTx{direct}, false
	case inBatch:
		b.Queue("SAVEPOINT granule")
		tx = &savepointTx{tx: sp.tx}
	default:
		t, err := q.Begin(ctx)
		if err != nil {
			return nil, false, err
		}
		tx = t
	}
	b.Queue("SELECT pg_advisory_xact_lock(hashtextextended($1, 7301))", granuleID)
	b.Queue("SELECT EXISTS (SELECT 1 FROM granules WHERE granule_id = $1 AND collection_cumulus_id <> $2)", granuleID, collCID)
	br := tx.SendBatch(ctx, b)
	var other bool
	err := func() error {
		if inBatch {
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
		if _, err := br.Exec(); err != nil {
			return err
		}
		return br.QueryRow().Scan(&other)
	}()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		tx.Rollback(ctx)
		return nil, false, err
	}
	return tx, other, nil
}

// batchTx is a granule's write that cannot fail on its data, in a batch:
// the batch's transaction, which it neither commits nor rolls back.
type batchTx struct{ pgx.Tx }

func (batchTx) Commit(context.Context) error   { return nil }
func (batchTx) Rollback(context.Context) error { return nil }

// savepointTx is a granule's write in a batch: the savepoint "granule" of
// the batch's transaction.
type savepointTx struct {
	tx   pgx.Tx
	done bool
}

func (s *savepointTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return s.tx.QueryRow(ctx, sql, args...)
}

func (s *savepointTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return s.tx.SendBatch(ctx, b)
}

func (s *savepointTx) Commit(ctx context.Context) error {
	s.done = true
	_, err := s.tx.Exec(ctx, "RELEASE SAVEPOINT granule")
	return err
}

// Rollback undoes the granule's write; after Commit, it does nothing.
func (s *savepointTx) Rollback(ctx context.Context) error {
	if s.done {
		return nil
	}
	s.done = true
	_, err := s.tx.Exec(ctx, "ROLLBACK TO SAVEPOINT granule; RELEASE SAVEPOINT granule")
	return err
}

// Outcome of one message of a batch.
type BatchResult struct {
	Result Result
	Err    error // the message belongs in the Dead Letter Archive
}

// WriteBatch writes messages in one transaction, in order, with the
// verdict of each message and each granule its own, as if each were
// written alone: a statement that fails is undone by itself (a
// savepoint), and every other record of the batch is kept. One commit
// makes the batch durable; until it, nothing of the batch is visible.
//
// When the batch cannot commit as a whole (a deadlock with another
// writer's batch over granule locks, a lost connection, an aborted
// transaction), it is rolled back and its messages are written one by one,
// each statement committing on its own, so that the verdicts are the same
// ones. The error is for the batch as a whole: the database could not be
// written at all, and no result is valid.
func (w *Writer) WriteBatch(ctx context.Context, ins []Input) ([]BatchResult, error) {
	if len(ins) > 1 {
		if out, ok := w.tryBatch(ctx, ins); ok {
			return out, nil
		}
		w.fallbacks.Add(1)
	}
	out := make([]BatchResult, len(ins))
	for i, in := range ins {
		w.before(i)
		res, err := w.Write(ctx, in)
		if err != nil && isConnectionError(err) {
			return nil, err
		}
		out[i] = BatchResult{res, err}
	}
	return out, nil
}

// tryBatch writes ins in one transaction; ok is false when it rolled back.
func (w *Writer) tryBatch(ctx context.Context, ins []Input) ([]BatchResult, bool) {
	tx, err := w.pool.Begin(ctx)
	if err != nil {
		return nil, false
	}
	defer tx.Rollback(ctx)
	bw := *w
	bw.q, bw.direct, bw.found = savepoints{tx}, tx, map[string]int64{}
	out := make([]BatchResult, len(ins))
	for i, in := range ins {
		w.before(i)
		res, err := bw.Write(ctx, in)
		if err != nil && mustRetryAlone(err) {
			return nil, false
		}
		out[i] = BatchResult{res, err}
	}
	if tx.Commit(ctx) != nil {
		return nil, false
	}
	return out, true
}

// mustRetryAlone tells errors that belong to the batch, not to a message:
// contention between transactions, and a transaction or connection that
// is gone.
func mustRetryAlone(err error) bool {
	return anyOf(err, func(e error) bool {
		var pe *pgconn.PgError
		if errors.As(e, &pe) {
			switch pe.Code {
			case "40P01", "40001", "25P02", "55P03":
				return true
			}
		}
		return connectionError(e)
	})
}

// isConnectionError tells an error of the connection (not of the data):
// the message is not at fault and must not be archived as if it were.
func isConnectionError(err error) bool { return err != nil && anyOf(err, connectionError) }

// anyOf tells whether pred holds for err or, for an AggregateError (one
// message's granule errors), for any of its errors.
func anyOf(err error, pred func(error) bool) bool {
	var agg *AggregateError
	if errors.As(err, &agg) {
		for _, e := range agg.Errs {
			if anyOf(e, pred) {
				return true
			}
		}
		return false
	}
	return pred(err)
}

func connectionError(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		c := pe.Code[:2]
		return c == "08" || c == "57" || c == "53"
	}
	var ce *pgconn.ConnectError
	return errors.As(err, &ce) || pgconn.SafeToRetry(err) || pgconn.Timeout(err) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || isClosedConn(err)
}

func isClosedConn(err error) bool {
	s := err.Error()
	for _, m := range []string{"conn closed", "connection reset", "broken pipe", "unexpected EOF", "failed to deallocate", "connection refused"} {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}

// before is called with the index of each message of a batch before it is
// written (tests set the clock with it).
func (w *Writer) before(i int) {
	if w.beforeMessage != nil {
		w.beforeMessage(i)
	}
}

// Fallbacks is how many batches could not commit as a whole and were
// written one message at a time.
func (w *Writer) Fallbacks() int64 { return w.fallbacks.Load() }
