package pgcopy

import (
	"context"
	"fmt"
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The network bounds of a connection. A server that stops answering
// because the network between drops every packet (a partition, a NAT
// table that forgot the connection) is found by the kernel: keepalive
// probes on an idle connection, and TCP_USER_TIMEOUT on data sent and never
// acknowledged. Both are answered by the server's kernel even while a long
// statement keeps the server itself silent, so they never cut a statement
// that is only slow. What they cannot see, a peer that acknowledges and
// never answers (a proxy or a server process that hangs), is bounded by
// Options.Timeout on each attempt.
const (
	keepAliveIdle     = 15 * time.Second
	keepAliveInterval = 5 * time.Second
	keepAliveCount    = 3
	userTimeout       = 30 * time.Second
)

// Dial connects as pgx does, with the bounds above: a pgx DialFunc.
func Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{
		KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: keepAliveIdle, Interval: keepAliveInterval, Count: keepAliveCount},
		Control: func(network, address string, c syscall.RawConn) error {
			if network != "tcp" && network != "tcp4" && network != "tcp6" {
				return nil
			}
			var serr error
			err := c.Control(func(fd uintptr) {
				serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(userTimeout/time.Millisecond))
			})
			if err != nil {
				return err
			}
			return serr
		},
	}
	return d.DialContext(ctx, network, addr)
}

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
	tx.Rollback(rctx)
}
