package collector

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/backfill-dev/backfill/internal/store"
)

// Two stampers on one state file, one by a symbolic link and one by the
// real path, are one stamper too many: the second is refused, and the
// link is still a link after the first durable mark.
func TestStamper_LinkAndTargetShareOneLock(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real.state")
	link := filepath.Join(dir, "link.state")
	c := &fakeClock{t: t0}
	first := open(t, real, c, Options{})
	if _, err := first.Next(); err != nil { // writes the state
		t.Fatal(err)
	}
	first.Close()
	if err := os.Symlink("real.state", link); err != nil {
		t.Fatal(err)
	}
	a := open(t, link, c, Options{})
	defer a.Close()
	if _, err := a.Next(); err != nil {
		t.Fatal(err)
	}
	_, err := Open(Options{CollectorID: 42, State: real, Clock: c.Now, Sleep: c.Sleep})
	var le *store.LockedError
	if !errors.As(err, &le) {
		t.Fatalf("a second stamper on the link's target: err = %v, want a *store.LockedError", err)
	}
	if st, err := os.Lstat(link); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("after a durable mark through the link, the link is %v (%v): it must stay a link", st.Mode(), err)
	}
	if _, err := os.Lstat(link + ".lock"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a lock taken by the link's name (%v): the lock belongs beside the real file", err)
	}
}

// A state file with a second name (a hard link) is refused: a rename over
// one name would leave the other with an old mark.
func TestStamper_HardLinkRefused(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "state")
	c := &fakeClock{t: t0}
	s := open(t, real, c, Options{})
	if _, err := s.Next(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := os.Link(real, filepath.Join(dir, "other")); err != nil {
		t.Fatal(err)
	}
	_, err := Open(Options{CollectorID: 42, State: real, Clock: c.Now, Sleep: c.Sleep})
	if !errors.Is(err, store.ErrLinked) || !strings.Contains(err.Error(), "2 names") {
		t.Fatalf("a state of two names: err = %v, want a refusal that says so", err)
	}
}

// A hard link made while a stamper holds the state stops the next durable
// mark instead of splitting the state.
func TestStamper_HardLinkMadeWhileHeld(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "state")
	c := &fakeClock{t: t0}
	s := open(t, real, c, Options{Lease: 1, MaxLead: 60})
	defer s.Close()
	if _, err := s.Next(); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(real, filepath.Join(dir, "other")); err != nil {
		t.Fatal(err)
	}
	c.Add(5 * time.Second)
	if _, err := s.Next(); err == nil || !strings.Contains(err.Error(), "hard links") {
		t.Fatalf("a mark after a second name was made: err = %v, want a refusal", err)
	}
}

// Links planted where the stamper makes its files (STATE.lock, and the
// STATE.tmp the stamper once wrote) are never written through.
func TestStamper_PlantedLinksNotWritten(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("precious\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	if err := os.Symlink(victim, state+".tmp"); err != nil {
		t.Fatal(err)
	}
	c := &fakeClock{t: t0}
	s := open(t, state, c, Options{})
	if _, err := s.Next(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := os.Symlink(victim, filepath.Join(dir, "other.lock")); err != nil {
		t.Fatal(err)
	}
	_, err := Open(Options{CollectorID: 42, State: filepath.Join(dir, "other"), Clock: c.Now, Sleep: c.Sleep})
	if !errors.Is(err, store.ErrLinked) {
		t.Fatalf("a planted lock link: err = %v, want a refusal", err)
	}
	if b, err := os.ReadFile(victim); err != nil || string(b) != "precious\n" {
		t.Fatalf("the link's target holds %q (%v): it was written through a link", b, err)
	}
	if st, err := os.Lstat(state + ".tmp"); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the planted STATE.tmp link was replaced or removed (%v)", err)
	}
}
