// Package collector issues collector-stamped OOIDs (32:8:24) that never
// repeat, across restarts and clock steps:
//
//	ts << 32 | collector_id << 24 | counter
//
// ts is the wall clock's second, collector_id is 0..0xEF (0xF0..0xFF
// would alias the backfilled nibble), and counter counts the IDs of a
// second from 0 to 2^24-1.
//
// At run time the second never goes back: when the wall clock steps back,
// IDs go on in the last second used; when a second's 2^24 counters are
// used up, IDs move on to the next second, never more than Options.MaxLead
// seconds ahead of the wall clock (past that, Next waits, or fails with
// ErrAhead).
//
// At start time a state file says how far the previous runs may have gone:
// its mark is a second no earlier ID went past. Before an ID of a second
// beyond the mark is handed out, a new mark (that second plus
// Options.Lease) is made durable (write, fsync, rename, fsync the
// folder), so the disk is touched once a lease, not once an ID or a
// second. A new run issues only seconds after the recorded mark, whatever
// the clock says. One process holds a state file at a time (an OS lock);
// a state file of another collector id, cut short, damaged, or whose mark
// is far in the future, is refused with an error that says what to
// check, never reset.
package collector

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/pipeline/ooid"
)

// Defaults of Options.
const (
	DefaultLease     = 10        // seconds reserved by each durable mark
	DefaultMaxLead   = 60        // seconds the IDs may run ahead of the clock
	DefaultMaxFuture = 24 * 3600 // a recorded mark further ahead than this is refused
	DefaultMaxWait   = time.Minute
)

// Options say how a Stamper issues IDs.
type Options struct {
	CollectorID uint8  // 0..ooid.MaxCollectorID
	State       string // the state file
	// Lease is how many seconds past the one being entered a durable mark
	// reserves; DefaultLease when 0.
	Lease uint32
	// MaxLead bounds how far ahead of the wall clock IDs may run, when a
	// second's counters are used up or a restart starts past the clock;
	// DefaultMaxLead when 0. It must be at least Lease, or every restart
	// would wait.
	MaxLead uint32
	// FailAhead makes Next fail with ErrAhead past MaxLead, instead of
	// waiting for the clock.
	FailAhead bool
	// MaxFuture refuses a state file whose mark is further ahead of the
	// clock than this many seconds; DefaultMaxFuture when 0.
	MaxFuture uint32
	// MaxWait bounds one wait for the clock (past MaxLead): a wait longer
	// than this fails at once with ErrAhead, naming the clock and the
	// mark (a clock stepped back, a restored snapshot); DefaultMaxWait
	// when 0.
	MaxWait time.Duration
	// Notice, when set, is told at once of each wait for the clock.
	Notice func(msg string)
	// Clock and Sleep are the wall clock and the wait (time.Now, and a
	// timer that the caller's context cancels, when nil), for tests.
	Clock func() time.Time
	Sleep func(time.Duration)
}

// ErrAhead is returned, with Options.FailAhead, when issuing would take
// the IDs more than MaxLead seconds ahead of the wall clock.
var ErrAhead = errors.New("collector: the IDs would run too far ahead of the clock")

// Stamper issues IDs. It is safe for concurrent use.
type Stamper struct {
	mu     sync.Mutex
	opt    Options
	lock   store.Lock
	real   string      // the state file, links resolved: what is locked, read and replaced
	file   os.FileInfo // the state file as last read or written (nil before it exists)
	sec    uint32      // the second of the last ID; 0 before the first
	next   uint32      // the next counter of sec
	floor  uint32      // no ID of this run is of a second <= floor
	mark   uint32      // durable: no ID goes past it
	writes int         // durable writes of the mark
	closed bool
}

