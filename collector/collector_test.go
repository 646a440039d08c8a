package collector

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/internal/testutil"
	"github.com/backfill-dev/backfill/pipeline/ooid"
)

// fakeClock is a wall clock a test moves; Sleep moves it too.
type fakeClock struct {
	mu     sync.Mutex
	t      time.Time
	slept  time.Duration
	sleeps int
}

func (c *fakeClock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Set(t time.Time)     { c.mu.Lock(); c.t = t; c.mu.Unlock() }
func (c *fakeClock) Add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }
func (c *fakeClock) Sleep(d time.Duration) {
	c.mu.Lock()
	c.t, c.slept, c.sleeps = c.t.Add(d), c.slept+d, c.sleeps+1
	c.mu.Unlock()
}

var t0 = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

func open(t *testing.T, state string, c *fakeClock, opt Options) *Stamper {
	t.Helper()
	opt.State, opt.Clock, opt.Sleep = state, c.Now, c.Sleep
	if opt.CollectorID == 0 {
		opt.CollectorID = 42
	}
	s, err := Open(opt)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// issued checks IDs as they come: each of collector 42, each greater than
// the one before (so none repeats), and returns the last.
type issued struct {
	t    *testing.T
	last ooid.ID
	n    int
}

func (is *issued) take(ids ...ooid.ID) {
	is.t.Helper()
	for _, id := range ids {
		d := id.Decode()
		if d.Namespace != ooid.Collector || d.CollectorID != 42 {
			is.t.Fatalf("ID %s decodes as %+v", id, d)
		}
		if is.n > 0 && id <= is.last {
			is.t.Fatalf("ID %s after %s: IDs must increase", id, is.last)
		}
		is.last, is.n = id, is.n+1
	}
}

// The clock steps back an hour, jitters back and forth, freezes: IDs
// never repeat and never decrease, and go on in the last second used.
func TestStamper_ClockSteps(t *testing.T) {
	c := &fakeClock{t: t0}
	s := open(t, filepath.Join(t.TempDir(), "state"), c, Options{})
	defer s.Close()
	is := &issued{t: t}
	next := func(k int) {
		for range k {
			id, err := s.Next()
			if err != nil {
				t.Fatal(err)
			}
			is.take(id)
		}
	}
	next(10)
	first := is.last.TS()
	c.Add(-time.Hour) // a step back
	next(1000)
	if is.last.TS() != first {
		t.Errorf("after the clock stepped back: second %d, want %d (the last used)", is.last.TS(), first)
	}
	for i := range 200 { // jitter
		c.Add(time.Duration((i%7)-3) * 400 * time.Millisecond)
		next(50)
	}
	c.Set(t0.Add(5 * time.Second)) // forward again: the clock's second
	next(1)
	if is.last.TS() != uint32(t0.Unix())+5 {
		t.Errorf("after the clock went past: second %d, want %d", is.last.TS(), t0.Unix()+5)
	}
	// Frozen: a batch of 2^24 + 10 IDs rolls into the next second.
	ids := make([]ooid.ID, ooid.MaxCollectorCounter+11)
	if err := s.Fill(ids); err != nil {
		t.Fatal(err)
	}
	is.take(ids...)
	if got := ids[len(ids)-1].TS(); got != uint32(t0.Unix())+6 || ids[len(ids)-1].Decode().Counter != 10 {
		t.Errorf("after 2^24 IDs in one second: %s, want counter 10 of the next second", ids[len(ids)-1])
	}
}

// Past the lead bound, Next waits for the clock, or fails, as configured.
func TestStamper_LeadBound(t *testing.T) {
	for _, fail := range []bool{false, true} {
		c := &fakeClock{t: t0}
		s := open(t, filepath.Join(t.TempDir(), "state"), c, Options{MaxLead: 10, Lease: 5, FailAhead: fail})
		is := &issued{t: t}
		ids := make([]ooid.ID, 1<<20)
		var err error
		for k := 0; k < 16*15 && err == nil; k++ { // 15 seconds' worth on a frozen clock
			if err = s.Fill(ids); err == nil {
				is.take(ids...)
			}
		}
		if fail {
			if !errors.Is(err, ErrAhead) {
				t.Errorf("FailAhead: %v, want ErrAhead", err)
			}
			if ahead := int64(is.last.TS()) - t0.Unix(); ahead != 10 {
				t.Errorf("FailAhead: IDs ran %d s ahead, want the bound, 10", ahead)
			}
		} else {
			if err != nil {
				t.Fatal(err)
			}
			if c.sleeps == 0 || int64(is.last.TS())-c.Now().Unix() > 10 {
				t.Errorf("waiting: %d sleeps, IDs %d s ahead of the clock", c.sleeps, int64(is.last.TS())-c.Now().Unix())
			}
		}
		s.Close()
	}
}

// A restart issues only seconds after the recorded mark, whatever the
// clock says; the mark is written once a lease, not once an ID or second.
func TestStamper_Restart(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	c := &fakeClock{t: t0}
	is := &issued{t: t}
	for run := range 5 {
		// The clock set back two hours: waits for it are allowed here.
		s := open(t, state, c, Options{Lease: 10, MaxWait: 3 * time.Hour})
		for range 30 { // 30 seconds, 1000 IDs each
			for range 1000 {
				id, err := s.Next()
				if err != nil {
					t.Fatal(err)
				}
				is.take(id)
			}
			c.Add(time.Second)
		}
		// 30 s at a lease of 10 s: 3 or 4 writes while the clock leads;
		// 1 while it is behind the mark (all IDs in one second).
		if w := s.Writes(); w < 1 || w > 4 || (run == 0 && w < 3) {
			t.Errorf("run %d: %d writes of the mark for 30 s at a lease of 10 s", run, w)
		}
		s.Close()
		if run%2 == 1 {
			c.Add(-2 * time.Hour) // the clock set back between runs
		}
	}
}

// A graceful Close brings the mark back to the last second used, so the
// next run starts right after it; a run killed before Close starts after
// the lease instead. A run that issued nothing leaves the mark alone.
func TestStamper_CloseReturnsLease(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	c := &fakeClock{t: t0}
	is := &issued{t: t}
	s := open(t, state, c, Options{Lease: 10})
	id, _ := s.Next()
	is.take(id)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, state, c, Options{Lease: 10})
	id, _ = s.Next()
	is.take(id)
	if id.TS() != uint32(t0.Unix())+1 {
		t.Errorf("after a graceful close, second %d; want %d, the next after the one used", id.TS(), t0.Unix()+1)
	}
	s.lock.Unlock() // killed: no Close
	s.lock = nil
	s = open(t, state, c, Options{Lease: 10})
	id, _ = s.Next()
	is.take(id)
	if want := uint32(t0.Unix()) + 1 + 10 + 1; id.TS() != want {
		t.Errorf("after a crash, second %d; want %d, after the lease", id.TS(), want)
	}
	s.Close()
	mark := readMark(t, state)
	s = open(t, state, c, Options{Lease: 10})
	s.Close()
	if got := readMark(t, state); got != mark || got != id.TS() {
		t.Errorf("mark %d after a run that issued nothing, %d before; want %d", got, mark, id.TS())
	}
}

