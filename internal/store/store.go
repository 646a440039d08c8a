// Package store is the one filesystem interface of backfill: a folder
// tree that is either a local folder or an S3 prefix (s3://bucket/prefix).
// Everything that reads inputs or writes outputs goes through a Store, so
// the same code paths serve both.
//
// Names inside a Store are slash-separated and relative to its root, as in
// io/fs ("." is the root). Reading is io/fs: a Store is an fs.FS,
// fs.ReadDirFS and fs.StatFS, its files are io.ReaderAt too (Parquet
// footers), and on S3 a file's FileInfo.Sys() is the object's *Object
// (size and ETag, which a fingerprint should use instead of the
// modification time).
//
// Writing is whole files: Create returns a Writer whose Commit makes the
// file visible at once and whole (a rename into place on disk, one PUT or
// a completed multipart upload on S3), so a reader sees the old version
// or the new one, never a part.
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
	"strings"
	"sync"
	"time"
)

// Store is a folder tree: a local folder or an S3 prefix. Every call
// that does I/O takes a context; a file opened with one reads under it.
type Store interface {
	// Open opens the file name for reading; the file is an io.ReaderAt
	// too.
	Open(ctx context.Context, name string) (fs.File, error)
	// ReadDir lists the folder name, sorted by name.
	ReadDir(ctx context.Context, name string) ([]fs.DirEntry, error)
	// Stat describes the file or folder name.
	Stat(ctx context.Context, name string) (fs.FileInfo, error)
	// Create starts writing name (its parent folders are made as needed).
	// Nothing is visible until Commit.
	Create(ctx context.Context, name string) (Writer, error)
	// Remove removes the file name; removing one that is not there is
	// not an error.
	Remove(ctx context.Context, name string) error
	// RemoveAll removes the folder name and everything under it.
	RemoveAll(ctx context.Context, name string) error
	// MkdirAll makes the folder name where folders exist on their own (on
	// disk); on S3 a folder is there as soon as a key is under it.
	MkdirAll(ctx context.Context, name string) error
	// Lock takes the lock name for this process: a second holder gets a
	// *LockedError at once. The lock is released by Unlock, or when the
	// process dies (on S3, the next taker sees that it died, or that it
	// stopped renewing the lock).
	Lock(ctx context.Context, name string) (Lock, error)
	// Holder tells who holds the lock name, if anyone does.
	Holder(ctx context.Context, name string) (Holder, bool)
	// Sub returns the Store rooted at the folder name of this one.
	Sub(name string) Store
	// Parent returns the Store of the folder that holds this one's root,
	// and the root's name in it.
	Parent() (Store, string)
	// Where is how name is shown to a person: a local path or an s3:// URL.
	Where(name string) string
}

// NameLister is a Store that lists a folder's names for less than
// ReadDir costs (a local folder: ReadDir under an os.Root stats every
// entry). On S3 a listing names and describes each object at once.
type NameLister interface {
	ReadDirNames(ctx context.Context, name string) ([]string, error)
}

// Writer is a file being written.
type Writer interface {
	io.Writer
	// Commit makes the file visible whole, replacing any earlier one.
	Commit() error
	// Abort discards what was written; after Commit it does nothing.
	Abort() error
}

// Lock is a held lock.
type Lock interface {
	Unlock() error
	// Held confirms that the lock is still this process's, and returns an
	// error wrapping ErrLockLost once it is not: an S3 lock object that
	// another run took over while this one was stopped, frozen or cut off
	// is found out here, not at the next renewal. A writer calls it before
	// each commit. On S3 it renews the lock object (one conditional PUT).
	Held(ctx context.Context) error
}

