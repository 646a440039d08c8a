package granulefiles

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/backfill-dev/backfill/internal/testutil"
)

// A files root as a hostile hand lays it: a CMR file that is a FIFO, a
// link out of the root, a link inside it. The FIFO and the link out are
// refused by name at once; the link inside is read; a name with ../ is
// outside the root, as before.
func TestDir_LinksAndFIFOs(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	testutil.Check(t, os.MkdirAll(filepath.Join(root, "bucket"), 0o755))
	testutil.Check(t, os.WriteFile(filepath.Join(root, "bucket", "real.cmr.xml"), []byte("<x/>"), 0o644))
	testutil.Check(t, os.WriteFile(filepath.Join(outside, "secret.cmr.xml"), []byte("<secret/>"), 0o600))
	testutil.Check(t, syscall.Mkfifo(filepath.Join(root, "bucket", "fifo.cmr.xml"), 0o644))
	testutil.Check(t, os.Symlink(filepath.Join(outside, "secret.cmr.xml"), filepath.Join(root, "bucket", "out.cmr.xml")))
	testutil.Check(t, os.Symlink("real.cmr.xml", filepath.Join(root, "bucket", "in.cmr.xml")))
	d := Dir(root)

	for _, key := range []string{"fifo.cmr.xml", "out.cmr.xml"} {
		f, err := d.Open("bucket", key)
		if err == nil {
			f.Close()
			t.Errorf("Open %s: no error; it must be refused", key)
			continue
		}
		if errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), key) {
			t.Errorf("Open %s: %v; want a refusal that names it (not a missing file, which is ignored)", key, err)
		}
	}
	if _, err := d.Size("bucket", "fifo.cmr.xml"); err == nil {
		t.Errorf("Size of a FIFO: no error")
	}
	if _, err := d.Size("bucket", "out.cmr.xml"); err == nil {
		t.Errorf("Size of a link out of the root: no error")
	}
	f, err := d.Open("bucket", "in.cmr.xml")
	testutil.Check(t, err)
	b, err := io.ReadAll(f)
	f.Close()
	if err != nil || string(b) != "<x/>" {
		t.Errorf("a link inside the root read %q, %v", b, err)
	}
	if _, err := d.Open("bucket", "../../etc/passwd"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a ../ name: %v, want outside the files root", err)
	}
	// S3 takes a key literally: "../other/m.json" in bucket "bucket" is
	// not other/m.json, though it stays inside the root once cleaned; nor
	// is "x//real.cmr.xml" or "./real.cmr.xml" a name of real.cmr.xml.
	testutil.Check(t, os.MkdirAll(filepath.Join(root, "other", "x"), 0o755))
	testutil.Check(t, os.WriteFile(filepath.Join(root, "other", "m.json"), []byte("{}"), 0o644))
	for _, name := range [][2]string{{"bucket", "../other/m.json"}, {"bucket", "x/../real.cmr.xml"}, {"bucket", "./real.cmr.xml"},
		{"bucket", "/real.cmr.xml"}, {"other", "x//../m.json"}, {"..", "root/bucket/real.cmr.xml"}, {".", "bucket/real.cmr.xml"}, {"bucket", "."}} {
		if f, err := d.Open(name[0], name[1]); !errors.Is(err, fs.ErrNotExist) {
			if f != nil {
				f.Close()
			}
			t.Errorf("s3://%s/%s: %v, want it not found (S3 takes it literally)", name[0], name[1], err)
		}
		if _, err := d.Size(name[0], name[1]); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("size of s3://%s/%s: %v, want it not found", name[0], name[1], err)
		}
		if _, err := (Objects{Root: nil}).open(name[0], name[1]); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("object s3://%s/%s: %v, want it not found", name[0], name[1], err)
		}
	}
}