func readMark(t *testing.T, path string) uint32 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	st, err := parseState(b)
	if err != nil {
		t.Fatal(err)
	}
	return st.Mark
}

// One process per state file; a state file of another collector, cut
// short at any byte, or damaged, is refused with what to check.
func TestOpen_Refusals(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	c := &fakeClock{t: t0}
	s := open(t, state, c, Options{})
	if _, err := s.Next(); err != nil {
		t.Fatal(err)
	}
	_, err := Open(Options{CollectorID: 42, State: state, Clock: c.Now})
	var le *store.LockedError
	if !errors.As(err, &le) || le.Holder.PID != os.Getpid() {
		t.Errorf("a second stamper on one state file: %v", err)
	}
	s.Close()
	good, err := os.ReadFile(state)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Options{CollectorID: 7, State: state, Clock: c.Now}); err == nil || !strings.Contains(err.Error(), "the state of collector 42, not 7") {
		t.Errorf("another collector's state: %v", err)
	}
	for i := range len(good) {
		testutil.Check(t, os.WriteFile(state, good[:i], 0o644))
		s, err := Open(Options{CollectorID: 42, State: state, Clock: c.Now})
		if err == nil {
			s.Close()
		}
		if err == nil || !errors.Is(err, ErrState) {
			t.Fatalf("state cut at byte %d: %v", i, err)
		}
	}
	for _, bad := range [][]byte{
		[]byte(strings.Replace(string(good), "mark 1", "mark 2", 1)),
		append([]byte("x"), good...),
		[]byte(strings.Replace(string(good), "v1", "v9", 1)),
	} {
		testutil.Check(t, os.WriteFile(state, bad, 0o644))
		if _, err := Open(Options{CollectorID: 42, State: state, Clock: c.Now}); !errors.Is(err, ErrState) {
			t.Errorf("damaged state %q: %v", bad, err)
		}
	}
	// A mark far in the future: the clock, or the file, is wrong.
	future := stateOf(42, uint32(t0.Unix())+2*DefaultMaxFuture)
	testutil.Check(t, os.WriteFile(state, future, 0o644))
	if _, err := Open(Options{CollectorID: 42, State: state, Clock: c.Now}); err == nil || !strings.Contains(err.Error(), "check the clock") {
		t.Errorf("a mark in the future: %v", err)
	}
	if _, err := Open(Options{CollectorID: 0xF0, State: state}); err == nil {
		t.Error("collector id 0xf0 accepted")
	}
}