// LockWithin takes the lock name of st, waiting up to wait for another
// holder to release it (a *LockedError past it; at once when wait is 0).
// waiting, if not nil, is told of the holder once, when the wait begins.
func LockWithin(ctx context.Context, st Store, name string, wait time.Duration, waiting func(*LockedError)) (Lock, error) {
	deadline := time.Now().Add(wait)
	told := false
	for {
		lock, err := st.Lock(ctx, name)
		var le *LockedError
		if !errors.As(err, &le) || !time.Now().Before(deadline) {
			return lock, err
		}
		if !told && waiting != nil {
			waiting(le)
		}
		told = true
		t := time.NewTimer(min(200*time.Millisecond, time.Until(deadline)))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

// ErrLockLost is wrapped by the error of Held when another run has taken
// the lock over.
var ErrLockLost = errors.New("the lock was taken over by another run")

// Holder says who holds a lock.
type Holder struct {
	PID  int    `json:"pid"`
	Host string `json:"host,omitempty"`
	// ID is unique to the holding process's start (random). A container
	// restarted, or a pod replaced, gets the same host name and often the
	// same PID (1): the ID is what tells the new process from the old one.
	ID string `json:"id,omitempty"`
}

var self = sync.OnceValue(func() Holder {
	host, _ := os.Hostname()
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return Holder{PID: os.Getpid(), Host: host, ID: hex.EncodeToString(b[:])}
})

// Self is this process as a lock holder.
func Self() Holder { return self() }

// LockedError is returned by Lock when another process holds the lock.
// Its owner words it for the person who meets it: the holder (Who, "another
// run" when empty), what it does to Where (Verb, "holds" when empty), and
// what to do (Advice, none when empty).
type LockedError struct {
	Where  string
	Holder Holder // zero when the holder is not known yet
	Who    string
	Verb   string
	Advice string
}

func (e *LockedError) Error() string {
	who := e.Who
	if who == "" {
		who = "another run"
	}
	switch {
	case e.Holder.PID > 0 && e.Holder.Host != "":
		who = fmt.Sprintf("%s (pid %d on %s)", who, e.Holder.PID, e.Holder.Host)
	case e.Holder.PID > 0:
		who = fmt.Sprintf("%s (pid %d)", who, e.Holder.PID)
	}
	verb := e.Verb
	if verb == "" {
		verb = "holds"
	}
	msg := fmt.Sprintf("%s %s %s", who, verb, e.Where)
	if e.Advice != "" {
		msg += "; " + e.Advice
	}
	return msg
}

// Object is what an S3 file's FileInfo.Sys() returns.
type Object struct {
	Key  string
	Size int64
	ETag string // as S3 gives it, quotes included
}

// ETag returns the ETag of an S3 file's info, "" for a local one.
func ETag(info fs.FileInfo) string {
	if o, ok := info.Sys().(*Object); ok {
		return o.ETag
	}
	return ""
}

// Stamp is what a listing says of a file that changes whenever the file
// is written again, or replaced: on S3 its size and ETag (a digest of its
// bytes), on disk its size, modification time, inode and change time (a
// copy made with its times kept, cp -p, rsync -t or touch -r, gets a new
// inode or change time: no one can set a change time back), as git's
// index keeps them.
func Stamp(info fs.FileInfo) string {
	if etag := ETag(info); etag != "" {
		return fmt.Sprintf("%d %s", info.Size(), etag)
	}
	return fmt.Sprintf("%d %d %s", info.Size(), info.ModTime().UnixNano(), inodeStamp(info))
}

// IsRemote tells whether loc is an object-storage location (s3://…).
func IsRemote(loc string) bool { return strings.HasPrefix(loc, "s3://") }

// Join joins a location and a slash-separated name: filepath.Join for a
// local folder, a slash for s3://.
func Join(loc string, elem ...string) string {
	if !IsRemote(loc) {
		return filepath.Join(append([]string{loc}, elem...)...)
	}
	bucket, prefix, _ := SplitS3(loc)
	return "s3://" + bucket + "/" + strings.TrimPrefix(path.Join(append([]string{prefix}, elem...)...), "/")
}

// Split splits a location into its parent location and its last element:
// filepath.Dir and Base for a local folder.
func Split(loc string) (parent, base string) {
	if !IsRemote(loc) {
		c := filepath.Clean(loc)
		return filepath.Dir(c), filepath.Base(c)
	}
	bucket, prefix, _ := SplitS3(loc)
	if prefix == "" {
		return "s3://" + bucket, ""
	}
	dir, base := path.Split(prefix)
	return "s3://" + bucket + "/" + strings.TrimSuffix(dir, "/"), base
}

// SplitS3 splits an s3:// location into its bucket and prefix (no
// leading or trailing slash).
func SplitS3(loc string) (bucket, prefix string, err error) {
	rest := strings.TrimPrefix(loc, "s3://")
	bucket, prefix, _ = strings.Cut(rest, "/")
	prefix = strings.Trim(path.Clean("/"+prefix), "/")
	if bucket == "" {
		return "", "", fmt.Errorf("%s: no bucket name (s3://bucket/prefix)", loc)
	}
	return bucket, prefix, nil
}

// Error is a failure of the store itself (a request that failed after its
// retries, an object that changed while it was read), as opposed to bad
// data: a reader stops on it rather than record the input as damaged.
type Error struct {
	Where string
	Op    string
	Err   error
}

func (e *Error) Error() string { return fmt.Sprintf("%s %s: %v", e.Op, e.Where, e.Err) }
func (e *Error) Unwrap() error { return e.Err }

// Failed tells whether err is (or wraps) an *Error.
func Failed(err error) bool {
	var se *Error
	return errors.As(err, &se)
}

// ErrChanged is what an *Error wraps when an object changed (or went) after
// it was listed: mixing two versions of an input is never silent.
var ErrChanged = errors.New("the object changed since it was listed")

// ReadFile reads the whole file name.
func ReadFile(ctx context.Context, s Store, name string) ([]byte, error) {
	f, err := s.Open(ctx, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// WriteFile writes name whole.
func WriteFile(ctx context.Context, s Store, name string, data []byte) error {
	w, err := s.Create(ctx, name)
	if err != nil {
		return err
	}
	if _, err := w.Write(data); err != nil {
		w.Abort()
		return err
	}
	return w.Commit()
}

// IsDir tells whether name is a folder of s.
func IsDir(ctx context.Context, s Store, name string) bool {
	st, err := s.Stat(ctx, name)
	return err == nil && st.IsDir()
}

// Upload copies every file under the local folder dir into dst, at the
// same names.
func Upload(ctx context.Context, dst Store, dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		w, err := dst.Create(ctx, filepath.ToSlash(rel))
		if err != nil {
			return err
		}
		if _, err := io.Copy(w, f); err != nil {
			w.Abort()
			return err
		}
		return w.Commit()
	})
}

// FS returns s as an io/fs file system whose calls run under ctx, for
// fs.WalkDir and the other helpers of io/fs.
func FS(ctx context.Context, s Store) fs.FS { return ctxFS{ctx, s} }

type ctxFS struct {
	ctx context.Context
	s   Store
}

func (c ctxFS) Open(name string) (fs.File, error)          { return c.s.Open(c.ctx, name) }
func (c ctxFS) ReadDir(name string) ([]fs.DirEntry, error) { return c.s.ReadDir(c.ctx, name) }
func (c ctxFS) Stat(name string) (fs.FileInfo, error)      { return c.s.Stat(c.ctx, name) }

// Identity is how outputs record their input: an s3:// URL as it is, a
// local path absolute with its links resolved, so that two spellings of
// one folder are one input and a link repointed at another folder is not
// the folder it used to name.
func Identity(p string) string {
	if IsRemote(p) {
		return p
	}
	return resolved(p)
}

// Abs is the absolute form of a location p, as outputs record their input
// and messages name them; an s3:// URL is as it is.
func Abs(p string) string {
	if IsRemote(p) {
		return p
	}
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}
