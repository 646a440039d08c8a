package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/backfill-dev/backfill/collector"
	"github.com/backfill-dev/backfill/internal/lines"
	"github.com/backfill-dev/backfill/pipeline/ooid"
)

const stampHelp = `Usage: backfill stamp --collector-id N --state FILE [flags]
       backfill stamp --collector-id N --state FILE --count N
       backfill stamp --collector-id N --state FILE --listen ADDR

Issue collector-stamped OOIDs (ts:32 collector:8 counter:24) that never
repeat, across restarts and clock steps. The state FILE records how far
the IDs went (a high-water second, made durable before any ID past it is
handed out, a lease of seconds at a time); a new run issues only seconds
after it. One process per state file; a state file of another collector,
cut short or damaged, or whose mark is far ahead of the clock, is refused,
never reset. When the clock steps back, IDs go on in the last second
used; when a second's 2^24 IDs are used up, in the next one, never more
than --max-lead seconds ahead of the clock (past it, stamp waits, or with
--fail-ahead fails).

Without --count or --listen, stamp is a filter: it reads JSON lines (one
measurement object each) from standard input and writes the same lines
with an "ooid" field added (16 hex digits), in order, streaming. A line
that is not a JSON object, already has an "ooid", or is longer than
--max-line, is reported on standard error with its number and reason and
gets no ID; with --rejects FILE the line itself, as read, is appended to
FILE, so that nothing is lost.

With --count N, it prints N IDs, one per line.

With --listen ADDR, it serves IDs over HTTP until SIGINT or SIGTERM, then
stops gracefully: GET or POST /ids?n=K answers {"ids":["…",…]} with K
IDs (1..100000, default 1), in increasing order. A client gets
--http-timeout to send its request and as long to take the answer, and an
idle kept-alive connection is closed after four times that: a slow or
silent client cannot hold the server.

Flags:

	--collector-id N    this collector's id, 0..239 (0x00..0xEF) (required)
	--state FILE        the state file (required; created for a new collector)
	--count N           print N IDs and exit
	--listen ADDR       serve IDs over HTTP on ADDR (host:port)
	--http-timeout D    with --listen: the time a client has to send its
	                    request, and to read the answer (default 30s)
	--lease N           seconds reserved by each durable mark (default 10)
	--max-lead N        seconds the IDs may run ahead of the clock (default 60)
	--fail-ahead        fail instead of waiting past --max-lead
	--rejects FILE      append the lines rejected by the filter to FILE
	--max-line SIZE     reject lines over SIZE bytes (default 64MiB)
	--clock-offset D    shift the clock by D, for tests of clock steps
	                    (default 0s)

Examples:

	backfill stamp --collector-id 42 --state /var/lib/backfill/42.state --rejects rejected.jsonl < in.jsonl > out.jsonl
	backfill stamp --collector-id 42 --state 42.state --count 3
	backfill stamp --collector-id 42 --state 42.state --listen 127.0.0.1:8642
	curl '127.0.0.1:8642/ids?n=1000'

EXIT STATUS

	0    success
	1    failure (the state file is held, refused or cannot be written)
	2    usage error
	3    some input lines were rejected
	130  interrupted
`

// maxBlock bounds the IDs of one HTTP request.
const maxBlock = 100000

// stampOptions are stamp's flags.
type stampOptions struct {
	opt               collector.Options
	id                int
	count             int64
	listen, rejects   string
	httpTimeout       time.Duration
	lease, lead       uint
	offset            time.Duration
	maxLine           byteSize
	counting          bool // --count was given
	idSet, maxLineSet bool
	rest              []string
}

func parseStampFlags(args []string, std stdio) (*stampOptions, error) {
	fs := newFlagSet("stamp", stampHelp, std)
	o := &stampOptions{maxLine: byteSize(64 << 20)}
	fs.IntVar(&o.id, "collector-id", 0, "")
	fs.StringVar(&o.opt.State, "state", "", "")
	fs.Int64Var(&o.count, "count", 0, "")
	fs.StringVar(&o.listen, "listen", "", "")
	fs.DurationVar(&o.httpTimeout, "http-timeout", 30*time.Second, "")
	fs.UintVar(&o.lease, "lease", collector.DefaultLease, "")
	fs.UintVar(&o.lead, "max-lead", collector.DefaultMaxLead, "")
	fs.BoolVar(&o.opt.FailAhead, "fail-ahead", false, "")
	fs.DurationVar(&o.offset, "clock-offset", 0, "")
	fs.StringVar(&o.rejects, "rejects", "", "")
	fs.Var(&o.maxLine, "max-line", "")
	var err error
	if o.rest, err = parseFlags(fs, args); err != nil {
		return nil, err
	}
	o.counting = len(setFlags(fs, "count")) > 0
	o.idSet = len(setFlags(fs, "collector-id")) > 0
	o.maxLineSet = len(setFlags(fs, "max-line")) > 0
	return o, nil
}

