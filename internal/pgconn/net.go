// Package pgconn is what every PostgreSQL connection of backfill shares:
// its network bounds (keepalives and TCP_USER_TIMEOUT on both sides, so
// that a network gone silent is found), how a database is named in
// messages, and how a connection string's password is kept out of them.
package pgconn

import (
	"context"
	"net"
	"strconv"
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

// ServerKeepalives sets the run-time parameters with which the server
// finds a client the network lost as the client finds the server (a COPY
// waiting for data is neither idle nor in a statement the server can time
// out).
func ServerKeepalives(params map[string]string) {
	params["tcp_keepalives_idle"] = strconv.Itoa(int(keepAliveIdle / time.Second))
	params["tcp_keepalives_interval"] = strconv.Itoa(int(keepAliveInterval / time.Second))
	params["tcp_keepalives_count"] = strconv.Itoa(keepAliveCount)
	params["tcp_user_timeout"] = strconv.Itoa(int(userTimeout / time.Millisecond))
}
