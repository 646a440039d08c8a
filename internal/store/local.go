package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// TmpDir is the folder, under a local Store's root, where files are written
// before Commit renames them into place. Whoever holds the root's lock may
// clear it: what is there was left by a process that died.
const TmpDir = ".tmp"

// A local Store works inside the folder it was given and never leaves it,
// whatever links the tree holds (os.Root: every name is resolved one
// component at a time, relative to the folder):
//
//   - a symbolic link inside the folder is followed when it leads to a
//     place inside the folder, and refused by name when it leads out of it
//     (or is absolute);
//   - Open reads regular files only: a FIFO, a device or a socket is an
//     error that names it (*NotRegularError), never a wait;
//   - files are written aside under a random name in TmpDir (O_EXCL), then
//     renamed into place, so no existing file or link is written through;
//   - a lock file is never followed: a link or a file with other names
//     (hard links) where one is expected is refused.
//
// The folder the user named (the Store's root) may itself be a link: it is
// the user's own word.
type local struct {
	base string // the folder the user named, as given
	rel  string // slash-separated folder under base this Store is rooted at ("" for base)
}

// Local returns the Store of the local folder root (which need not exist
// yet).
func Local(root string) Store { return &local{base: root} }

// LocalDir returns the folder on disk a Store is rooted at, for the
// commands that hand a folder to another program; ok is false for a
// Store that is not on disk.
func LocalDir(s Store) (dir string, ok bool) {
	if l, ok := s.(*local); ok {
		return l.path("."), true
	}
	return "", false
}

// name is the name under base of a name under this Store's root.
func (l *local) name(name string) string {
	n := path.Join(l.rel, path.Clean("/" + name)[1:])
	if n == "" {
		return "."
	}
	return n
}

func (l *local) path(name string) string {
	return filepath.Join(l.base, filepath.FromSlash(l.name(name)))
}

func (l *local) Where(name string) string { return l.path(name) }

func (l *local) Sub(name string) Store { return &local{base: l.base, rel: l.name(name)} }

func (l *local) Parent() (Store, string) {
	if n := l.name("."); n != "." {
		dir, base := path.Split(n)
		return &local{base: l.base, rel: strings.TrimSuffix(dir, "/")}, base
	}
	c := filepath.Clean(l.base)
	return Local(filepath.Dir(c)), filepath.Base(c)
}

// open opens the folder the user named as an os.Root; with create, it is
// made first when it is not there.
func (l *local) open(create bool) (*os.Root, error) {
	r, err := os.OpenRoot(l.base)
	if create && errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(l.base, 0o755); err != nil {
			return nil, err
		}
		r, err = os.OpenRoot(l.base)
	}
	return r, err
}

// do runs fn on the Store's folder tree, with name made a name under base;
// errors name the path a person knows.
func (l *local) do(name string, create bool, fn func(r *os.Root, name string) error) error {
	r, err := l.open(create)
	if err != nil {
		return l.pathErr(name, err)
	}
	defer r.Close()
	return l.pathErr(name, fn(r, l.name(name)))
}

// pathErr rewrites an error of os.Root (which names a path relative to
// the root) to name the path on disk.
func (l *local) pathErr(name string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return &fs.PathError{Op: pe.Op, Path: l.path(name), Err: pe.Err}
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return &fs.PathError{Op: le.Op, Path: l.path(name), Err: le.Err}
	}
	return err
}

// The local calls do not block on the network and cannot be cancelled
// midway: they take a context for the interface, and do not look at it
// (a run interrupted before its first bucket still resolves its input and
// says how to resume). None of them waits on a FIFO.

// NotRegularError is the error of Open for a file that is neither a
// regular file nor a folder: reading it could wait forever (a FIFO) or
// never end (a device).
type NotRegularError struct {
	Path string
	Mode fs.FileMode
}

func (e *NotRegularError) Error() string {
	return fmt.Sprintf("%s: %s, not a regular file: refused", e.Path, KindOf(e.Mode))
}

// KindOf names the type of a file mode, for messages.
func KindOf(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "a regular file"
	case m.IsDir():
		return "a folder"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "an irregular file"
}

func (l *local) Open(_ context.Context, name string) (fs.File, error) {
	var f *os.File
	err := l.do(name, false, func(r *os.Root, n string) error {
		var err error
		// O_NONBLOCK: opening a FIFO with no writer does not wait.
		f, err = r.OpenFile(n, os.O_RDONLY|syscall.O_NONBLOCK, 0)
		return err
	})
	if err != nil {
		return nil, err
	}
	return Regular(f, l.path(name), true)
}

// Regular returns f, just opened (with O_NONBLOCK, so that a FIFO did not
// hold the open), when it is a regular file (or, with dirs, a folder);
// else it closes f and returns a *NotRegularError naming path.
func Regular(f *os.File, path string, dirs bool) (*os.File, error) {
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() && !(dirs && st.IsDir()) {
		f.Close()
		return nil, &NotRegularError{Path: path, Mode: st.Mode()}
	}
	return f, nil
}

