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
}
