// Package pgnet is what every PostgreSQL connection of backfill shares:
// its network bounds (keepalives and TCP_USER_TIMEOUT on both sides, so
// that a network gone silent is found), how a database is named in
// messages, and how a connection string's password is kept out of them.
package pgnet

import (
	"context"
	"crypto/tls"
	"net"
	"strconv"
	"sync/atomic"
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
// never answers (a proxy, a load balancer, a server process that hangs),
// is found by its silence: Conn notes how long a connection has waited,
// and its user asks the server, on another connection, whether it is at
// work (pgcopy's bound on silence).
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
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &Conn{Conn: c}, nil
}

// Conn is a connection Dial made. It notes when it waits on the network:
// while a read or a write is under way, since its last sign of life (a
// read or a write begun or ended). A client that waits long on a server
// can so ask, on another connection, whether the server is at work.
// (A read under way is the sign, not a byte sent and unanswered: an answer
// cut off in its middle leaves the client waiting for its rest; and a
// write under way, not only its end: a write held by a network that
// stopped taking bytes waits too.)
type Conn struct {
	net.Conn
	reading, writing atomic.Int32
	life             atomic.Int64 // unix nanoseconds of the last read or write begun or ended
}

func (c *Conn) alive() { c.life.Store(time.Now().UnixNano()) }

func (c *Conn) Read(p []byte) (int, error) {
	c.reading.Add(1)
	c.alive()
	n, err := c.Conn.Read(p)
	c.alive()
	c.reading.Add(-1)
	return n, err
}

func (c *Conn) Write(p []byte) (int, error) {
	c.writing.Add(1)
	c.alive()
	n, err := c.Conn.Write(p)
	c.alive()
	c.writing.Add(-1)
	return n, err
}

// Waiting tells since when the connection has waited on the network
// (ok is false when no read or write is under way).
func (c *Conn) Waiting() (since time.Time, ok bool) {
	if c.reading.Load() == 0 && c.writing.Load() == 0 {
		return time.Time{}, false
	}
	return time.Unix(0, c.life.Load()), true
}

// Unread tells how many bytes the kernel holds for the connection that no
// read has taken yet: an answer that has arrived, though the reader has not
// run since (0 when none, or when it cannot tell).
func (c *Conn) Unread() int {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return 0
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return 0
	}
	n := 0
	_ = raw.Control(func(fd uintptr) {
		n, _ = unix.IoctlGetInt(int(fd), unix.SIOCINQ)
	})
	return n
}

// Watched returns the *Conn under a connection pgx holds (under TLS, if
// any); nil when Dial did not make it.
func Watched(nc net.Conn) *Conn {
	if t, ok := nc.(*tls.Conn); ok {
		nc = t.NetConn()
	}
	c, _ := nc.(*Conn)
	return c
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