// Open takes the state file (creating it for a new collector) and returns
// a Stamper that issues only seconds after its mark.
func Open(opt Options) (*Stamper, error) {
	if opt.CollectorID > ooid.MaxCollectorID {
		return nil, fmt.Errorf("collector: id %#x is over %#x (0xf0..0xff would alias backfilled IDs)", opt.CollectorID, ooid.MaxCollectorID)
	}
	if opt.State == "" {
		return nil, errors.New("collector: no state file")
	}
	if opt.Lease == 0 {
		opt.Lease = DefaultLease
	}
	if opt.MaxLead == 0 {
		opt.MaxLead = max(DefaultMaxLead, opt.Lease)
	}
	if opt.MaxLead < opt.Lease {
		return nil, fmt.Errorf("collector: the lead bound (%d s) is below the lease (%d s): every restart would wait", opt.MaxLead, opt.Lease)
	}
	if opt.MaxFuture == 0 {
		opt.MaxFuture = DefaultMaxFuture
	}
	if opt.Clock == nil {
		opt.Clock = time.Now
	}
	if opt.MaxWait <= 0 {
		opt.MaxWait = DefaultMaxWait
	}
	real, err := resolveState(opt.State)
	if err != nil {
		return nil, err
	}
	s := &Stamper{opt: opt, real: real}
	if err := s.takeLock(); err != nil {
		return nil, err
	}
	b, err := s.read()
	switch {
	case errors.Is(err, os.ErrNotExist):
		// A new collector: nothing was issued from this file.
	case err != nil:
		return nil, errors.Join(fmt.Errorf("collector: %w", err), s.Close())
	default:
		st, err := parseState(b)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("%w (%s): check the file; it is never reset by itself", err, opt.State), s.Close())
		}
		if st.CollectorID != opt.CollectorID {
			return nil, errors.Join(fmt.Errorf("collector: %s is the state of collector %d, not %d: check --collector-id and --state", opt.State, st.CollectorID, opt.CollectorID), s.Close())
		}
		if now := s.now(); st.Mark > now && st.Mark-now > opt.MaxFuture {
			return nil, errors.Join(fmt.Errorf("collector: %s says IDs went up to %s, %d s ahead of this clock (%s): check the clock; if it is right, the file is not this collector's",
				opt.State, time.Unix(int64(st.Mark), 0).UTC().Format(time.RFC3339), st.Mark-now, time.Unix(int64(now), 0).UTC().Format(time.RFC3339)), s.Close())
		}
		s.floor, s.mark = st.Mark, st.Mark
	}
	return s, nil
}

// resolveState returns the path of the state file with every link
// resolved: two names of one file (a link and its target) take one lock
// and replace one file, and a link to the state stays a link.
func resolveState(state string) (string, error) {
	real, err := filepath.EvalSymlinks(state)
	if err == nil {
		return filepath.Abs(real)
	}
	if _, lerr := os.Lstat(state); lerr == nil {
		return "", fmt.Errorf("collector: %s is a link to a file that is not there (%v): make the link's target, or give the state's own path", state, err)
	}
	dir, err := filepath.EvalSymlinks(filepath.Dir(state))
	if err != nil {
		return "", fmt.Errorf("collector: the state's folder: %w", err)
	}
	return filepath.Abs(filepath.Join(dir, filepath.Base(state)))
}

// read reads the state file (os.ErrNotExist when there is none) without
// following a link, and remembers which file it read.
func (s *Stamper) read() ([]byte, error) {
	f, err := store.OpenOwned(s.real)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(f, maxStateSize+1))
	if err != nil {
		return nil, err
	}
	s.file = st
	return b, nil
}

// takeLock takes the lock of the state file (REAL.lock beside the state's
// real path, the store's flock, never opened through a link): a second
// process fails at once with a *store.LockedError, by whatever name it
// reached the state.
func (s *Stamper) takeLock() error {
	dir, base := filepath.Split(s.real)
	l, err := store.Local(dir).Lock(context.Background(), base+".lock")
	var le *store.LockedError
	if errors.As(err, &le) {
		le.Who, le.Verb, le.Where, le.Advice = "another process", "issues IDs from", s.real, "one process per state file, whatever name reaches it"
		return fmt.Errorf("collector: %w", le)
	}
	if err != nil {
		return fmt.Errorf("collector: %w", err)
	}
	s.lock = l
	return nil
}

func (s *Stamper) now() uint32 {
	t := s.opt.Clock().Unix()
	switch {
	case t < 0:
		return 0
	case t > 1<<32-1:
		return 1<<32 - 1
	}
	return uint32(t)
}

// Next returns a new ID.
func (s *Stamper) Next() (ooid.ID, error) { return s.NextContext(context.Background()) }

// NextContext returns a new ID; a wait for the clock ends with ctx.
func (s *Stamper) NextContext(ctx context.Context) (ooid.ID, error) {
	var id [1]ooid.ID
	err := s.FillContext(ctx, id[:])
	return id[0], err
}

// Fill fills ids with new IDs, in increasing order. On error the IDs
// before the failure are filled, the others zero.
func (s *Stamper) Fill(ids []ooid.ID) error { return s.FillContext(context.Background(), ids) }

// FillContext is Fill, whose wait for the clock (bounded by MaxWait) ends
// with ctx.
func (s *Stamper) FillContext(ctx context.Context, ids []ooid.ID) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("collector: stamper closed")
	}
	for len(ids) > 0 {
		if err := s.second(ctx); err != nil {
			return err
		}
		n := min(uint32(len(ids)), ooid.MaxCollectorCounter+1-s.next)
		base := uint64(s.sec)<<32 | uint64(s.opt.CollectorID)<<24
		for i := range n {
			ids[i] = ooid.ID(base | uint64(s.next+i))
		}
		s.next += n
		ids = ids[n:]
	}
	return nil
}

