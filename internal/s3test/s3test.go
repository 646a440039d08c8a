// Package s3test starts an S3-compatible server on 127.0.0.1 for tests:
// gofakes3 (an S3 server in Go, in-process, its objects in memory) behind a
// handler that injects faults on request: 503s, connections dropped in the
// middle of a body, bodies that drip slowly or stall.
package s3test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// Server is a running test server.
type Server struct {
	URL     string
	Backend *s3mem.Backend
	srv     *httptest.Server

	mu     sync.Mutex
	faults []Fault
	// Requests counts the requests served, by method.
	requests sync.Map     // method → *atomic.Int64
	puts     []Put        // under mu
	served   []Request    // under mu
	onPut    func(Put)    // under mu
	onDelete func(string) // under mu
}

// Put is a PUT the server answered with success.
type Put struct {
	At   time.Time
	Path string // /bucket/key
}

// Request is a request the server was sent.
type Request struct {
	Method string
	Path   string // /bucket/key; /bucket for a listing
	// List is set for a listing (a GET of the bucket, one page).
	List bool
	// Prefix is a listing's prefix.
	Prefix string
}

// Served returns the requests sent since the n-th (0 for all), in
// order, and how many there were in all: Served(n) after n := len of an
// earlier call's is what was sent meanwhile.
func (s *Server) Served(n int) ([]Request, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.served[min(n, len(s.served)):]), len(s.served)
}

// Fault is one fault to inject, into the next request it matches.
type Fault struct {
	Method string // "" matches any
	// Ranged restricts it to ranged GETs (reads of object bytes).
	Ranged bool
	Kind   FaultKind
	Times  int // requests it applies to; 0 means 1
	// After is the number of body bytes sent before a drop or a stall.
	After int
}

// FaultKind says what a Fault does.
type FaultKind int

const (
	Status503 FaultKind = iota // answer 503 SlowDown, nothing served
	Drop                       // send After bytes of the body, then close the connection
	Stall                      // send After bytes of the body, then send nothing for a minute
	Drip                       // send the body 4 KiB at a time, 2 ms apart
	// LoseAnswer serves the request whole (a PUT is stored), then closes
	// the connection without a word: the answer lost on the way back.
	LoseAnswer
	Status403 // answer 403 AccessDenied, nothing served
)

// Start starts a server with the given buckets, stopped when the test ends,
// and points the AWS configuration of this process (and of the commands it
// starts with os.Environ) at it.
func Start(t testing.TB, buckets ...string) *Server {
	t.Helper()
	be := s3mem.New()
	for _, b := range buckets {
		if err := be.CreateBucket(b); err != nil {
			t.Fatal(err)
		}
	}
	s := &Server{Backend: be}
	fake := gofakes3.New(be, gofakes3.WithLogger(gofakes3.DiscardLog()))
	s.srv = httptest.NewServer(s.inject(fake.Server()))
	t.Cleanup(s.srv.Close)
	s.URL = s.srv.URL
	for k, v := range Env(s.URL) {
		t.Setenv(k, v)
	}
	return s
}

// Env is the environment that points an AWS client at url, with fixed
// test credentials and no shared config files.
func Env(url string) map[string]string {
	return map[string]string{
		"AWS_ENDPOINT_URL":            url,
		"AWS_ACCESS_KEY_ID":           "backfill-test",
		"AWS_SECRET_ACCESS_KEY":       "backfill-test-secret",
		"AWS_REGION":                  "us-east-1",
		"AWS_CONFIG_FILE":             "/dev/null",
		"AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
		"AWS_EC2_METADATA_DISABLED":   "true",
	}
}

// Inject queues faults; each applies to the next requests it matches.
func (s *Server) Inject(f ...Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, f...)
}

// Pending returns how many injected faults have not happened yet.
func (s *Server) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, f := range s.faults {
		n += max(f.Times, 1)
	}
	return n
}

// Puts returns the PUTs served with success so far, in order.
func (s *Server) Puts() []Put {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.puts)
}

// FirstPutAfter returns how long after since the first PUT of a path
// under prefix was served, or -1 when none was.
func (s *Server) FirstPutAfter(prefix string, since time.Time) time.Duration {
	for _, p := range s.Puts() {
		if p.At.After(since) && strings.HasPrefix(p.Path, prefix) {
			return p.At.Sub(since)
		}
	}
	return -1
}