// FuzzParseState: any bytes give a state that encodes back to them, or an
// error; never a panic.
func FuzzParseState(f *testing.F) {
	f.Add(state{CollectorID: 42, Mark: 1700000000}.encode())
	f.Add([]byte("backfill collector state v1\ncollector_id 1\nmark 2\ncrc32 00000000\n"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := parseState(b)
		if err == nil && string(st.encode()) != string(b) {
			t.Fatalf("parseState(%q) = %+v, which encodes to %q", b, st, st.encode())
		}
	})
}

func stateOf(id uint8, mark uint32) []byte { return state{CollectorID: id, Mark: mark}.encode() }

// A mark an hour ahead of the clock (a restored snapshot, a clock
// stepped back) does not make issuing wait in silence: past MaxWait it
// fails at once, naming the clock; a wait within the bound is said at
// once and ends with the caller's context.
func TestStamper_WaitSaidBoundedCancelled(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	c := &fakeClock{t: t0}
	s := open(t, state, c, Options{})
	if _, err := s.Next(); err != nil {
		t.Fatal(err)
	}
	testutil.Check(t, s.Close())
	c.Add(-time.Hour)
	s = open(t, state, c, Options{})
	_, err := s.Next()
	if !errors.Is(err, ErrAhead) || !strings.Contains(err.Error(), "check the clock") || c.sleeps != 0 {
		t.Errorf("an hour behind the mark: %v after %d sleeps; want ErrAhead at once, naming the clock", err, c.sleeps)
	}
	testutil.Check(t, s.Close())

	// Within the bound, on the real timer: said at once, and cancelled.
	var said []string
	s, err = Open(Options{CollectorID: 42, State: state, Clock: c.Now, MaxWait: 2 * time.Hour, Notice: func(m string) { said = append(said, m) }})
	testutil.Check(t, err)
	defer s.Close()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { _, err := s.NextContext(ctx); done <- err }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("a wait cancelled: %v", err)
	}
	if len(said) != 1 || !strings.Contains(said[0], "waiting") {
		t.Errorf("the wait was said as %q", said)
	}
}