func (l *local) ReadDir(_ context.Context, name string) ([]fs.DirEntry, error) {
	var ents []fs.DirEntry
	err := l.inDir(name, func(d *os.File) (err error) {
		ents, err = d.ReadDir(-1)
		return err
	})
	slices.SortFunc(ents, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return ents, err
}

// ReadDirNames implements NameLister: the names alone, without the
// lstat of each entry that ReadDir makes under an os.Root.
func (l *local) ReadDirNames(_ context.Context, name string) ([]string, error) {
	var names []string
	err := l.inDir(name, func(d *os.File) (err error) {
		names, err = d.Readdirnames(-1)
		return err
	})
	slices.Sort(names)
	return names, err
}

// inDir calls fn with the folder name open.
func (l *local) inDir(name string, fn func(*os.File) error) error {
	return l.do(name, false, func(r *os.Root, n string) error {
		d, err := r.Open(n)
		if err != nil {
			return err
		}
		defer d.Close()
		return fn(d)
	})
}

func (l *local) Stat(_ context.Context, name string) (fs.FileInfo, error) {
	if l.name(name) == "." {
		return os.Stat(l.base) // the user's own folder, or a file they named
	}
	var st fs.FileInfo
	err := l.do(name, false, func(r *os.Root, n string) error {
		var err error
		st, err = r.Stat(n)
		return err
	})
	return st, err
}

func (l *local) MkdirAll(_ context.Context, name string) error {
	return l.do(name, true, func(r *os.Root, n string) error { return r.MkdirAll(n, 0o755) })
}

// randomName is a name no other writer picks.
func randomName(prefix string) string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand never fails (Go 1.24 on)
	return prefix + "-" + hex.EncodeToString(b[:])
}

func (l *local) Create(_ context.Context, name string) (Writer, error) {
	dst := l.name(name)
	tmp := path.Join(l.rel, TmpDir, randomName(strings.ReplaceAll(path.Clean("/" + name)[1:], "/", "_")))
	var f *os.File
	err := l.do(name, true, func(r *os.Root, _ string) error {
		if err := r.MkdirAll(path.Dir(dst), 0o755); err != nil {
			return err
		}
		if err := r.MkdirAll(path.Dir(tmp), 0o755); err != nil {
			return err
		}
		var err error
		f, err = r.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &localWriter{File: f, l: l, name: name, tmp: tmp, dst: dst}, nil
}

type localWriter struct {
	*os.File
	l        *local
	name     string // as given to Create
	tmp, dst string // names under the user's folder
	done     bool
}

func (w *localWriter) Commit() error {
	if w.done {
		return errors.New("store: commit of a file already committed or aborted")
	}
	w.done = true
	err := errors.Join(w.Chmod(FileMode()), w.Sync(), w.Close())
	return w.l.do(w.name, false, func(r *os.Root, _ string) error {
		if err == nil {
			err = r.Rename(w.tmp, w.dst)
		}
		if err == nil {
			err = syncDirIn(r, path.Dir(w.dst))
		}
		if err != nil {
			_ = r.Remove(w.tmp) // the temporary file; err says why
		}
		return err
	})
}

func (w *localWriter) Abort() error {
	if w.done {
		return nil
	}
	w.done = true
	_ = w.Close() // what was written is discarded
	return w.l.do(w.name, false, func(r *os.Root, _ string) error { return r.Remove(w.tmp) })
}

// syncDirIn syncs the folder dir of r.
func syncDirIn(r *os.Root, dir string) error {
	d, err := r.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return syncDirFile(d)
}

func syncDirFile(d *os.File) error {
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) {
		return err
	}
	return nil
}

// SyncDir syncs the folder dir, so that a rename or removal in it lasts
// (a file system that cannot sync folders is not an error).
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return syncDirFile(d)
}

// Remove removes the file name (a link is removed, not followed) and
// syncs its folder, so the removal lasts.
func (l *local) Remove(_ context.Context, name string) error {
	return l.do(name, false, func(r *os.Root, n string) error {
		if err := r.Remove(n); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		return syncDirIn(r, path.Dir(n))
	})
}

