// Package granulefiles reads the files of a granule where the Cumulus
// writer finds them: the object store they live in (a local folder that
// stands for the buckets, or s3:// objects), their S3 URIs, and the CMR
// file among them, whose temporal values go into the granule's record.
package granulefiles

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"

	"github.com/backfill-dev/backfill/cumulus/cmr"
	"github.com/backfill-dev/backfill/cumulus/jsvalue"
	"github.com/backfill-dev/backfill/internal/store"
)

// Source stands for the object store the granule files live in: a CMR file
// is read from it, and a file without a size is sized from it.
type Source interface {
	// Open opens bucket/key; an error wrapping fs.ErrNotExist when there is
	// no such object.
	Open(bucket, key string) (io.ReadCloser, error)
	// Size returns the object's size.
	Size(bucket, key string) (int64, error)
}

// Dir is a local folder that stands for the buckets: DIR/<bucket>/<key>.
// A name is resolved inside the folder (os.Root): a link that leads out
// of it is refused by name, and only regular files are read.
type Dir string

// open resolves bucket/key and calls fn with the folder's root and the
// key's name in it.
func (d Dir) open(bucket, key string, fn func(r *os.Root, name string) error) error {
	if err := checkName(bucket, key); err != nil {
		return err
	}
	p := filepath.Join(string(d), bucket, key)
	rel, err := filepath.Rel(string(d), p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return fmt.Errorf("s3://%s/%s is outside the files root: %w", bucket, key, fs.ErrNotExist)
	}
	r, err := os.OpenRoot(string(d))
	if err != nil {
		return err
	}
	defer r.Close()
	if err := fn(r, filepath.ToSlash(rel)); err != nil {
		var nr *store.NotRegularError
		if errors.Is(err, fs.ErrNotExist) || errors.As(err, &nr) {
			return err
		}
		return fmt.Errorf("%s: %w", p, errors.Unwrap(err))
	}
	return nil
}

// Open opens DIR/bucket/key.
func (d Dir) Open(bucket, key string) (io.ReadCloser, error) {
	var f *os.File
	err := d.open(bucket, key, func(r *os.Root, name string) error {
		var err error
		if f, err = r.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0); err != nil {
			return err
		}
		f, err = store.Regular(f, filepath.Join(string(d), name), false)
		return err
	})
	if err != nil {
		return nil, err
	}
	return f, nil
}

// Size stats DIR/bucket/key.
func (d Dir) Size(bucket, key string) (int64, error) {
	var size int64
	err := d.open(bucket, key, func(r *os.Root, name string) error {
		st, err := r.Stat(name)
		if err != nil {
			return err
		}
		if !st.Mode().IsRegular() {
			return &fs.PathError{Op: "stat", Path: name, Err: fmt.Errorf("%s is not a file: %w", store.KindOf(st.Mode()), fs.ErrNotExist)}
		}
		size = st.Size()
		return nil
	})
	return size, err
}

// Objects stands for the buckets from object storage: Root is the store
// of "s3://" (the buckets themselves: s3://<bucket>/<key>) or of an s3://
// prefix that holds them as folders (Root/<bucket>/<key>).
type Objects struct {
	Ctx  context.Context
	Root store.Store
}

// checkName refuses an object name that a folder or a store path would
// read as another: S3 takes a key literally, so "a/../b" is not "b", and
// "a//b" not "a/b". A key with an empty, "." or ".." segment, or a bucket
// that is no bucket name, is not read (fs.ErrNotExist).
func checkName(bucket, key string) error {
	if bucket == "" || bucket == "." || bucket == ".." || strings.Contains(bucket, "/") || key == "." || !fs.ValidPath(key) {
		return fmt.Errorf("s3://%s/%s is not an object name here (an empty, \".\" or \"..\" segment, which S3 takes literally): %w", bucket, key, fs.ErrNotExist)
	}
	return nil
}

func (o Objects) open(bucket, key string) (store.Store, error) {
	if err := checkName(bucket, key); err != nil {
		return nil, err
	}
	return o.Root.Sub(bucket), nil
}

// Open opens the object bucket/key.
func (o Objects) Open(bucket, key string) (io.ReadCloser, error) {
	st, err := o.open(bucket, key)
	if err != nil {
		return nil, err
	}
	return st.Open(o.Ctx, key)
}

// Size returns the size of the object bucket/key.
func (o Objects) Size(bucket, key string) (int64, error) {
	st, err := o.open(bucket, key)
	if err != nil {
		return 0, err
	}
	info, err := st.Stat(o.Ctx, key)
	if err != nil {
		return 0, err
	}
	if info.IsDir() {
		return 0, fmt.Errorf("%s is a folder, not an object: %w", st.Where(key), fs.ErrNotExist)
	}
	return info.Size(), nil
}