// second makes s.sec, s.next the place of the next ID: the wall clock's
// second when it is ahead, never an earlier one, the next second when
// this one is used up, within the lead bound and the durable mark.
func (s *Stamper) second(ctx context.Context) error {
	for {
		now := s.now()
		sec, next := s.sec, s.next
		if now > sec {
			sec, next = now, 0
		}
		if next > ooid.MaxCollectorCounter {
			sec, next = sec+1, 0
		}
		if sec <= s.floor {
			sec, next = s.floor+1, 0
		}
		if sec == 0 || sec < s.sec {
			return errors.New("collector: the 32-bit seconds are used up")
		}
		if sec > s.sec && sec > now && sec-now > s.opt.MaxLead {
			if s.opt.FailAhead {
				return fmt.Errorf("%w: second %d, clock %d, bound %d s", ErrAhead, sec, now, s.opt.MaxLead)
			}
			wait := time.Duration(sec-now-s.opt.MaxLead) * time.Second
			if wait > s.opt.MaxWait {
				return fmt.Errorf("%w: the IDs issued went up to %s and the clock says %s: issuing waits %s, over the bound of %s; check the clock (stepped back, or a restored snapshot)",
					ErrAhead, time.Unix(int64(sec-1), 0).UTC().Format(time.RFC3339), time.Unix(int64(now), 0).UTC().Format(time.RFC3339), wait, s.opt.MaxWait)
			}
			if s.opt.Notice != nil {
				s.opt.Notice(fmt.Sprintf("collector: the IDs are %d s ahead of the clock; waiting %s for it (--fail-ahead fails instead)", sec-now, wait))
			}
			if err := s.sleep(ctx, wait); err != nil {
				return err
			}
			continue
		}
		if sec > s.mark {
			mark := uint32(min(uint64(sec)+uint64(s.opt.Lease), 1<<32-1))
			if err := s.persist(mark); err != nil {
				return err
			}
		}
		s.sec, s.next = sec, next
		return nil
	}
}

// sleep waits d, or until ctx ends.
func (s *Stamper) sleep(ctx context.Context, d time.Duration) error {
	if s.opt.Sleep != nil {
		s.opt.Sleep(d)
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// persist makes mark durable: the state file is written aside (a new
// file of a random name, never an existing one), synced, renamed over the
// old one, and its folder synced. The file it replaces must be the one
// this Stamper read or wrote last: a state replaced or given a second
// name meanwhile is an error, never overwritten.
func (s *Stamper) persist(mark uint32) error {
	if err := s.checkSame(); err != nil {
		return err
	}
	data := state{CollectorID: s.opt.CollectorID, Mark: mark}.encode()
	dir, base := filepath.Split(s.real)
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return fmt.Errorf("collector: write the state: %w", err)
	}
	_, err = f.Write(data)
	err = errors.Join(err, f.Chmod(store.FileMode()), f.Sync())
	st, serr := f.Stat()
	err = errors.Join(err, serr, f.Close())
	if err == nil {
		err = os.Rename(f.Name(), s.real)
	}
	if err == nil {
		err = store.SyncDir(dir)
	}
	if err != nil {
		_ = os.Remove(f.Name()) // the file written aside; err says why
		return fmt.Errorf("collector: write the state: %w", err)
	}
	s.file = st
	s.mark = mark
	s.writes++
	return nil
}

// checkSame checks that the state file is still the file this Stamper
// last read or wrote (or still absent), with one name.
func (s *Stamper) checkSame() error {
	st, err := os.Lstat(s.real)
	switch {
	case errors.Is(err, os.ErrNotExist) && s.file == nil:
		return nil
	case err != nil:
		return fmt.Errorf("collector: the state file %s: %w", s.real, err)
	case s.file == nil || !os.SameFile(st, s.file):
		return fmt.Errorf("collector: the state file %s was replaced by something else while this process held it: stopped, nothing written", s.real)
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && sys.Nlink > 1 {
		return fmt.Errorf("collector: the state file %s was given %d names (hard links) while this process held it: stopped, nothing written", s.real, sys.Nlink)
	}
	return nil
}

// Writes returns how many times the mark was made durable.
func (s *Stamper) Writes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writes
}

// Close releases the state file. If IDs were issued short of the lease,
// the mark is brought back to the last second used, so that a graceful
// restart does not skip the rest of the lease; after a crash the next run
// starts after the lease instead. The mark only ever covers every ID
// issued.
func (s *Stamper) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.lock == nil {
		return nil
	}
	var err error
	if s.sec > s.floor && s.sec < s.mark {
		err = s.persist(s.sec)
	}
	err = errors.Join(err, s.lock.Unlock())
	s.lock = nil
	return err
}
