package pgcopy

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/backfill-dev/backfill/pipeline/sink"
)

// retry runs op on a connection of the sink's that no other call is using
// (waiting for one to be free), reconnecting first when the connection is
// gone, and runs it again after a fault that a new connection may cure (a
// lost connection, a server shutting down or starting, a deadlock or
// serialisation failure), waiting RetryWait, then twice as long each time,
// at most Retries times.
func (s *Sink) retry(ctx context.Context, what string, op func(context.Context, *pgx.Conn) error) error {
	return s.retryWithin(ctx, what, s.opt.Timeout, op)
}

// retryWithin is retry with each attempt bounded by timeout (none when 0):
// an attempt past it is dropped with its connection, a *timeoutError, and
// made again.
func (s *Sink) retryWithin(ctx context.Context, what string, timeout time.Duration, op func(context.Context, *pgx.Conn) error) error {
	slot, err := s.take(ctx)
	if err != nil {
		return err
	}
	defer s.give(slot)
	wait := s.opt.RetryWait
	for attempt := 0; ; attempt++ {
		actx, cancel := ctx, context.CancelFunc(func() {})
		if timeout > 0 {
			actx, cancel = context.WithTimeout(ctx, timeout)
		}
		err := s.connect(actx, slot)
		if err == nil {
			err = op(actx, *slot)
			if err == nil || errors.Is(err, sink.ErrSkipped) {
				cancel()
				return err
			}
			err = s.clean(err)
		}
		timedOut := actx.Err() != nil && ctx.Err() == nil
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if timedOut {
			err = &timeoutError{timeout: timeout}
			// The connection may be anywhere in the protocol, and its
			// server session, cut off from us, may hold the bucket's lock:
			// it is ended from the next connection.
			if *slot != nil {
				s.zombie((*slot).PgConn().PID())
			}
			_ = closeConn(slot) // a connection that timed out: dropped
		}
		if !Retryable(err) {
			return s.named(fmt.Errorf("%s: %w", what, err))
		}
		if *slot != nil && (*slot).PgConn().TxStatus() != 'I' {
			_ = closeConn(slot) // a connection left inside a failed transaction is not reused
		}
		if attempt >= s.opt.Retries {
			return s.named(fmt.Errorf("%s: giving up after %d attempts: %w", what, attempt+1, err))
		}
		s.opt.Log("%s: attempt %d failed (%v); retrying in %s", what, attempt+1, err, wait)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return ctx.Err()
		}
		wait = min(2*wait, s.opt.MaxRetryWait)
	}
}

// take waits for a connection slot no other call is using; give hands it
// back.
func (s *Sink) take(ctx context.Context) (**pgx.Conn, error) {
	select {
	case slot := <-s.slots:
		return slot, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (s *Sink) give(slot **pgx.Conn) { s.slots <- slot }

// Retryable reports whether a new connection or a new try may cure err.
func Retryable(err error) bool {
	var p *permanentError
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.As(err, &p) {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case len(pe.Code) == 5 && pe.Code[:2] == "08": // connection exception
			return true
		case pe.Code == "57P01", pe.Code == "57P02", pe.Code == "57P03", pe.Code == "57P05": // admin or crash shutdown, cannot connect now, idle session ended
			return true
		case pe.Code == "40001", pe.Code == "40P01": // serialization failure, deadlock
			return true
		case pe.Code == "53300": // too many connections
			return true
		}
		return false // the statement or the data: trying again gives the same error
	}
	// Anything else is the connection: refused, reset, closed, timed out.
	return true
}

// permanentError is a failure of the data or the schema's state that no
// retry cures.
type permanentError struct{ error }

func (p *permanentError) Unwrap() error { return p.error }

func permanent(format string, args ...any) error {
	return &permanentError{fmt.Errorf(format, args...)}
}
