package store

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// TmpDir is the folder, under a local Store's root, where files are written
// before Commit renames them into place. Whoever holds the root's lock may
// clear it: what is there was left by a process that died.
const TmpDir = ".tmp"

type local struct {
	root string
	fsys fs.FS
}

// Local returns the Store of the local folder root (which need not exist
// yet).
func Local(root string) Store { return &local{root: root, fsys: os.DirFS(root)} }

// LocalDir returns the folder on disk a Store is rooted at, for the
// commands that hand a folder to another program; ok is false for a
// Store that is not on disk.
func LocalDir(s Store) (dir string, ok bool) {
	if l, ok := s.(*local); ok {
		return l.root, true
	}
	return "", false
}

func (l *local) path(name string) string { return filepath.Join(l.root, filepath.FromSlash(name)) }

func (l *local) Where(name string) string { return l.path(name) }

func (l *local) Sub(name string) Store { return Local(l.path(name)) }

func (l *local) Parent() (Store, string) {
	c := filepath.Clean(l.root)
	return Local(filepath.Dir(c)), filepath.Base(c)
}

// The local calls do not block on the network and cannot be cancelled
// midway: they take a context for the interface, and do not look at it
// (a run interrupted before its first bucket still resolves its input and
// says how to resume).

func (l *local) Open(_ context.Context, name string) (fs.File, error) {
	return l.fsys.Open(name)
}

func (l *local) ReadDir(_ context.Context, name string) ([]fs.DirEntry, error) {
	return os.ReadDir(l.path(name))
}

func (l *local) Stat(_ context.Context, name string) (fs.FileInfo, error) {
	return os.Stat(l.path(name))
}

func (l *local) MkdirAll(_ context.Context, name string) error {
	return os.MkdirAll(l.path(name), 0o755)
}

func (l *local) Create(_ context.Context, name string) (Writer, error) {
	dst := l.path(name)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return nil, err
	}
	tmp := filepath.Join(l.root, TmpDir)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(tmp, strings.ReplaceAll(name, "/", "_")+"-*")
	if err != nil {
		return nil, err
	}
	return &localWriter{File: f, dst: dst}, nil
}

type localWriter struct {
	*os.File
	dst  string
	done bool
}

func (w *localWriter) Commit() error {
	if w.done {
		return errors.New("store: commit of a file already committed or aborted")
	}
	w.done = true
	err := errors.Join(w.Chmod(FileMode()), w.Sync(), w.Close())
	if err == nil {
		err = os.Rename(w.Name(), w.dst)
	}
	if err == nil {
		err = SyncDir(filepath.Dir(w.dst))
	}
	if err != nil {
		_ = os.Remove(w.Name()) // the temporary file; err says why
	}
	return err
}

func (w *localWriter) Abort() error {
	if w.done {
		return nil
	}
	w.done = true
	_ = w.Close() // what was written is discarded
	return os.Remove(w.Name())
}

// SyncDir syncs the folder dir, so that a rename or removal in it lasts
// (a file system that cannot sync folders is not an error).
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) {
		return err
	}
	return nil
}

// Remove removes the file name and syncs its folder, so the removal lasts.
func (l *local) Remove(_ context.Context, name string) error {
	p := l.path(name)
	if err := os.Remove(p); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	return SyncDir(filepath.Dir(p))
}

func (l *local) RemoveAll(_ context.Context, name string) error {
	return os.RemoveAll(l.path(name))
}

// Lock takes an flock on the file name, which holds the holder's PID; the
// kernel releases it when the process dies.
func (l *local) Lock(_ context.Context, name string) (Lock, error) {
	p := l.path(name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			h, _ := l.Holder(context.Background(), name)
			return nil, &LockedError{Where: p, Holder: h}
		}
		return nil, &Error{Where: p, Op: "lock", Err: err}
	}
	if err := f.Truncate(0); err != nil {
		f.Close()
		return nil, err
	}
	if _, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0); err != nil {
		f.Close()
		return nil, err
	}
	return &localLock{f: f}, nil
}

type localLock struct{ f *os.File }

// Held implements Lock: an flock lasts as long as the process.
func (k *localLock) Held(context.Context) error { return nil }

func (k *localLock) Unlock() error {
	if k.f == nil {
		return nil
	}
	err := k.f.Close() // closing releases the flock
	k.f = nil
	return err
}

// Holder reads the PID in a held lock file.
func (l *local) Holder(_ context.Context, name string) (Holder, bool) {
	f, err := os.Open(l.path(name))
	if err != nil {
		return Holder{}, false
	}
	defer f.Close()
	if syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB) == nil {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN) // closing f releases it too
		return Holder{}, false
	}
	b := make([]byte, 32)
	n, _ := f.ReadAt(b, 0)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b[:n])))
	return Holder{PID: pid}, true
}

// umask is the process's file mode creation mask, read before main runs
// (setting it to read it is not safe once goroutines create files).
var umask = func() os.FileMode {
	m := syscall.Umask(0)
	syscall.Umask(m)
	return os.FileMode(m)
}()

// FileMode is the mode of the files the store writes: 0666 less the
// umask, as os.Create gives (0644 under the usual umask 022). A temporary
// file is made 0600; it gets this mode before it is renamed into place.
func FileMode() os.FileMode { return 0o666 &^ umask }

// WriteLocalFile writes data to the local file path whole: through a
// temporary file beside it, synced, renamed into place and its folder
// synced, so that a reader (or a crash) sees the old file or the new one,
// never a part.
func WriteLocalFile(path string, data []byte) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(f.Name()) }() // gone once renamed; else the temporary file
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := errors.Join(f.Chmod(FileMode()), f.Sync(), f.Close()); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return err
	}
	return SyncDir(dir)
}
