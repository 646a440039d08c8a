package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"syscall"
	"time"
)

// netError is a request that never reached S3, said in one line: the SDK's
// own message repeats the operation, an empty status and request ID, and
// the whole URL. It wraps the SDK's error.
type netError struct {
	msg string
	err error
}

func (e *netError) Error() string { return e.msg }
func (e *netError) Unwrap() error { return e.err }

// shorten returns err, or a *netError when the request failed on the
// network: the endpoint's name does not resolve, its port refuses, or it
// did not answer in time.
func shorten(err error) error {
	var dns *net.DNSError
	var op *net.OpError
	switch {
	case errors.As(err, &dns) && dns.IsNotFound:
		return &netError{fmt.Sprintf("the S3 endpoint's host %s does not resolve (no such host)", dns.Name), err}
	case errors.As(err, &dns):
		return &netError{fmt.Sprintf("the S3 endpoint's host %s cannot be resolved now: %s", dns.Name, dns.Err), err}
	case errors.As(err, &op) && op.Op == "dial":
		return &netError{fmt.Sprintf("cannot connect to the S3 endpoint %s: %v", op.Addr, underlying(op.Err)), err}
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return &netError{"the connection to the S3 endpoint was reset, attempt after attempt", err}
	case errors.Is(err, io.ErrUnexpectedEOF):
		return &netError{"the S3 endpoint closed the connection in the middle of an answer, attempt after attempt", err}
	case errors.Is(err, os.ErrDeadlineExceeded):
		return &netError{"the S3 endpoint stopped answering, or taking data, for longer than the stall time (" + envStall + ", default 30s)", err}
	case errors.Is(err, context.DeadlineExceeded):
		return &netError{"no answer from the S3 endpoint in time", err}
	}
	return err
}

// underlying strips the syscall wrapping of a dial error: "connection
// refused", not "connect: connection refused".
func underlying(err error) error {
	var se *os.SyscallError
	if errors.As(err, &se) {
		return se.Err
	}
	return err
}

// stallConn bounds every read and write of a connection to the endpoint
// by the stall time: a response that stops coming, or a request body the
// endpoint stops taking (a PUT into a silent network), fails the attempt
// instead of waiting forever; the SDK's retryer makes it again. (An idle
// kept-alive connection that waits longer is closed, and dialled again
// when needed.)
type stallConn struct {
	net.Conn
	stall time.Duration
}

func (c *stallConn) Read(b []byte) (int, error) {
	_ = c.Conn.SetReadDeadline(time.Now().Add(c.stall)) // a closed conn fails the Read itself
	return c.Conn.Read(b)
}

func (c *stallConn) Write(b []byte) (int, error) {
	_ = c.Conn.SetWriteDeadline(time.Now().Add(c.stall)) // a closed conn fails the Write itself
	return c.Conn.Write(b)
}

// withStall makes every connection of tr a stallConn.
func withStall(tr *http.Transport, stall time.Duration) {
	dial := tr.DialContext
	if dial == nil {
		dial = (&net.Dialer{Timeout: stall, KeepAlive: 15 * time.Second}).DialContext
	}
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &stallConn{Conn: c, stall: stall}, nil
	}
}
