package lint

import (
	"bufio"
	"bytes"
	"cmp"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// maxLines is the cap docs/design.md states on a package's code: its
// non-test Go files' lines, less blank lines and comment lines; over
// are the packages it states a cap of their own for.
const maxLines = 2000

var over = map[string]int{"pipeline/ooniuid": 4000}

// tableRow matches a row of the package table of docs/design.md and
// captures the package (a folder row ends in "/").
var tableRow = regexp.MustCompile("^\\| (?:\\*\\*)?`([a-z0-9_./-]+)`(?:\\*\\*)? \\|")

// modulePackages returns the packages of the repository's root module
// (folders under root holding a non-test Go file, none in a folder with
// a go.mod of its own, testdata or a hidden folder), with their lines of
// code.
func modulePackages(t *testing.T, root string) map[string]int {
	t.Helper()
	out := map[string]int{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			name := d.Name()
			if rel != "." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules" || name == "reference") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil && rel != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out[filepath.ToSlash(filepath.Dir(rel))] += codeLines(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// codeLines counts the lines of Go source that are neither blank nor
// comments alone.
func codeLines(src []byte) int {
	n, inBlock := 0, false
	sc := bufio.NewScanner(bytes.NewReader(src))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		switch {
		case inBlock:
			inBlock = !strings.Contains(l, "*/")
		case l == "", strings.HasPrefix(l, "//"):
		case strings.HasPrefix(l, "/*"):
			inBlock = !strings.Contains(l, "*/")
		default:
			n++
		}
	}
	return n
}

// The package table of docs/design.md names every package of the module,
// and only packages that exist; no package holds more lines of code than
// the cap it states.
func TestDesign_PackageTable(t *testing.T) {
	root := repoRoot(t)
	design, err := os.ReadFile(filepath.Join(root, "docs", "design.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, says := range []string{"No package holds more than 2,000 lines", "`pipeline/ooniuid`", "may not pass 4,000"} {
		if !bytes.Contains(design, []byte(says)) {
			t.Errorf("docs/design.md no longer says %q, the cap this test holds packages to", says)
		}
	}
	named := map[string]bool{}
	for _, line := range strings.Split(string(design), "\n") {
		if m := tableRow.FindStringSubmatch(line); m != nil && !strings.HasSuffix(m[1], "/") {
			named[m[1]] = true
		}
	}
	pkgs := modulePackages(t, root)
	for _, p := range slices.Sorted(func(yield func(string) bool) {
		for p := range pkgs {
			if !yield(p) {
				return
			}
		}
	}) {
		if p == "." || strings.HasPrefix(p, "bench") || strings.HasPrefix(p, "scripts") {
			continue
		}
		if !named[p] {
			t.Errorf("package %s is not in the package table of docs/design.md", p)
		}
		if limit := cmp.Or(over[p], maxLines); pkgs[p] > limit {
			t.Errorf("package %s holds %d lines of code, more than the %d docs/design.md allows", p, pkgs[p], limit)
		}
	}
	for p := range named {
		if _, ok := pkgs[p]; !ok {
			t.Errorf("docs/design.md's package table names %s, which is no package of the module", p)
		}
	}
}
