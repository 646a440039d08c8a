package pgcopy

import (
	"context"
	"fmt"
	"time"
)

// timeoutError is an attempt that got no answer within Options.Timeout:
// the connection is dropped, and the attempt may be made again.
type timeoutError struct{ timeout time.Duration }

func (e *timeoutError) Error() string {
	return fmt.Sprintf("no answer from the server within %s (--pg-timeout)", e.timeout)
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