var s3URI = regexp.MustCompile(`^s3://([^/]+)/(.*)$`)

// ParseS3URI is Cumulus's parseS3Uri.
func ParseS3URI(uri string) (bucket, key string, err error) {
	m := s3URI.FindStringSubmatch(uri)
	if m == nil {
		return "", "", fmt.Errorf("TypeError: Unable to parse S3 URI: %s", uri)
	}
	return m[1], m[2], nil
}

// BuildS3URI is Cumulus's buildS3Uri: leading slashes of the key go.
func BuildS3URI(bucket, key string) string {
	return "s3://" + bucket + "/" + strings.TrimLeft(key, "/")
}

// CMRLocation picks a granule's CMR file as Cumulus does: the first file
// whose key, name or filename (the first of them that is truthy) ends like
// a CMR file, located by filename, or bucket with filepath or key. Any
// CMR file of the list whose location cannot be told means no CMR file at
// all, as in Cumulus (the whole lookup fails and is ignored). ok is false
// when there is none.
func CMRLocation(granule map[string]any) (bucket, key string, f cmr.Format, ok bool) {
	files, present := granule["files"]
	if !present {
		files = []any{}
	}
	list, isList := files.([]any)
	if !isList {
		return "", "", "", false
	}
	var first string
	found := false
	for _, e := range list {
		file, isObj := e.(map[string]any)
		if !isObj {
			return "", "", "", false // reading a property of null throws
		}
		name := file["key"]
		if !jsvalue.Truthy(name) {
			name = file["name"]
		}
		if !jsvalue.Truthy(name) {
			name = file["filename"]
		}
		if !jsvalue.Truthy(name) {
			name = ""
		}
		s, isStr := name.(string)
		if !isStr {
			return "", "", "", false // endsWith of a non-string throws
		}
		if _, isCMR := cmr.FormatOf(s); !isCMR {
			continue
		}
		url, err := S3URLOfFile(file)
		if err != nil {
			return "", "", "", false
		}
		b, k, err := ParseS3URI(url)
		if err != nil {
			return "", "", "", false
		}
		if !found {
			first, found = BuildS3URI(b, k), true
		}
	}
	if !found {
		return "", "", "", false
	}
	b, k, err := ParseS3URI(first)
	if err != nil {
		return "", "", "", false
	}
	format, known := cmr.FormatOf(first)
	if !known {
		return "", "", "", false
	}
	return b, k, format, true
}

// S3URLOfFile is Cumulus's getS3UrlOfFile.
func S3URLOfFile(file map[string]any) (string, error) {
	if jsvalue.Truthy(file["filename"]) {
		return fmt.Sprint(file["filename"]), nil
	}
	if jsvalue.Truthy(file["bucket"]) && jsvalue.Truthy(file["filepath"]) {
		return BuildS3URI(jsvalue.String(file["bucket"], true), jsvalue.String(file["filepath"], true)), nil
	}
	if jsvalue.Truthy(file["bucket"]) && jsvalue.Truthy(file["key"]) {
		return BuildS3URI(jsvalue.String(file["bucket"], true), jsvalue.String(file["key"], true)), nil
	}
	return "", errors.New("unable to determine location of file")
}

// Temporal reads the granule's CMR temporal values: (nil, nil) when the
// granule has no CMR file, or its file is not in files (Cumulus logs a
// warning and uses the payload granule's own values), else the four values
// normalised, or the error that fails the granule.
func Temporal(files Source, granule map[string]any, warn func(string)) (*cmr.Dates, error) {
	bucket, key, format, ok := CMRLocation(granule)
	if !ok {
		return nil, nil
	}
	if files == nil {
		warn(fmt.Sprintf("CMR file s3://%s/%s: no files root to read it from; the granule's own dates are used", bucket, key))
		return nil, nil
	}
	r, err := files.Open(bucket, key)
	if errors.Is(err, fs.ErrNotExist) {
		warn(fmt.Sprintf("CMR file s3://%s/%s does not exist; the granule's own dates are used", bucket, key))
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("CMR file s3://%s/%s: %w", bucket, key, err)
	}
	defer r.Close()
	t, err := cmr.Read(r, format, 0)
	if err != nil {
		return nil, fmt.Errorf("CMR file s3://%s/%s: %w", bucket, key, err)
	}
	d, err := t.Normalize()
	if err != nil {
		return nil, fmt.Errorf("RangeError: CMR file s3://%s/%s: %w", bucket, key, err)
	}
	return &d, nil
}
