package ingest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/pipeline/deadletter"
	"github.com/backfill-dev/backfill/pipeline/reader"
)

// Input is what --in names, resolved: the folder of bucket folders, the
// buckets to run, and the folders under it that are not buckets.
type Input struct {
	Dir     store.Store // the folder of bucket folders (a local folder or an s3:// prefix)
	Buckets []string    // YYYY-MM-DD names, sorted
	// Ignored are the sub-folders of Dir whose names are not bucket dates
	// and that hold no bucket file: they are skipped, with a notice each.
	Ignored []string
	// Misnamed are the sub-folders of Dir that hold bucket files but whose
	// names are not bucket dates (2016-3-1, 2016-03-01.bak): they are not
	// read, and each is a reject.
	Misnamed []Misnamed
}

// Misnamed is a folder beside the buckets that holds bucket files (*.lz4,
// index.json.gz) under a name that is not a bucket date.
type Misnamed struct {
	Name  string
	Files []string // its bucket files, sorted
}

// Records returns the dead-letter records of the folders under the input
// that are not read: a reject for each misnamed folder, which names all
// its bucket files, and a notice for each other folder.
func (in Input) Records() []deadletter.Record {
	var out []deadletter.Record
	for _, m := range in.Misnamed {
		msg := m.Say(in.Dir) + "; its files: " + strings.Join(m.Files, ", ")
		out = append(out, deadletter.Record{File: m.Name, Reason: deadletter.MisnamedBucket, Kind: deadletter.Reject, Message: msg})
	}
	for _, name := range in.Ignored {
		out = append(out, deadletter.Record{File: name, Reason: deadletter.NotABucket, Kind: deadletter.Notice,
			Message: fmt.Sprintf("folder %s is not a bucket folder (its name is not a date YYYY-MM-DD) and holds no bucket file; skipped", in.Dir.Where(name))})
	}
	return out
}

// Say says in one line what is wrong with the folder m of dir, and what
// to do.
func (m Misnamed) Say(dir store.Store) string {
	msg := fmt.Sprintf("folder %s holds %d bucket %s but its name is not a bucket date (YYYY-MM-DD, a day that exists); not read",
		dir.Where(m.Name), len(m.Files), plural(len(m.Files), "file", "files"))
	if d, ok := bucketDateIn(m.Name); ok {
		msg += " (rename it " + d + " to read it)"
	}
	return msg
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

var looseDate = regexp.MustCompile(`^(\d{4})-(\d{1,2})-(\d{1,2})`)

// bucketDateIn returns the bucket date a misnamed folder's name probably
// means: 2017-6-3 and 2017-06-03.bak both mean 2017-06-03.
func bucketDateIn(name string) (string, bool) {
	m := looseDate.FindStringSubmatch(name)
	if m == nil {
		return "", false
	}
	d, err := time.Parse("2006-1-2", m[1]+"-"+m[2]+"-"+m[3])
	if err != nil {
		return "", false
	}
	// A name that would be the same, or still no bucket's (0000-01-01),
	// is no hint.
	if s := d.Format("2006-01-02"); s != name && reader.IsBucketName(s) {
		return s, true
	}
	return "", false
}

// bucketFiles lists the bucket files directly in folder dir of fsys.
func bucketFiles(ctx context.Context, fsys store.Store, dir string) []string {
	ents, err := fsys.ReadDir(ctx, dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		if !e.IsDir() && isBucketFile(e.Name()) {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}

func isBucketFile(name string) bool {
	return strings.HasSuffix(name, ".lz4") || name == reader.IndexName
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
	if err != nil {
		return Input{}, folderErr(in, err)
	}
	if !st.IsDir() {
		return Input{}, inputErr("%s is a file; give the folder that holds the bucket folders (YYYY-MM-DD), or one bucket folder", in)
	}
	if parent, base := fsys.Parent(); reader.IsBucketName(base) {
		for _, n := range names {
			if n != base {
				return Input{}, inputErr("%s is the bucket folder of %s; bucket %s is not in it (give the folder above it to pick buckets)", in, base, n)
			}
		}
		if _, err := fsys.ReadDir(ctx, "."); store.Failed(err) {
			return Input{}, err
		} else if err != nil {
			return Input{}, inputErr("%s: %v", in, err)
		}
		return Input{Dir: parent, Buckets: []string{base}}, nil
	}
	ents, err := fsys.ReadDir(ctx, ".")
	if err != nil {
		return Input{}, folderErr(in, err)
	}
	var out Input
	out.Dir = fsys
	have := map[string]bool{}
	for _, e := range ents {
		if !isDirEntry(ctx, fsys, ".", e) {
			if reader.IsBucketName(e.Name()) && (len(names) == 0 || slices.Contains(names, e.Name())) {
				// Named as a bucket, and not a folder this run can read:
				// said, never skipped in silence.
				return Input{}, inputErr("%s: bucket %s is %s: refused (a link inside --in is followed only to a folder inside it)", in, e.Name(), entryKind(ctx, fsys, e))
			}
			continue
		}
		if reader.IsBucketName(e.Name()) {
			out.Buckets = append(out.Buckets, e.Name())
			have[e.Name()] = true
		} else if strings.HasPrefix(e.Name(), ".") {
			continue
		} else if files := bucketFiles(ctx, fsys, e.Name()); len(files) > 0 {
			out.Misnamed = append(out.Misnamed, Misnamed{Name: e.Name(), Files: files})
		} else {
			out.Ignored = append(out.Ignored, e.Name())
		}
	}
	if len(out.Buckets) == 0 {
		hint := suggest(ctx, fsys, ents)
		if len(out.Misnamed) > 0 {
			hint = "; " + out.Misnamed[0].Say(fsys)
		}
		return Input{}, inputErr("%s holds no bucket folder (a folder named YYYY-MM-DD holding *.lz4 files and index.json.gz)%s",
			in, hint)
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

// folderErr is the error of the input folder in when reading it failed
// with err: a usage error, or, when the store failed (network,
// permissions), err itself.
func folderErr(in string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return inputErr("%s: no such folder", in)
	case store.Failed(err):
		return err
	default:
		return inputErr("%s: %v", in, err)
	}
}

// entryKind says what a folder entry that is not a folder is.
func entryKind(ctx context.Context, fsys store.Store, e fs.DirEntry) string {
	if e.Type()&fs.ModeSymlink != 0 {
		if _, err := fsys.Stat(ctx, e.Name()); err != nil {
			return "a symbolic link that leads out of the folder, or nowhere"
		}
		return "a symbolic link to something that is not a folder"
	}
	return store.KindOf(e.Type())
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
		if isBucketFile(e.Name()) {
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
