package lint

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// absPath matches an absolute path into a machine's own folders: the
// shared temporary folder and home folders. Tests take temporary folders
// from t.TempDir or os.MkdirTemp, and Makefile targets and scripts from
// mktemp, all of which honour TMPDIR.
var absPath = regexp.MustCompile(`(^|[\s"'=(:,\x60])/(tmp|var/tmp|home|root|Users)(/|[\s"'\x60)]|$)`)

// outside matches a relative path that leaves the repository for a
// sibling checkout.
var outside = regexp.MustCompile(`\.\./\.\./?(shared|\.library)\b|(^|[\s("'\x60])\.\./(shared|\.library)\b`)

// checked reports whether path (slash-separated, from the repository
// root) is code that tests, targets or CI run.
func checked(path string) bool {
	base := filepath.Base(path)
	switch {
	case base == "Makefile", strings.HasSuffix(base, ".mk"):
		return true
	case strings.HasPrefix(path, "scripts/"), strings.HasPrefix(path, ".ci/"):
		return true
	case strings.HasPrefix(path, "deploy/image/"):
		// The paths there are the image's own (its binary, its temporary
		// folder, its user's home), not the machine's.
		return false
	}
	switch filepath.Ext(base) {
	case ".go", ".sh", ".py", ".js", ".mjs", ".txtar":
		return true
	}
	return false
}

// violations returns the lines of r that name an absolute path outside
// the repository or a sibling checkout, as "N: line".
func violations(text string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if absPath.MatchString(line) || outside.MatchString(line) {
			out = append(out, fmt.Sprintf("%d: %s", n, strings.TrimSpace(line)))
		}
	}
	return out
}

func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatalf("no go.mod at %s: %v", dir, err)
	}
	return dir
}

