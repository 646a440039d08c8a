package idcmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/backfill-dev/backfill/internal/cli"
	"github.com/backfill-dev/backfill/internal/testutil"
)

// The token is the first line of --token-file (what follows it is not
// read); a token file others can write is refused, naming its mode.
func TestStampToken_File(t *testing.T) {
	dir := t.TempDir()
	two := filepath.Join(dir, "two")
	testutil.Check(t, os.WriteFile(two, []byte("s3cret\r\nsecond line\n"), 0o600))
	if tok, err := stampToken(two); err != nil || tok != "s3cret" {
		t.Errorf("a two-line token file: %q, %v; want its first line", tok, err)
	}
	open := filepath.Join(dir, "open")
	testutil.Check(t, os.WriteFile(open, []byte("s3cret\n"), 0o600))
	testutil.Check(t, os.Chmod(open, 0o666))
	if _, err := stampToken(open); err == nil || !strings.Contains(err.Error(), "written by others (mode 0666)") {
		t.Errorf("a world-writable token file: %v, want it refused", err)
	}
	for _, bad := range []string{"\nsecond\n", "two words\n", ""} {
		f := filepath.Join(dir, "bad")
		testutil.Check(t, os.WriteFile(f, []byte(bad), 0o600))
		if _, err := stampToken(f); err == nil {
			t.Errorf("token file %q: accepted", bad)
		}
	}
}

// --rejects is never written through a link: the run stops before any
// line is read, and the link's target is unchanged.
func TestStampRejects_NotThroughALink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	testutil.Check(t, os.WriteFile(target, []byte("mine\n"), 0o600))
	link := filepath.Join(dir, "rejects")
	testutil.Check(t, os.Symlink(target, link))
	err := stampFilterRejects(t.Context(), nil, link, 1<<10, cli.Stdio{In: strings.NewReader("not json\n")})
	if err == nil || !strings.Contains(err.Error(), "is a link") {
		t.Errorf("--rejects through a link: %v", err)
	}
	if b, _ := os.ReadFile(target); string(b) != "mine\n" {
		t.Errorf("the link's target now holds %q", b)
	}
}
