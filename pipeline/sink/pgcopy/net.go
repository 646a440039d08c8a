package pgcopy

import (
	"context"
	"fmt"
	"time"
)

// silenceError is an attempt cut off for the server's silence: no answer
// within Options.Silence, and a probe that did not find its session at
// work. The connection is dropped, and the attempt may be made again.
type silenceError struct {
	bound time.Duration
	state string // the session's state as the probe found it; "" when none
	probe error  // the probe's failure, if it failed
}

func (e *silenceError) Error() string {
	switch {
	case e.probe != nil:
		return fmt.Sprintf("no answer from the server for %s, and none to a probe on a new connection either (%v) (--pg-timeout)", e.bound, e.probe)
	case e.state == "":
		return fmt.Sprintf("no answer from the server for %s, and its session is gone (--pg-timeout)", e.bound)
	}
	return fmt.Sprintf("no answer from the server for %s while its session is %s: what was sent or answered was lost (--pg-timeout)", e.bound, e.state)
}

// lastWords is how long the last exchange of an attempt that ended (a
// rollback, a COPY's CopyFail) may take before its connection is dropped.
const lastWords = 5 * time.Second

// afterEnd returns a context that outlives ctx by lastWords: for what must
// still be said once ctx has ended, bounded all the same, so that a
// connection gone silent cannot hold it.
func afterEnd(ctx context.Context) (context.Context, context.CancelFunc) {
	c, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() { time.AfterFunc(lastWords, cancel) })
	return c, func() {
		stop()
		cancel()
	}
}

// rollback rolls tx back within afterEnd(ctx); for a defer.
func rollback(ctx context.Context, tx interface {
	Rollback(context.Context) error
}) {
	rctx, cancel := afterEnd(ctx)
	defer cancel()
	_ = tx.Rollback(rctx) // a rollback that fails drops the connection, which rolls back too
}
