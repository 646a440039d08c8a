package collector

import (
	"bufio"
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/backfill-dev/backfill/internal/lines"
	"github.com/backfill-dev/backfill/pipeline/ooid"
)

// MaxBlock bounds the IDs of one HTTP request.
const MaxBlock = 100000

// WriteIDs writes n IDs to w, one per line.
func (s *Stamper) WriteIDs(ctx context.Context, n int64, w io.Writer) error {
	bw := bufio.NewWriterSize(w, 256<<10)
	ids := make([]ooid.ID, 1<<16)
	var buf []byte
	for n > 0 {
		if err := ctx.Err(); err != nil {
			_ = bw.Flush() // the IDs issued so far, as far as they go
			return err
		}
		k := min(n, int64(len(ids)))
		if err := s.FillContext(ctx, ids[:k]); err != nil {
			_ = bw.Flush()
			return err
		}
		for _, id := range ids[:k] {
			buf = append(id.AppendText(buf[:0]), '\n')
			if _, err := bw.Write(buf); err != nil {
				return fmt.Errorf("write output: %w", err)
			}
		}
		n -= k
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}

// Filter adds an "ooid" field to every JSON object line of lr and writes
// it to w. A line that is not a JSON object, or has an "ooid" already, is
// rejected: reject is told its number and why, and it goes to dead (when
// not nil) as read; lr has copied a too-long line there itself. Filter
// returns how many lines it rejected.
func (s *Stamper) Filter(ctx context.Context, lr *lines.Reader, w, dead io.Writer, reject func(line int, why string)) (int, error) {
	bw := bufio.NewWriterSize(w, 256<<10)
	bad := 0
	var buf []byte
	err := lines.EachOf(ctx, lr, func(line []byte, n int, tooLong error) error {
		refuse := func(why string) error {
			bad++
			reject(n, why)
			if dead == nil || line == nil {
				return nil
			}
			if _, err := dead.Write(line); err != nil {
				return err
			}
			_, err := dead.Write([]byte{'\n'})
			return err
		}
		if tooLong != nil {
			return refuse(tooLong.Error())
		}
		obj := bytes.TrimSpace(line)
		if len(obj) < 2 || obj[0] != '{' || !json.Valid(obj) {
			return refuse("not a JSON object")
		}
		if has, err := hasKey(obj, "ooid"); err != nil || has {
			return refuse(`it has an "ooid" already`)
		}
		id, err := s.NextContext(ctx)
		if err != nil {
			return err
		}
		body := bytes.TrimSpace(obj[1 : len(obj)-1])
		buf = append(buf[:0], '{')
		buf = append(buf, body...)
		if len(body) > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, `"ooid":"`...)
		buf = id.AppendText(buf)
		buf = append(buf, "\"}\n"...)
		if _, err := bw.Write(buf); err != nil {
			return err
		}
		if lr.Buffered() == 0 {
			// The next line is not read yet: what is stamped goes out
			// before a wait for it, as a filter in a pipeline must.
			return bw.Flush()
		}
		return nil
	})
	if ferr := bw.Flush(); err == nil && ferr != nil {
		err = fmt.Errorf("write output: %w", ferr)
	}
	return bad, err
}

// hasKey reports whether the JSON object obj has key at its top level.
func hasKey(obj []byte, key string) (bool, error) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if _, err := dec.Token(); err != nil { // {
		return false, err
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return false, err
		}
		if k, _ := t.(string); k == key {
			return true, nil
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return false, err
		}
	}
	return false, nil
}

// Handler serves blocks of IDs: GET or POST /ids?n=K gives
// {"ids":["…",…]}, K from 1 to MaxBlock (default 1). With a token, a
// request must carry "Authorization: Bearer TOKEN" (401 otherwise).
func (s *Stamper) Handler(token string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/ids", func(w http.ResponseWriter, r *http.Request) {
		if token != "" && !bearer(r, token) {
			w.Header().Set("WWW-Authenticate", "Bearer")
			http.Error(w, "a token is required: Authorization: Bearer TOKEN", http.StatusUnauthorized)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodPost {
			http.Error(w, "GET or POST /ids?n=K", http.StatusMethodNotAllowed)
			return
		}
		n := 1
		if v := r.URL.Query().Get("n"); v != "" {
			k, err := strconv.Atoi(v)
			if err != nil || k < 1 || k > MaxBlock {
				http.Error(w, fmt.Sprintf("n must be 1..%d", MaxBlock), http.StatusBadRequest)
				return
			}
			n = k
		}
		ids := make([]ooid.ID, n)
		if err := s.FillContext(r.Context(), ids); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		buf := make([]byte, 0, 10+19*n)
		buf = append(buf, `{"ids":[`...)
		for i, id := range ids {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = append(buf, '"')
			buf = id.AppendText(buf)
			buf = append(buf, '"')
		}
		buf = append(buf, "]}\n"...)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(buf) // a client gone is the client's loss: its IDs are spent
	})
	return mux
}

// bearer tells whether r carries the token, compared in constant time.
// The scheme's name is case-insensitive (RFC 9110 §11.1).
func bearer(r *http.Request, token string) bool {
	scheme, got, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	return ok && strings.EqualFold(scheme, "Bearer") && subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), []byte(token)) == 1
}

// DefaultMaxClients bounds the connections Serve holds at once.
const DefaultMaxClients = 64

// ServeOptions say how Serve serves.
type ServeOptions struct {
	// Timeout bounds each request's reading and writing.
	Timeout time.Duration
	// MaxClients bounds the connections held at once (DefaultMaxClients
	// when 0): one more is closed as soon as it is accepted. A client that
	// asks MaxBlock IDs and does not read holds about 1.4 MB until
	// Timeout.
	MaxClients int
	// Token, when not empty, is the shared secret every request must
	// carry.
	Token string
}

// Serve serves the Handler on addr until ctx is done, then shuts down
// gracefully; listening is told the address it listens on.
func (s *Stamper) Serve(ctx context.Context, addr string, opt ServeOptions, listening func(net.Addr)) error {
	if opt.MaxClients <= 0 {
		opt.MaxClients = DefaultMaxClients
	}
	nl, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	l := &limitListener{Listener: nl, max: int64(opt.MaxClients)}
	timeout := opt.Timeout
	srv := &http.Server{Handler: s.Handler(opt.Token), ReadHeaderTimeout: timeout, ReadTimeout: timeout, WriteTimeout: timeout, IdleTimeout: 4 * timeout}
	listening(l.Addr())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return err
	}
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// limitListener holds at most max connections at once: one accepted past
// it is closed at once, so that its client fails fast instead of holding
// memory.
type limitListener struct {
	net.Listener
	max  int64
	open atomic.Int64
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) > l.max {
			l.open.Add(-1)
			_ = c.Close() // past the cap: refused
			continue
		}
		return &countedConn{Conn: c, l: l}, nil
	}
}

type countedConn struct {
	net.Conn
	l    *limitListener
	once sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(func() { c.l.open.Add(-1) })
	return c.Conn.Close()
}

// Loopback tells whether a is a loopback address: one that only this
// machine reaches.
func Loopback(a net.Addr) bool {
	t, ok := a.(*net.TCPAddr)
	return ok && t.IP.IsLoopback()
}