func (l *local) RemoveAll(_ context.Context, name string) error {
	err := l.do(name, false, func(r *os.Root, n string) error { return r.RemoveAll(n) })
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// ErrLinked is wrapped by the error of a file this tool owns (a lock, a
// state) found to be a symbolic link, or to have other names (hard links):
// writing it would write another file, or leave its other names behind.
var ErrLinked = errors.New("is a link: refused (this tool never writes through a link)")

// openNoFollow opens the file name of r's tree without following a link
// at its last component (the folders above it are resolved inside r), and
// refuses anything but a regular file with one name.
func openNoFollow(r *os.Root, name string, flag int, perm uint32) (*os.File, error) {
	dir, base := path.Split(name)
	d, err := r.Open(path.Clean("./" + dir))
	if err != nil {
		return nil, err
	}
	defer d.Close()
	var fd int
	for {
		fd, err = unix.Openat(int(d.Fd()), base, flag|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, perm)
		if err != unix.EINTR {
			break
		}
	}
	runtime.KeepAlive(d)
	if err == unix.ELOOP {
		return nil, &fs.PathError{Op: "open", Path: name, Err: ErrLinked}
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	f := os.NewFile(uintptr(fd), name)
	if err := checkOwned(f, name); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// checkOwned refuses a file that is not regular or has more than one name.
func checkOwned(f *os.File, name string) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return &fs.PathError{Op: "open", Path: name, Err: fmt.Errorf("%s, not a regular file: refused", KindOf(st.Mode()))}
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && sys.Nlink > 1 {
		return &fs.PathError{Op: "open", Path: name, Err: fmt.Errorf("has %d names (hard links): %w", sys.Nlink, ErrLinked)}
	}
	return nil
}

// Lock takes an flock on the file name, which holds the holder's PID; the
// kernel releases it when the process dies. The lock file is opened
// without following a link, and must be a regular file of one name.
func (l *local) Lock(_ context.Context, name string) (Lock, error) {
	var f *os.File
	err := l.do(name, true, func(r *os.Root, n string) error {
		if err := r.MkdirAll(path.Dir(n), 0o755); err != nil {
			return err
		}
		var err error
		f, err = openNoFollow(r, n, os.O_RDWR|os.O_CREATE, 0o666)
		return err
	})
	if err != nil {
		return nil, err
	}
	p := l.path(name)
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			h, _ := l.Holder(context.Background(), name)
			return nil, &LockedError{Where: p, Holder: h}
		}
		return nil, &Error{Where: p, Op: "lock", Err: err}
	}
	// Taken: the file is checked again, for a link made to it meanwhile.
	if err := checkOwned(f, p); err != nil {
		f.Close()
		return nil, err
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

// Unlock releases the flock before closing the file. Closing alone is not
// enough: the flock belongs to the open file, and a child this process is
// forking at that moment holds a copy of it until its exec closes it, so
// for that while a new Lock, in this process or another, would be refused.
func (k *localLock) Unlock() error {
	if k.f == nil {
		return nil
	}
	err := syscall.Flock(int(k.f.Fd()), syscall.LOCK_UN)
	if err != nil {
		err = &Error{Where: k.f.Name(), Op: "unlock", Err: err}
	}
	err = errors.Join(err, k.f.Close())
	k.f = nil
	return err
}

// Holder reads the PID in a held lock file.
func (l *local) Holder(_ context.Context, name string) (Holder, bool) {
	var f *os.File
	if l.do(name, false, func(r *os.Root, n string) error {
		var err error
		f, err = openNoFollow(r, n, os.O_RDONLY, 0)
		return err
	}) != nil {
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
// temporary file beside it (a random name, O_EXCL), synced, renamed into
// place and its folder synced, so that a reader (or a crash) sees the old
// file or the new one, never a part. A link at path is replaced, never
// written through.
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

// OpenOwned opens the local file path for reading without following a
// link at its last component, and refuses anything but a regular file of
// one name: for a file this tool owns and rewrites (a state), which two
// names would split.
func OpenOwned(path string) (*os.File, error) {
	r, err := os.OpenRoot(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	defer r.Close()
	f, err := openNoFollow(r, filepath.Base(path), os.O_RDONLY, 0)
	var pe *fs.PathError
	if errors.As(err, &pe) {
		pe.Path = path
	}
	return f, err
}

// OpenRegular opens the local file path, a file the user named, for
// reading: a link there is followed (the name is the user's word), and
// anything but a regular file (a FIFO, a device, a socket, a folder) is a
// *NotRegularError, found without waiting for a FIFO's writer.
func OpenRegular(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	return Regular(f, path, false)
}

// ReadRegular reads the whole local file path, a file the user named, as
// OpenRegular opens it.
func ReadRegular(path string) ([]byte, error) {
	f, err := OpenRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// Inside tells whether the local Store s is the folder of dir or under it,
// links resolved (a folder reached by two names is one folder); false when
// either is not on disk.
func Inside(s, dir Store) bool {
	a, ok1 := LocalDir(s)
	b, ok2 := LocalDir(dir)
	if !ok1 || !ok2 {
		return false
	}
	ra, rb := resolved(a), resolved(b)
	rel, err := filepath.Rel(rb, ra)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// resolved is the absolute path p with its links resolved, as far as it
// exists (a folder not made yet is resolved by its nearest parent).
func resolved(p string) string {
	p, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	var rest []string
	for {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Join(append([]string{r}, rest...)...)
		}
		parent := filepath.Dir(p)
		if parent == p {
			return filepath.Join(append([]string{p}, rest...)...)
		}
		rest = append([]string{filepath.Base(p)}, rest...)
		p = parent
	}
}