// check checks the flags and completes the collector's options.
func (o *stampOptions) check() error {
	switch {
	case len(o.rest) > 0:
		return usagef("stamp: unexpected argument %q", o.rest[0])
	case !o.idSet:
		return usagef("stamp: --collector-id is required")
	case o.id < 0 || o.id > ooid.MaxCollectorID:
		return usagef("stamp: --collector-id must be 0..%d (0xf0..0xff would alias backfilled IDs)", ooid.MaxCollectorID)
	case o.opt.State == "":
		return usagef("stamp: --state is required")
	case o.counting && o.count < 0:
		return usagef("stamp: --count must be 0 or more")
	case o.counting && o.listen != "":
		return usagef("stamp: --count and --listen cannot be used together")
	case o.lease == 0 || o.lead < o.lease || o.lead > 1<<20:
		return usagef("stamp: --lease must be positive and --max-lead at least --lease")
	case (o.rejects != "" || o.maxLineSet) && (o.counting || o.listen != ""):
		return usagef("stamp: --rejects and --max-line are for the filter, not --count or --listen")
	case o.maxLine < 2 || o.maxLine > 1<<30:
		return usagef("stamp: --max-line must be 2 bytes to 1GiB")
	case o.httpTimeout <= 0:
		return usagef("stamp: --http-timeout must be positive")
	}
	o.opt.CollectorID, o.opt.Lease, o.opt.MaxLead = uint8(o.id), uint32(o.lease), uint32(o.lead)
	if offset := o.offset; offset != 0 {
		o.opt.Clock = func() time.Time { return time.Now().Add(offset) }
	}
	return nil
}

func runStamp(ctx context.Context, args []string, std stdio) error {
	o, err := parseStampFlags(args, std)
	if err != nil {
		return err
	}
	if err := o.check(); err != nil {
		return err
	}
	s, err := collector.Open(o.opt)
	if err != nil {
		return err
	}
	defer s.Close()
	switch {
	case o.counting:
		return stampCount(ctx, s, o.count, std)
	case o.listen != "":
		return stampServe(ctx, s, o.listen, o.httpTimeout, std)
	case o.rejects != "":
		return stampFilterRejects(ctx, s, o.rejects, int(o.maxLine), std)
	}
	return stampFilter(ctx, s, lines.NewReaderLimit(std.in, int(o.maxLine), nil), nil, std)
}

// stampFilterRejects runs the filter with the lines it rejects appended
// to the file rejects.
func stampFilterRejects(ctx context.Context, s *collector.Stamper, rejects string, maxLine int, std stdio) error {
	f, err := os.OpenFile(rejects, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	bw := bufio.NewWriter(f)
	err = stampFilter(ctx, s, lines.NewReaderLimit(std.in, maxLine, bw), bw, std)
	if ferr := bw.Flush(); ferr != nil && err == nil {
		err = fmt.Errorf("write %s: %w", rejects, ferr)
	}
	if cerr := f.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("write %s: %w", rejects, cerr)
	}
	return err
}

func stampCount(ctx context.Context, s *collector.Stamper, count int64, std stdio) error {
	w := bufio.NewWriterSize(std.out, 256<<10)
	ids := make([]ooid.ID, 1<<16)
	var buf []byte
	for count > 0 {
		if ctx.Err() != nil {
			w.Flush()
			return ctx.Err()
		}
		n := min(count, int64(len(ids)))
		if err := s.Fill(ids[:n]); err != nil {
			w.Flush()
			return err
		}
		for _, id := range ids[:n] {
			buf = append(id.AppendText(buf[:0]), '\n')
			w.Write(buf)
		}
		count -= n
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}

// stampFilter adds an "ooid" field to every JSON object line of lr; a
// rejected line goes to dead (if not nil) as read; lr has copied a
// too-long line there itself.
func stampFilter(ctx context.Context, s *collector.Stamper, lr *lines.Reader, dead io.Writer, std stdio) error {
	w := bufio.NewWriterSize(std.out, 256<<10)
	bad := 0
	var buf []byte
	err := lines.EachOf(ctx, lr, func(line []byte, n int, tooLong error) error {
		reject := func(msg string) error {
			bad++
			fmt.Fprintf(std.err, "backfill: line %d: %s\n", n, msg)
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
			return reject(tooLong.Error())
		}
		obj := bytes.TrimSpace(line)
		if len(obj) < 2 || obj[0] != '{' || !json.Valid(obj) {
			return reject("not a JSON object")
		}
		if has, err := hasKey(obj, "ooid"); err != nil || has {
			return reject(`it has an "ooid" already`)
		}
		id, err := s.Next()
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
		_, err = w.Write(buf)
		return err
	})
	if ferr := w.Flush(); err == nil && ferr != nil {
		err = fmt.Errorf("write output: %w", ferr)
	}
	if err != nil {
		return err
	}
	if bad > 0 {
		return &rejectsError{n: bad, what: "lines"}
	}
	return nil
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

// stampServe serves blocks of IDs until ctx is done.
func stampServe(ctx context.Context, s *collector.Stamper, addr string, timeout time.Duration, std stdio) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/ids", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodPost {
			http.Error(w, "GET or POST /ids?n=K", http.StatusMethodNotAllowed)
			return
		}
		n := 1
		if v := r.URL.Query().Get("n"); v != "" {
			k, err := strconv.Atoi(v)
			if err != nil || k < 1 || k > maxBlock {
				http.Error(w, fmt.Sprintf("n must be 1..%d", maxBlock), http.StatusBadRequest)
				return
			}
			n = k
		}
		ids := make([]ooid.ID, n)
		if err := s.Fill(ids); err != nil {
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
		w.Write(buf)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: timeout, ReadTimeout: timeout, WriteTimeout: timeout, IdleTimeout: 4 * timeout}
	fmt.Fprintf(std.err, "backfill: stamp: serving IDs on http://%s/ids\n", l.Addr())
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
	fmt.Fprintln(std.err, "backfill: stamp: stopped")
	return nil
}
