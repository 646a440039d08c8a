package s3

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
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
	case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, context.DeadlineExceeded):
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
