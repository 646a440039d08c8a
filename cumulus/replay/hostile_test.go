package replay

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/backfill-dev/backfill/cumulus/dla"
	"github.com/backfill-dev/backfill/internal/cumulustest"
	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/internal/testutil"
)

// hangBound is how long a call may take before a test calls it hung: not
// a speed, a bound on what must not wait forever (a FIFO).
const hangBound = time.Minute

// withinBound runs fn and fails the test if it has not returned within
// hangBound.
func withinBound(t *testing.T, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	select {
	case <-done:
	case <-time.After(hangBound):
		t.Fatalf("%s: still waiting after %s (a FIFO read as an input?)", what, hangBound)
	}
}

// The archive as a careless or hostile hand leaves it: a record whose
// execution name starts with a dot, a hidden date folder, a file directly
// in sqs/, a folder inside a date folder, a FIFO, and a date folder that
// is a link out of the archive. Every record is replayed; every stray is
// named, counted and left in place; nothing out of the archive is read,
// written, moved or deleted; nothing waits.
func TestRecover_HostileArchive(t *testing.T) {
	e := newEnv(t, true)
	e.write(t, e.options,
		eventOf(t, msg(".dot", "completed", "LATER___1", t0, "g-dot"), "SUCCEEDED"),
		eventOf(t, msg("plain", "completed", "LATER___1", t0, "g-plain"), "SUCCEEDED"),
		eventOf(t, msg("hidden-date", "completed", "LATER___1", t0, "g-hidden"), "SUCCEEDED"))
	recs := e.archived(t, false)
	if len(recs) != 3 {
		t.Fatalf("archived %d records, want 3: %v", len(recs), recs)
	}
	sqs := filepath.Join(e.dir, "dead-letter-archive", "sqs")
	var dotKey string
	for key := range recs {
		switch {
		case strings.HasPrefix(key, "2023-11-14/.dot-"):
			dotKey = key
		case strings.HasPrefix(key, "2023-11-14/hidden-date-"):
			testutil.Check(t, os.MkdirAll(filepath.Join(sqs, ".2023-11-14"), 0o755))
			testutil.Check(t, os.Rename(filepath.Join(sqs, key), filepath.Join(sqs, ".2023-11-14", filepath.Base(key))))
		}
	}
	if dotKey == "" {
		t.Fatalf("no record named after the execution .dot: %v", recs)
	}
	// Strays.
	testutil.Check(t, os.WriteFile(filepath.Join(sqs, "loose.json"), []byte("{}"), 0o644))
	testutil.Check(t, os.MkdirAll(filepath.Join(sqs, "2023-11-14", "nested"), 0o755))
	testutil.Check(t, syscall.Mkfifo(filepath.Join(sqs, "2023-11-14", "fifo"), 0o644))
	huge, err := os.Create(filepath.Join(sqs, "2023-11-14", "huge")) // sparse: no disk taken
	testutil.Check(t, err)
	testutil.Check(t, huge.Truncate(dla.MaxRecord+1))
	testutil.Check(t, huge.Close())
	outside := t.TempDir()
	for name, mode := range map[string]os.FileMode{"valid": 0o644, "secret": 0o600} {
		data, err := os.ReadFile(filepath.Join(sqs, dotKey))
		testutil.Check(t, err)
		if name == "secret" {
			data = []byte("not json")
		}
		testutil.Check(t, os.WriteFile(filepath.Join(outside, name), data, mode))
	}
	testutil.Check(t, os.Symlink(outside, filepath.Join(sqs, "2023-11-15")))
	testutil.Check(t, os.Symlink(filepath.Join(outside, "valid"), filepath.Join(sqs, "2023-11-14", "link")))

	cumulustest.AddCollection(t, e.pool, "LATER___1")
	var st Stats
	withinBound(t, "recover", func() {
		st, err = Recover(context.Background(), e.arch, e.w, Options{Log: e.options.Log})
	})
	if err != nil {
		t.Fatal(err)
	}
	if st.Messages != 3 || st.Deleted != 3 || st.Left != 6 {
		t.Errorf("stats %+v; want 3 records replayed and deleted, 6 strays left (loose.json, nested, fifo, huge, link, 2023-11-15)", st)
	}
	rows := strings.Join(e.granules(t), "\n")
	for _, g := range []string{"g-dot", "g-plain", "g-hidden"} {
		if !strings.Contains(rows, g) {
			t.Errorf("granule %s not written: %s", g, rows)
		}
	}
	for _, stray := range []string{"loose.json", "2023-11-14/nested", "2023-11-14/fifo", "2023-11-14/huge", "2023-11-14/link", "2023-11-15"} {
		if _, err := os.Lstat(filepath.Join(sqs, stray)); err != nil {
			t.Errorf("stray %s: %v; it must be left in place", stray, err)
		}
		if !logged(e, stray) {
			t.Errorf("stray %s not named in the log: %q", stray, e.logs)
		}
	}
	for name, mode := range map[string]os.FileMode{"valid": 0o644, "secret": 0o600} {
		st, err := os.Stat(filepath.Join(outside, name))
		if err != nil || st.Mode().Perm() != mode {
			t.Errorf("%s outside the archive: %v, %v; it must be untouched", name, st, err)
		}
	}
	if _, err := os.Stat(filepath.Join(e.dir, "dead-letter-archive", "failed-sqs", "2023-11-15")); err == nil {
		t.Errorf("a file from outside the archive was moved into failed-sqs")
	}
}

