// Package dla keeps a Cumulus Dead Letter Archive in a folder or under an
// s3:// prefix, laid out as Cumulus v21 lays it out in its system bucket:
//
//	<root>/dead-letter-archive/sqs/<YYYY-MM-DD>/<executionName>-<uuid>
//	<root>/dead-letter-archive/failed-sqs/<YYYY-MM-DD>/<name>
//
// Records appear whole or not at all (on disk written aside, synced, then
// renamed; on S3 one PUT), so a reader, or a recovery killed at any
// moment, never sees half of one.
package dla

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"time"

	"github.com/backfill-dev/backfill/cumulus/message"
	"github.com/backfill-dev/backfill/internal/store"
)

// Archive is a Dead Letter Archive under a root folder.
type Archive struct {
	root store.Store
	st   store.Store // root/dead-letter-archive (on disk, records are written aside in its .tmp/)
	now  func() time.Time
}

// New returns the archive under root, a local folder (created on the
// first Put) or an s3:// prefix.
func New(root store.Store) *Archive {
	return &Archive{root: root, st: root.Sub("dead-letter-archive"), now: time.Now}
}

// Root is where the archive is: a folder or an s3:// URL.
func (a *Archive) Root() string { return a.root.Where(".") }

const (
	sqsDir    = "sqs"
	failedDir = "failed-sqs"
)

// Put stores a record under sqs/ and returns its key (the path under
// sqs/, with '/').
func (a *Archive) Put(ctx context.Context, record []byte) (string, error) {
	key := message.Key(record, uuid4(), a.now())
	if err := a.write(ctx, sqsDir+"/"+key, record); err != nil {
		return "", err
	}
	return key, nil
}

// write writes data at name whole.
func (a *Archive) write(ctx context.Context, name string, data []byte) error {
	if err := store.WriteFile(ctx, a.st, name, data); err != nil {
		return fmt.Errorf("dead letter archive: %w", err)
	}
	return nil
}

// List calls fn with the key of every record under sqs/ (or, with
// failed, under failed-sqs/), date folders in order and names in order
// within each. A folder is read when its turn comes, so records added
// meanwhile to a later date are seen.
//
// Every name counts, hidden ones too (a record's name comes from its
// message, and ".x-<uuid>" is a record like any other). What does not fit
// the layout (a file directly in sqs/, a folder inside a date folder, a
// link, a FIFO) is a stray: stray is called with its path under the
// archive's folder and what it is, it is left in place, and the listing
// goes on. A link is never followed, to a record or a folder, inside the
// archive or out of it.
func (a *Archive) List(ctx context.Context, failed bool, fn func(key string) error, stray func(name, what string) error) error {
	base := sqsDir
	if failed {
		base = failedDir
	}
	dates, err := a.st.ReadDir(ctx, base)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, d := range dates {
		if !d.IsDir() || !plain(d.Name()) {
			if err := stray(base+"/"+d.Name(), store.KindOf(d.Type())+", not a date folder"); err != nil {
				return err
			}
			continue
		}
		files, err := a.st.ReadDir(ctx, base+"/"+d.Name())
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		for _, f := range files {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if !f.Type().IsRegular() || !plain(f.Name()) {
				if err := stray(base+"/"+d.Name()+"/"+f.Name(), store.KindOf(f.Type())+", not a record"); err != nil {
					return err
				}
				continue
			}
			if err := fn(d.Name() + "/" + f.Name()); err != nil {
				return err
			}
		}
	}
	return nil
}

// MaxRecord bounds a record read back.
const MaxRecord = 256 << 20

// TooLargeError is a file of sqs/ over MaxRecord bytes: no record the
// archive writes is that large; it is passed over, not read.
type TooLargeError struct {
	Key  string
	Size int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s: %d bytes, larger than a record (%d)", e.Key, e.Size, MaxRecord)
}

// Read returns a record of sqs/; a *TooLargeError for a file over
// MaxRecord bytes.
func (a *Archive) Read(ctx context.Context, key string) ([]byte, error) {
	p, err := a.path(sqsDir, key)
	if err != nil {
		return nil, err
	}
	st, err := a.st.Stat(ctx, p)
	if err != nil {
		return nil, err
	}
	if st.Size() > MaxRecord {
		return nil, &TooLargeError{Key: key, Size: st.Size()}
	}
	return store.ReadFile(ctx, a.st, p)
}

// Delete removes a record of sqs/ (a record already gone is no error: a
// recovery killed after its delete and run again).
func (a *Archive) Delete(ctx context.Context, key string) error {
	p, err := a.path(sqsDir, key)
	if err != nil {
		return err
	}
	return a.st.Remove(ctx, p)
}

// Fail moves a record of sqs/ to failed-sqs/<date>/<name>, the date from
// the record's time (else today), as Cumulus's recovery does. The record
// is written there before it leaves sqs/, so a kill in between leaves it
// in both places, never in neither.
func (a *Archive) Fail(ctx context.Context, key string, record []byte, recordTime any) (string, error) {
	src, err := a.path(sqsDir, key)
	if err != nil {
		return "", err
	}
	dst := message.Date(recordTime, a.now()) + "/" + path.Base(src)
	if err := a.write(ctx, failedDir+"/"+dst, record); err != nil {
		return "", err
	}
	return dst, a.Delete(ctx, key)
}

// path checks a key (two plain names) and returns its name in the store.
func (a *Archive) path(dir, key string) (string, error) {
	d, f, ok := strings.Cut(key, "/")
	if !ok || !plain(d) || !plain(f) {
		return "", fmt.Errorf("not an archive key: %q", key)
	}
	return dir + "/" + d + "/" + f, nil
}

// plain tells whether s is one name of a folder: hidden names are plain.
func plain(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.ContainsAny(s, `/\`)
}

// uuid4 is a random (version 4) UUID.
func uuid4() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand never fails (Go 1.24 on)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}
