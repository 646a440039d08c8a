package stamp

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/backfill-dev/backfill/pipeline/reader"
)

// Input is what --in names, resolved: the folder of bucket folders, the
// buckets to run, and the folders under it that are not buckets.
type Input struct {
	Dir     string   // the folder of bucket folders
	Buckets []string // YYYY-MM-DD names, sorted
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

// ResolveInput resolves in: a folder of bucket folders, or a single
// bucket folder (its name a date: it is the only bucket, and its parent
// the folder of buckets). names, when not empty, restricts the buckets to
// those; each must be there. A folder with no bucket folder is an error
// that says what was looked for and, where it sees one, which folder was
// probably meant.
func ResolveInput(in string, names []string) (Input, error) {
	for _, n := range names {
		if !reader.IsBucketName(n) {
			return Input{}, &InputError{msg: fmt.Sprintf("%q is not a bucket name (YYYY-MM-DD)", n), Name: true}
		}
	}
	st, err := os.Stat(in)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return Input{}, inputErr("%s: no such folder", in)
	case err != nil:
		return Input{}, inputErr("%s: %v", in, err)
	case !st.IsDir():
		return Input{}, inputErr("%s is a file; give the folder that holds the bucket folders (YYYY-MM-DD), or one bucket folder", in)
	}
	clean := filepath.Clean(in)
	if base := filepath.Base(clean); reader.IsBucketName(base) {
		for _, n := range names {
			if n != base {
				return Input{}, inputErr("%s is the bucket folder of %s; bucket %s is not in it (give the folder above it to pick buckets)", in, base, n)
			}
		}
		return Input{Dir: filepath.Dir(clean), Buckets: []string{base}}, nil
	}
	ents, err := os.ReadDir(clean)
	if err != nil {
		return Input{}, inputErr("%s: %v", in, err)
	}
	var out Input
	out.Dir = clean
	have := map[string]bool{}
	for _, e := range ents {
		if !isDirEntry(clean, e) {
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
			in, suggest(clean, ents))
	}
	if len(names) > 0 {
		for _, n := range names {
			if !have[n] {
				return Input{}, inputErr("bucket %s: no folder %s", n, filepath.Join(clean, n))
			}
		}
		out.Buckets = append([]string(nil), names...)
	}
	sort.Strings(out.Buckets)
	out.Buckets = compactSorted(out.Buckets)
	return out, nil
}

func isDirEntry(dir string, e os.DirEntry) bool {
	if e.IsDir() {
		return true
	}
	if e.Type()&os.ModeSymlink != 0 {
		st, err := os.Stat(filepath.Join(dir, e.Name()))
		return err == nil && st.IsDir()
	}
	return false
}

// suggest names the folders under dir that hold bucket folders (the
// canned/ and autoclaved/ halves that gen --format both writes), or says
// that dir itself looks like a bucket folder with another name.
func suggest(dir string, ents []os.DirEntry) string {
	var hits []string
	lz4 := false
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".lz4") || e.Name() == reader.IndexName {
			lz4 = true
		}
		if !isDirEntry(dir, e) {
			continue
		}
		sub, err := os.ReadDir(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		for _, s := range sub {
			if reader.IsBucketName(s.Name()) && isDirEntry(filepath.Join(dir, e.Name()), s) {
				hits = append(hits, filepath.Join(dir, e.Name()))
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