func logged(e *env, s string) bool {
	e.logMu.Lock()
	defer e.logMu.Unlock()
	for _, l := range e.logs {
		if strings.Contains(l, s) {
			return true
		}
	}
	return false
}

// A date folder of the archive that is a link out of it is never written
// through: the message's put fails and says where.
func TestWrite_ArchiveDateLinkNotWrittenThrough(t *testing.T) {
	e := newEnv(t, true)
	outside := t.TempDir()
	sqs := filepath.Join(e.dir, "dead-letter-archive", "sqs")
	testutil.Check(t, os.MkdirAll(sqs, 0o755))
	testutil.Check(t, os.Symlink(outside, filepath.Join(sqs, "2023-11-14")))
	_, err := Write(context.Background(), []string{"-"},
		strings.NewReader(js(t, eventOf(t, msg("e", "completed", "NOPE___1", t0, "g"), "SUCCEEDED"))+"\n"), e.w, e.arch, e.options)
	if err == nil {
		t.Fatal("a dead letter was put through a link out of the archive without an error")
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Fatalf("written outside the archive: %v", ents)
	}
}

// A folder of inputs with a link to a file inside it (read), a link out
// of it, a link to a folder, a FIFO (each refused by name) and a hidden
// file (skipped, named): nothing waits, and every message read is written.
func TestWrite_InputFolderLinksAndFIFOs(t *testing.T) {
	e := newEnv(t, true, "LATER___1")
	in := t.TempDir()
	line := func(exec, id string) []byte {
		return []byte(js(t, msg(exec, "completed", "LATER___1", t0, id)) + "\n")
	}
	testutil.Check(t, os.WriteFile(filepath.Join(in, "a.json"), line("a", "g-a"), 0o644))
	testutil.Check(t, os.MkdirAll(filepath.Join(in, "sub"), 0o755))
	testutil.Check(t, os.WriteFile(filepath.Join(in, "sub", "b.json"), line("b", "g-b"), 0o644))
	testutil.Check(t, os.Symlink("sub/b.json", filepath.Join(in, "c.json"))) // inside: read (b again)
	outside := t.TempDir()
	testutil.Check(t, os.WriteFile(filepath.Join(outside, "x.json"), line("x", "g-x"), 0o644))
	testutil.Check(t, os.Symlink(filepath.Join(outside, "x.json"), filepath.Join(in, "out.json")))
	testutil.Check(t, os.Symlink("sub", filepath.Join(in, "dirlink")))
	testutil.Check(t, syscall.Mkfifo(filepath.Join(in, "fifo.json"), 0o644))
	testutil.Check(t, os.WriteFile(filepath.Join(in, ".hidden.json"), line("h", "g-h"), 0o644))
	fifoArg := filepath.Join(t.TempDir(), "fifo-arg")
	testutil.Check(t, syscall.Mkfifo(fifoArg, 0o644))

	var st Stats
	var err error
	withinBound(t, "write", func() {
		st, err = Write(context.Background(), []string{in, fifoArg}, nil, e.w, e.arch, e.options)
	})
	if err != nil {
		t.Fatal(err)
	}
	if st.Messages != 3 || st.OK != 3 || st.Left != 4 {
		t.Errorf("stats %+v; want 3 messages written (a, b, b by the link), 4 inputs refused", st)
	}
	for _, name := range []string{"out.json", "dirlink", "fifo.json", "fifo-arg", ".hidden.json"} {
		if !logged(e, name) {
			t.Errorf("%s not named in the log: %q", name, e.logs)
		}
	}
	if rows := strings.Join(e.granules(t), "\n"); strings.Contains(rows, "g-x") || strings.Contains(rows, "g-h") {
		t.Errorf("a file out of the folder, or a hidden one, was read: %s", rows)
	}
}

// An archive that cannot be written: the messages written are counted as
// written, and the error names the input that failed and was not archived.
func TestWrite_ArchiveUnwritable(t *testing.T) {
	e := newEnv(t, true, "LATER___1")
	file := filepath.Join(t.TempDir(), "not-a-folder")
	testutil.Check(t, os.WriteFile(file, nil, 0o644))
	arch := dla.New(store.Local(file))
	var in strings.Builder
	in.WriteString(js(t, msg("bad", "completed", "NEVER___1", t0, "g-bad")) + "\n")
	in.WriteString(js(t, msg("good", "completed", "LATER___1", t0, "g-good")) + "\n")
	st, err := Write(context.Background(), []string{"-"}, strings.NewReader(in.String()), e.w, arch, e.options)
	if err == nil || !strings.Contains(err.Error(), "stdin:1") || !strings.Contains(err.Error(), "could not be put in the archive") {
		t.Fatalf("err = %v; want one that names stdin:1 and the archive", err)
	}
	if st.Messages != 2 || st.OK != 1 || st.Archived != 1 {
		t.Errorf("stats %+v; want 2 messages, 1 written, 1 failed", st)
	}
	if rows := strings.Join(e.granules(t), "\n"); !strings.Contains(rows, "g-good") {
		t.Errorf("the good message's granule is not written: %s", rows)
	}
}
