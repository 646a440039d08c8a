package stamp

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/pipeline/reader"
)

// Input is what --in names, resolved: the folder of bucket folders, the
// buckets to run, and the folders under it that are not buckets.
type Input struct {
	Dir     store.Store // the folder of bucket folders (a local folder or an s3:// prefix)
	Buckets []string    // YYYY-MM-DD names, sorted
	// Ignored are the sub-folders of Dir whose names are not bucket dates
	// (2016-3-1, 2016-03-01.bak): they are skipped, with a notice each.
	Ignored []string
}

// InputError is the error of ResolveInput: the folder given is not one a
// run can read (a usage error, found before anything is written). Its
// message starts with the folder, but for a bad bucket name.
type InputError struct {
	msg  string
	Name bool // a bad bucket name, not a bad folder
}

func (e *InputError) Error() string { return e.msg }

func inputErr(format string, args ...any) error {
	return &InputError{msg: fmt.Sprintf(format, args...)}
}

// ResolveInput resolves fsys, what --in names: a folder (or s3:// prefix) of bucket folders,
// or a single bucket folder (its name a date: it is the only bucket, and
// its parent the folder of buckets). names, when not empty, restricts the
// buckets to those; each must be there. A folder with no bucket folder is
// an error that says what was looked for and, where it sees one, which
// folder was probably meant.
func ResolveInput(ctx context.Context, fsys store.Store, names []string) (Input, error) {
	in := fsys.Where(".")
	for _, n := range names {
		if !reader.IsBucketName(n) {
			return Input{}, &InputError{msg: fmt.Sprintf("%q is not a bucket name (YYYY-MM-DD)", n), Name: true}
		}
	}
	st, err := fsys.Stat(ctx, ".")
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return Input{}, inputErr("%s: no such folder", in)
	case err != nil:
		return Input{}, inputErr("%s: %v", in, err)
	case !st.IsDir():
		return Input{}, inputErr("%s is a file; give the folder that holds the bucket folders (YYYY-MM-DD), or one bucket folder", in)
	}
	if parent, base := fsys.Parent(); reader.IsBucketName(base) {
		for _, n := range names {
			if n != base {
				return Input{}, inputErr("%s is the bucket folder of %s; bucket %s is not in it (give the folder above it to pick buckets)", in, base, n)
			}
		}
		if _, err := fsys.ReadDir(ctx, "."); err != nil {
			return Input{}, inputErr("%s: %v", in, err)
		}
		return Input{Dir: parent, Buckets: []string{base}}, nil
	}
	ents, err := fsys.ReadDir(ctx, ".")
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return Input{}, inputErr("%s: no such folder", in)
	case err != nil:
		return Input{}, inputErr("%s: %v", in, err)
	}
	var out Input
	out.Dir = fsys
	have := map[string]bool{}
	for _, e := range ents {
		if !isDirEntry(ctx, fsys, ".", e) {
			continue
		}
		if reader.IsBucketName(e.Name()) {
			out.Buckets = append(out.Buckets, e.Name())
			have[e.Name()] = true
		} else if !strings.HasPrefix(e.Name(), ".") {
			out.Ignored = append(out.Ignored, e.Name())
		}
	}
	if len(out.Buckets) == 0 {
		return Input{}, inputErr("%s holds no bucket folder (a folder named YYYY-MM-DD holding *.lz4 files and index.json.gz)%s",
			in, suggest(ctx, fsys, ents))
	}
	if len(names) > 0 {
		for _, n := range names {
			if !have[n] {
				return Input{}, inputErr("bucket %s: no folder %s", n, fsys.Where(n))
			}
		}
		out.Buckets = append([]string(nil), names...)
	}
	sort.Strings(out.Buckets)
	out.Buckets = compactSorted(out.Buckets)
	return out, nil
}

func isDirEntry(ctx context.Context, fsys store.Store, dir string, e fs.DirEntry) bool {
	if e.IsDir() {
		return true
	}
	if e.Type()&fs.ModeSymlink != 0 {
		st, err := fsys.Stat(ctx, path.Join(dir, e.Name()))
		return err == nil && st.IsDir()
	}
	return false
}

// suggest names the folders under the root of fsys that hold bucket
// folders (the canned/ and autoclaved/ halves that gen --format both
// writes), or says that it looks like a bucket folder with another name.
func suggest(ctx context.Context, fsys store.Store, ents []fs.DirEntry) string {
	var hits []string
	lz4 := false
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".lz4") || e.Name() == reader.IndexName {
			lz4 = true
		}
		if !isDirEntry(ctx, fsys, ".", e) {
			continue
		}
		sub, err := fsys.ReadDir(ctx, e.Name())
		if err != nil {
			continue
		}
		for _, s := range sub {
			if reader.IsBucketName(s.Name()) && isDirEntry(ctx, fsys, e.Name(), s) {
				hits = append(hits, fsys.Where(e.Name()))
				break
			}
		}
	}
	switch {
	case len(hits) > 0:
		return "; did you mean " + strings.Join(hits, " or ") + "?"
	case lz4:
		return "; it holds bucket files itself: name it by its date (YYYY-MM-DD), or move it into a folder of that name"
	}
	return ""
}

func compactSorted(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}