// walk calls fn with every file of the repository that is not generated
// output (bin/, demo/, .git/) or installed third-party code (any
// node_modules/, and the Cumulus code reference/cumulus-v21 unpacks).
func walk(t *testing.T, root string, fn func(rel string, data []byte)) {
	t.Helper()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := filepath.ToSlash(strings.TrimPrefix(path, root+string(filepath.Separator)))
		if d.IsDir() {
			switch rel {
			case ".git", "bin", "demo", "reference/cumulus-v21/api", "reference/cumulus-v21/api.new":
				return filepath.SkipDir
			}
			if d.Name() == "node_modules" {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		fn(rel, data)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestNoPathsOutsideRepo fails when a test, a Makefile target, a script
// or CI names an absolute path outside the repository and its temporary
// folders, or a sibling checkout: such a path exists on one machine only.
func TestNoPathsOutsideRepo(t *testing.T) {
	root := repoRoot(t)
	files := 0
	walk(t, root, func(rel string, data []byte) {
		if !checked(rel) {
			return
		}
		files++
		for _, v := range violations(string(data)) {
			t.Errorf("%s:%s", rel, v)
		}
	})
	if files < 20 {
		t.Fatalf("checked only %d files under %s", files, root)
	}
}

// TestViolations holds the matcher to lines that must and must not fail.
func TestViolations(t *testing.T) {
	tmp := "/" + "tmp"
	bad := []string{
		`runWith(t, job.Config{In: "` + tmp + `/backfill-bench/corpus"})`,
		"\t@cp go.mod " + tmp + "/backfill-go.mod.bak",
		`dir=$(mktemp -d ` + tmp + `/backfill-pg.XXXXXX)`,
		`os.ReadFile("/` + `home/me/corpus.tsv")`,
		`cd /` + `root/data`,
		`data := "../` + `shared/realdata/ooni"`,
		`cp ../../` + `shared/docs/x .`,
	}
	good := []string{
		`dir := t.TempDir()`,
		`bak=$$(mktemp -d)`,
		`backfill run --in /data/canned --out out`,
		`socket in /var/run/postgresql`,
		`input < /dev/null`,
		`https://example.org/tmp/x`,
		`"pipeline/ooid/testdata/tmp/x"`,
	}
	for _, line := range bad {
		if len(violations(line)) != 1 {
			t.Errorf("violations(%q) found nothing", line)
		}
	}
	for _, line := range good {
		if v := violations(line); len(v) != 0 {
			t.Errorf("violations(%q) = %q, want none", line, v)
		}
	}
}

// mention matches a file name of a document or notebook in prose or
// code: "docs/design.md", "docs/design.md §3", "the ooid-hash-prob notebook".
var mention = regexp.MustCompile(`[A-Za-z0-9_./-]*[A-Za-z0-9_-]\.(md|ipynb)\b`)

// url matches a web address, whose path names files of other projects.
var url = regexp.MustCompile(`[a-z]+://[^\s)>"'\x60]+`)

// TestMentionedFilesExist fails when code or a document names a document
// the repository does not have (a design note or notebook kept elsewhere):
// cite a public source by URL instead.
func TestMentionedFilesExist(t *testing.T) {
	root := repoRoot(t)
	have := map[string]bool{} // paths from the root, and base names
	walk(t, root, func(rel string, _ []byte) {
		have[rel], have[filepath.Base(rel)] = true, true
	})
	walk(t, root, func(rel string, data []byte) {
		if !checked(rel) && filepath.Ext(rel) != ".md" {
			return
		}
		for n, line := range strings.Split(string(data), "\n") {
			for _, m := range mention.FindAllString(url.ReplaceAllString(line, ""), -1) {
				m = strings.TrimPrefix(m, "./")
				near := filepath.ToSlash(filepath.Join(filepath.Dir(rel), m))
				if !have[m] && !have[near] && !have[filepath.Base(m)] {
					t.Errorf("%s:%d: names %s, which is not in the repository", rel, n+1, m)
				}
			}
		}
	})
}

// mdLink matches a Markdown link or image target.
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestDocLinks fails when a Markdown file links to a file or folder the
// repository does not have: documents stand alone, and cite public
// sources by URL.
func TestDocLinks(t *testing.T) {
	root := repoRoot(t)
	docs := 0
	walk(t, root, func(rel string, data []byte) {
		if filepath.Ext(rel) != ".md" {
			return
		}
		docs++
		for _, v := range outside.FindAllString(string(data), -1) {
			t.Errorf("%s: refers to %q, outside the repository", rel, v)
		}
		for _, m := range mdLink.FindAllStringSubmatch(string(data), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			target, _, _ = strings.Cut(target, "#")
			p := filepath.Join(root, filepath.Dir(rel), filepath.FromSlash(target))
			if _, err := os.Stat(p); err != nil {
				t.Errorf("%s: links to %s, which is not in the repository", rel, m[1])
			}
		}
	})
	if docs == 0 {
		t.Fatal("no Markdown file found")
	}
}

// The first make demo on a fresh machine compiles for minutes; it says so
// before it starts, and says nothing of it once the binary is built.
func TestMakeDemo_SaysTheFirstBuildTakesMinutes(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	root := filepath.Join("..", "..")
	for _, tc := range []struct {
		bin  string
		says bool
	}{{filepath.Join(t.TempDir(), "backfill"), true}, {os.Args[0], false}} {
		out, err := exec.Command("make", "-s", "-C", root, "announce-build", "BIN="+tc.bin).CombinedOutput()
		if err != nil {
			t.Fatalf("make announce-build: %v\n%s", err, out)
		}
		if got := strings.Contains(string(out), "the first build downloads and compiles the dependencies, up to 2 minutes"); got != tc.says {
			t.Errorf("BIN=%s: says the build takes minutes: %v, want %v (%q)", tc.bin, got, tc.says, out)
		}
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "the first `make demo` spends up to 2 minutes") {
		t.Error("the README does not say how long the first make demo takes")
	}
}
