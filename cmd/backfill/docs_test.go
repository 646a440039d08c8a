package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/backfill-dev/backfill/internal/pgtest"
	"github.com/backfill-dev/backfill/internal/testutil"
)

// A docBlock is a command block of a Markdown document: a fence whose
// info string is "sh".
type docBlock struct {
	line int    // of its opening fence
	text string // its lines
	skip string // why it is not run (<!-- docs-test: skip REASON -->)
	exit int    // the status it ends with (<!-- docs-test: exit N -->)
	// vary: its transcript's OOIDs (16 hex digits) hold the time, so any
	// stands for any (<!-- docs-test: vary OOIDs -->)
	vary bool
}

var docMarker = regexp.MustCompile(`^<!-- docs-test: (skip|exit|vary) (.+?) -->$`)

// anyOOID is an OOID of a transcript whose OOIDs vary.
var anyOOID = regexp.MustCompile(`\b[0-9a-f]{16}\b`)

// docBlocks are the command blocks of the Markdown file path, in order.
func docBlocks(t *testing.T, path string) []docBlock {
	f, err := os.Open(path)
	testutil.Check(t, err)
	defer f.Close()
	var out []docBlock
	var cur *docBlock  // the command block being read
	inFence := false   // in a block, a command block or not
	var marks []string // the markers right above the next fence
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		if inFence {
			switch {
			case strings.HasPrefix(l, "```"):
				if cur != nil {
					out = append(out, *cur)
				}
				cur, inFence = nil, false
			case cur != nil:
				cur.text += l + "\n"
			}
			continue
		}
		switch {
		case strings.HasPrefix(l, "```"):
			inFence = true
			if l == "```sh" {
				cur = &docBlock{line: n}
				for _, m := range marks {
					switch p := docMarker.FindStringSubmatch(m); {
					case p[1] == "skip":
						cur.skip = p[2]
					case p[1] == "vary" && p[2] == "OOIDs":
						cur.vary = true
					case p[1] == "exit":
						if cur.exit, err = strconv.Atoi(p[2]); err == nil {
							break
						}
						fallthrough
					default:
						t.Fatalf("%s:%d: %q", path, n, m)
					}
				}
			} else if len(marks) > 0 {
				t.Fatalf("%s:%d: a docs-test marker above a block that is not sh", path, n)
			} else if sc.Scan() {
				// A transcript is commands to run: it must say sh.
				n++
				if strings.HasPrefix(sc.Text(), "$ ") {
					t.Errorf("%s:%d: a transcript in a block that is not sh: it is never run", path, n)
				}
				if strings.HasPrefix(sc.Text(), "```") {
					inFence = false
				}
			}
			marks = nil
		case docMarker.MatchString(l):
			marks = append(marks, l)
		case strings.TrimSpace(l) != "":
			marks = nil
		}
	}
	testutil.Check(t, sc.Err())
	return out
}

// docPlaceholders are the servers the documents name, by the names they
// give them; the test gives each a database of its own.
var docPlaceholders = []string{"postgres://me@db/ooni", "postgres:///cumulus"}

// Every command block (```sh) of README.md and docs/*.md runs as written,
// as a newcomer would paste it, in order, one folder per document (with
// the checkout's cumulus/ sample data), with bin/backfill and backfill
// the binary and each PostgreSQL URL the
// documents name a database of the test's own: each ends with status 0,
// or the one a marker above it gives, and in a transcript ("$ " before
// each command) each command prints exactly the lines under it. A block
// that needs what the test cannot have (an S3 server, a cluster, the
// full-scale corpus) is marked with why, and named in the test's log.
func TestDocs_CommandBlocks(t *testing.T) {
	bin := buildBinary(t)
	docs, _ := filepath.Glob("../../docs/*.md")
	docs = append([]string{"../../README.md"}, docs...)
	ran := 0
	for _, doc := range docs {
		blocks := docBlocks(t, doc)
		if len(blocks) == 0 {
			continue
		}
		name := strings.TrimPrefix(doc, "../../")
		t.Run(strings.ReplaceAll(name, "/", "_"), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			testutil.Check(t, os.Mkdir(filepath.Join(dir, "bin"), 0o755))
			testutil.Check(t, os.Symlink(bin, filepath.Join(dir, "bin", "backfill")))
			// The checkout's sample data, which blocks that say "from the
			// checkout" read.
			samples, err := filepath.Abs("../../cumulus")
			testutil.Check(t, err)
			testutil.Check(t, os.Symlink(samples, filepath.Join(dir, "cumulus")))
			env := append(os.Environ(), "PATH="+filepath.Join(dir, "bin")+":"+os.Getenv("PATH"), "HOME="+dir)
			dsns := map[string]string{}
			for _, b := range blocks {
				where := fmt.Sprintf("%s:%d", name, b.line)
				if b.skip != "" {
					t.Logf("%s: skipped: %s", where, b.skip)
					continue
				}
				script := b.text
				for _, p := range docPlaceholders {
					if strings.Contains(script, p) {
						if dsns[p] == "" {
							dsns[p] = pgtest.NewDatabase(t)
						}
						script = strings.ReplaceAll(script, p, dsns[p])
					}
				}
				runDocBlock(t, where, dir, env, script, b)
			}
		})
		ran += len(blocks)
	}
	if ran < 30 {
		t.Errorf("%d command blocks in the documents: the markers are not read", ran)
	}
}

// runDocBlock runs block b (its text script) in dir: a transcript command
// by command, each one's output (standard output and error, as a terminal
// shows them) compared with the lines under it, else as one bash script.
func runDocBlock(t *testing.T, where, dir string, env []string, script string, b docBlock) {
	t.Helper()
	type step struct{ cmd, want string }
	var steps []step
	if strings.HasPrefix(script, "$ ") {
		for l := range strings.Lines(script) {
			if c, ok := strings.CutPrefix(l, "$ "); ok {
				steps = append(steps, step{cmd: c})
			} else {
				steps[len(steps)-1].want += l
			}
		}
	} else {
		steps = []step{{cmd: script}}
	}
	for i, s := range steps {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		cmd := exec.CommandContext(ctx, "bash", "-e", "-o", "pipefail", "-c", s.cmd)
		cmd.Dir, cmd.Env = dir, env
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		transcript := len(steps) > 1 || s.want != ""
		if transcript {
			cmd.Stderr = &stdout
		}
		err := cmd.Run()
		cancel()
		code := 0
		var ee *exec.ExitError
		switch {
		case errors.As(err, &ee):
			code = ee.ExitCode()
		case err != nil:
			t.Fatalf("%s: %v", where, err)
		}
		want := 0
		if i == len(steps)-1 {
			want = b.exit
		}
		if code != want {
			t.Fatalf("%s: exit %d, want %d:\n%s\nstdout:\n%s\nstderr:\n%s", where, code, want, s.cmd, stdout.String(), stderr.String())
		}
		got, doc := stdout.String(), s.want
		if b.vary {
			got, doc = anyOOID.ReplaceAllString(got, "OOID"), anyOOID.ReplaceAllString(doc, "OOID")
		}
		if transcript && got != doc {
			t.Errorf("%s: %s printed\n%s\nthe document says\n%s", where, strings.TrimSpace(s.cmd), stdout.String(), s.want)
		}
	}
}
