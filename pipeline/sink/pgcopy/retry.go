package pgcopy

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/backfill-dev/backfill/internal/pgnet"
	"github.com/backfill-dev/backfill/pipeline/sink"
)

// retry runs op on a connection of the sink's that no other call is using
// (waiting for one to be free), reconnecting first when the connection is
// gone, and runs it again after a fault that a new connection may cure (a
// lost connection, a server gone silent, a server shutting down or
// starting, a deadlock or serialisation failure), waiting RetryWait, then
// twice as long each time, at most Retries times. Each attempt is watched
// for silence (Options.Silence).
func (s *Sink) retry(ctx context.Context, what string, op func(context.Context, *pgx.Conn) error) error {
	slot, err := s.take(ctx)
	if err != nil {
		return err
	}
	defer s.give(slot)
	wait := s.opt.RetryWait
	for attempt := 0; ; attempt++ {
		actx, cancel := context.WithCancelCause(ctx)
		err := s.connect(actx, slot)
		if err == nil {
			stop := s.watch(actx, *slot, cancel)
			err = op(actx, *slot)
			stop()
			if err == nil || errors.Is(err, sink.ErrSkipped) {
				cancel(nil)
				return err
			}
			err = s.clean(err)
		}
		var silent *silenceError
		cutOff := errors.As(context.Cause(actx), &silent) && ctx.Err() == nil
		cancel(nil)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if cutOff {
			err = silent
			// The connection may be anywhere in the protocol, and its
			// server session, cut off from us, may hold the bucket's lock:
			// it is ended from the next connection.
			if *slot != nil {
				s.zombie((*slot).PgConn().PID())
			}
			_ = closeConn(slot) // a connection gone silent: dropped
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

// watch watches an attempt on conn for silence until the returned stop is
// called: when the connection has waited Options.Silence for the server,
// a probe asks whether the server is at work on its session; an attempt
// whose probe says no, or gets no answer within Silence, is cancelled with
// a *silenceError, unless the connection's wait ended while the probe was
// under way (the probe crosses the same network as the answer, which may
// come first: the session is then idle because it has answered).
func (s *Sink) watch(ctx context.Context, conn *pgx.Conn, cancel context.CancelCauseFunc) (stop func()) {
	wc := pgnet.Watched(conn.PgConn().Conn())
	if wc == nil {
		return func() {}
	}
	bound := s.opt.Silence
	pid := conn.PgConn().PID()
	// stop ends the watch at once, a probe under way included.
	ctx, end := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(max(bound/8, 10*time.Millisecond))
		defer tick.Stop()
		var vouched time.Time // when a probe last found the session at work
		var last session      // what that probe found
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			life, waiting := wc.Waiting()
			if !waiting {
				continue
			}
			since := life
			if vouched.After(since) {
				since = vouched
			}
			if time.Since(since) < bound {
				continue
			}
			st, err := s.probe(ctx, pid)
			switch {
			case err == nil && st.atWork(last):
				vouched, last = time.Now(), st
			case ctx.Err() != nil:
				return
			case answered(wc, life):
				// The answer came while the probe was under way (a probe
				// waits on the same network): the session is idle because
				// it has answered, and the verdict is of a wait now over.
				if s.verdict != nil {
					s.verdict(st, true, err)
				}
			default:
				if s.verdict != nil {
					s.verdict(st, false, err)
				}
				cancel(&silenceError{bound: bound, state: st.describe(), probe: s.clean(err)}) // a probe's error, as every other, without the password
				return
			}
		}
	})
	return func() {
		end()
		wg.Wait()
	}
}

// answered tells whether the connection, whose last sign of life was at
// life when a probe began, has had another since (its wait ended, or
// another began), or holds bytes that have arrived and are not yet read.
func answered(wc *pgnet.Conn, life time.Time) bool {
	now, waiting := wc.Waiting()
	return !waiting || now.After(life) || wc.Unread() > 0
}

// session is what a probe finds of a session.
type session struct {
	found     bool
	state     string    // pg_stat_activity.state
	waitEvent string    // pg_stat_activity.wait_event, "" when none
	copied    int64     // pg_stat_progress_copy.bytes_processed; -1 when not in a COPY, or unknown
	began     time.Time // pg_stat_activity.query_start: which statement
}

// atWork tells whether the session is working on what the client waits
// for: active, and not waiting for bytes from the client, unless it is a
// COPY whose bytes still come in (more than at the probe before).
func (s session) atWork(before session) bool {
	switch {
	case !s.found || s.state != "active":
		return false
	case s.waitEvent != "ClientRead":
		return true
	}
	return s.copied >= 0 && (!before.found || !s.began.Equal(before.began) || s.copied > before.copied)
}

func (s session) describe() string {
	switch {
	case !s.found:
		return ""
	case s.waitEvent == "ClientRead" && s.state == "active":
		return "active, waiting for bytes that do not come"
	}
	return s.state
}

// probe asks the server, on a connection of its own bounded by
// Options.Silence, what the session pid is doing.
func (s *Sink) probe(ctx context.Context, pid uint32) (session, error) {
	pctx, cancel := context.WithTimeout(ctx, s.opt.Silence)
	defer cancel()
	c, err := pgx.ConnectConfig(pctx, s.cfg.Copy())
	if err != nil {
		return session{}, err
	}
	defer c.Close(pctx)
	st := session{found: true}
	var state, wait *string
	var began *time.Time
	err = c.QueryRow(pctx, `SELECT a.state, a.wait_event, a.query_start, coalesce(p.bytes_processed, -1)
		FROM pg_stat_activity a LEFT JOIN pg_stat_progress_copy p ON p.pid = a.pid WHERE a.pid = $1`, int64(pid)).Scan(&state, &wait, &began, &st.copied)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "42P01" {
		// A server before PostgreSQL 14 has no COPY progress: a COPY waiting
		// for the client's bytes counts as at work.
		st.copied = 1 << 62
		err = c.QueryRow(pctx, `SELECT state, wait_event, query_start FROM pg_stat_activity WHERE pid = $1`, int64(pid)).Scan(&state, &wait, &began)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return session{}, nil
	}
	if err != nil {
		return session{}, err
	}
	if state == nil {
		return session{}, nil
	}
	st.state = *state
	if wait != nil {
		st.waitEvent = *wait
	}
	if began != nil {
		st.began = *began
	}
	return st, nil
}