// PutCounts counts the PUTs served of each path under prefix that
// contains part.
func (s *Server) PutCounts(prefix, part string) map[string]int {
	n := map[string]int{}
	for _, p := range s.Puts() {
		if strings.HasPrefix(p.Path, prefix) && strings.Contains(p.Path, part) {
			n[p.Path]++
		}
	}
	return n
}

// OnPut has fn called on every PUT served with success, once it is stored
// and before the client has its answer: a test can stop or kill the
// client at that exact point.
func (s *Server) OnPut(fn func(Put)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onPut = fn
}

// OnDelete has fn called on every DELETE of one object served with
// success, once the object is gone and before the client has its answer.
func (s *Server) OnDelete(fn func(path string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onDelete = fn
}

// Requests returns the requests served with method.
func (s *Server) Requests(method string) int64 {
	v, _ := s.requests.LoadOrStore(method, new(atomic.Int64))
	return v.(*atomic.Int64).Load()
}

func (s *Server) take(r *http.Request) (Fault, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ranged := r.Method == http.MethodGet && strings.HasPrefix(r.Header.Get("Range"), "bytes=")
	for i := range s.faults {
		f := &s.faults[i]
		if (f.Method != "" && f.Method != r.Method) || (f.Ranged && !ranged) {
			continue
		}
		got := *f
		f.Times = max(f.Times, 1) - 1
		if f.Times == 0 {
			s.faults = append(s.faults[:i], s.faults[i+1:]...)
		}
		return got, true
	}
	return Fault{}, false
}

func (s *Server) inject(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v, _ := s.requests.LoadOrStore(r.Method, new(atomic.Int64))
		v.(*atomic.Int64).Add(1)
		q := r.URL.Query()
		list := r.Method == http.MethodGet && strings.Count(strings.Trim(r.URL.Path, "/"), "/") == 0
		s.mu.Lock()
		s.served = append(s.served, Request{Method: r.Method, Path: r.URL.Path, List: list, Prefix: q.Get("prefix")})
		s.mu.Unlock()
		f, ok := s.take(r)
		if !ok {
			sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
			next.ServeHTTP(sw, r)
			if r.Method == http.MethodPut && sw.status < 300 {
				p := Put{At: time.Now(), Path: r.URL.Path}
				s.mu.Lock()
				s.puts = append(s.puts, p)
				fn := s.onPut
				s.mu.Unlock()
				if fn != nil {
					fn(p)
				}
			}
			if r.Method == http.MethodDelete && sw.status < 300 {
				s.mu.Lock()
				fn := s.onDelete
				s.mu.Unlock()
				if fn != nil {
					fn(r.URL.Path)
				}
			}
			return
		}
		switch f.Kind {
		case LoseAnswer:
			next.ServeHTTP(&swallow{h: http.Header{}}, r)
			panic(http.ErrAbortHandler) // the server closes the connection
		case Status403:
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>`))
		case Status503:
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`))
		default:
			next.ServeHTTP(&faultyWriter{ResponseWriter: w, f: f, done: r.Context().Done()}, r)
		}
	})
}

// swallow is an answer that goes nowhere.
type swallow struct{ h http.Header }

func (w *swallow) Header() http.Header         { return w.h }
func (w *swallow) Write(p []byte) (int, error) { return len(p), nil }
func (w *swallow) WriteHeader(int)             {}

// statusWriter notes the status of an answer.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

// faultyWriter passes a body through until its fault strikes.
type faultyWriter struct {
	http.ResponseWriter
	f    Fault
	sent int
	done <-chan struct{} // of the request
}

func (w *faultyWriter) Write(p []byte) (int, error) {
	switch w.f.Kind {
	case Drip:
		for off := 0; off < len(p); off += 4096 {
			if _, err := w.ResponseWriter.Write(p[off:min(off+4096, len(p))]); err != nil {
				return off, err
			}
			w.ResponseWriter.(http.Flusher).Flush()
			time.Sleep(2 * time.Millisecond)
		}
		return len(p), nil
	case Drop, Stall:
		if w.sent+len(p) <= w.f.After {
			w.sent += len(p)
			return w.ResponseWriter.Write(p)
		}
		n, _ := w.ResponseWriter.Write(p[:w.f.After-w.sent])
		w.sent += n
		w.ResponseWriter.(http.Flusher).Flush()
		if w.f.Kind == Stall {
			select {
			case <-time.After(time.Minute):
			case <-w.done:
			}
		}
		panic(http.ErrAbortHandler) // the server closes the connection
	}
	return w.ResponseWriter.Write(p)
}
