package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/backfill-dev/backfill/internal/cli"
	"github.com/backfill-dev/backfill/internal/testutil"
)

// A step never builds on a committed bucket it did not check: a bucket
// file replaced by another run's, a ledger whose counts were edited, and
// a file the ledger does not hold are each refused by run --resume (exit
// 1, naming the file) and by verify, where before they passed in silence.
func TestRun_ChecksWhatItBuildsOn(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	genCorpus(t, a)
	genCorpus(t, b, "--seed", "7")
	outOf := func(in string) string {
		out := t.TempDir()
		if code, s := callIn("", "run", "-q", "--in", in, "--out", out); code != cli.ExitOK {
			t.Fatalf("run: exit %d\n%s", code, s)
		}
		return out
	}
	other := outOf(b)
	refused := func(what, out, file string) {
		t.Helper()
		code, s := callIn("", "run", "-q", "--resume", "--in", a, "--out", out)
		if code != cli.ExitFailure || !strings.Contains(s, file) || !strings.Contains(s, "changed after the bucket was committed") {
			t.Errorf("%s: run --resume: exit %d, want 1 naming %s\n%s", what, code, file, s)
		}
		code, s = callIn("", "verify", out)
		if code != cli.ExitFailure || !strings.Contains(s, file) {
			t.Errorf("%s: verify: exit %d, want 1 naming %s\n%s", what, code, file, s)
		}
	}

	// Another run's report manifest in place of the bucket's own.
	out := outOf(a)
	rel := "reports/2017-06-02.parquet"
	data, err := os.ReadFile(filepath.Join(other, rel))
	testutil.Check(t, err)
	testutil.Check(t, os.WriteFile(filepath.Join(out, rel), data, 0o644))
	refused("a replaced report manifest", out, filepath.Join(out, rel))

	// A ledger entry whose counts were edited.
	out = outOf(a)
	ledger := filepath.Join(out, "ledger", "2017-06-01.json")
	var l map[string]any
	data, err = os.ReadFile(ledger)
	testutil.Check(t, err)
	testutil.Check(t, json.Unmarshal(data, &l))
	l["counts"].(map[string]any)["measurements"] = 16.0
	data, _ = json.Marshal(l)
	testutil.Check(t, os.WriteFile(ledger, data, 0o644))
	refused("edited counts", out, ledger)

	// A bucket's files without their ledger entry (a run stopped between
	// the two, or copied in): verify names them.
	out = outOf(a)
	stray := filepath.Join(out, "measurements", "2017-06-09.parquet")
	data, err = os.ReadFile(filepath.Join(out, "measurements", "2017-06-01.parquet"))
	testutil.Check(t, err)
	testutil.Check(t, os.WriteFile(stray, data, 0o644))
	if code, s := callIn("", "verify", out); code != cli.ExitFailure || !strings.Contains(s, stray) {
		t.Errorf("a stray file: verify: exit %d, want 1 naming %s\n%s", code, stray, s)
	}

	// A ledger entry that is no bucket's, or names another bucket than
	// its file: status refuses it as run and verify do, naming it.
	for name, content := range map[string]string{"..json": `{"bucket":".."}`, "2017-06-03.json": `{"bucket":"../../../../etc/passwd"}`} {
		out = outOf(a)
		path := filepath.Join(out, "ledger", name)
		testutil.Check(t, os.WriteFile(path, []byte(content), 0o644))
		for _, cmd := range [][]string{{"status", out}, {"verify", out}, {"run", "-q", "--resume", "--in", a, "--out", out}} {
			if code, s := callIn("", cmd...); code != cli.ExitFailure || !strings.Contains(s, path) {
				t.Errorf("ledger/%s: %s: exit %d, want 1 naming it\n%s", name, cmd[0], code, s)
			}
		}
	}
}

// An output records its input by identity: a link to the input and its
// real path are one input, and a link repointed at another archive is
// another input, whose buckets do not replace the committed ones without
// --replace.
func TestRun_InputByIdentity(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, b, link := filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir, "current")
	genCorpus(t, a)
	genCorpus(t, b, "--seed", "7")
	testutil.Check(t, os.Symlink(a, link))
	out := t.TempDir()
	if code, s := callIn("", "run", "-q", "--in", link, "--out", out); code != cli.ExitOK {
		t.Fatalf("run through the link: exit %d\n%s", code, s)
	}
	if code, s := callIn("", "run", "-q", "--resume", "--in", a, "--out", out); code != cli.ExitOK {
		t.Errorf("the real path of the same input: exit %d, want 0\n%s", code, s)
	}
	testutil.Check(t, os.Remove(link))
	testutil.Check(t, os.Symlink(b, link))
	if code, s := callIn("", "run", "-q", "--in", link, "--out", out); code != cli.ExitFailure || !strings.Contains(s, "not replaced (--replace replaces them)") || !strings.Contains(s, b) {
		t.Errorf("the link repointed at another archive: exit %d, want 1 naming %s\n%s", code, b, s)
	}
}

// A stray file in the output's folders (one a reader's glob of
// measurements/*.parquet reads, doubling IDs) is named by run, run
// --resume and status, each with a status that is not 0, as well as by
// verify.
func TestRun_StrayFilesNamed(t *testing.T) {
	t.Parallel()
	in, out := ranCorpus(t)
	stray := filepath.Join(out, "measurements", "2017-06-01.old.parquet")
	testutil.Check(t, os.WriteFile(stray, readFile(t, filepath.Join(out, "measurements", "2017-06-01.parquet")), 0o644))
	for _, cmd := range [][]string{
		{"run", "-q", "--resume", "--in", in, "--out", out},
		{"run", "-q", "--in", in, "--out", out, "2017-06-02"},
		{"status", out},
		{"status", "--json", out},
	} {
		code, s := callIn("", cmd...)
		if code != cli.ExitRejects || !strings.Contains(s, "measurements/2017-06-01.old.parquet") {
			t.Errorf("%v: exit %d, want 3 naming the stray file\n%s", cmd, code, s)
		}
	}
	if code, s := callIn("", "verify", out); code != cli.ExitFailure || !strings.Contains(s, stray) {
		t.Errorf("verify: exit %d, want 1 naming %s\n%s", code, stray, s)
	}
	testutil.Check(t, os.Remove(stray))
	if code, s := callIn("", "run", "-q", "--resume", "--in", in, "--out", out); code != cli.ExitOK {
		t.Errorf("run --resume once the stray file is gone: exit %d\n%s", code, s)
	}
}

// A bucket whose ledger entry is there and one of whose files is not (a
// run killed inside the bucket's commit, between the entry and its
// measurements) is not called committed: status says in words what is
// absent, verify names it, and run --resume --no-withdraw writes it
// again.
func TestRun_IncompleteBucketNamed(t *testing.T) {
	t.Parallel()
	in, out := ranCorpus(t)
	want := readFile(t, filepath.Join(out, "measurements", "2017-06-02.parquet"))
	testutil.Check(t, os.Remove(filepath.Join(out, "measurements", "2017-06-02.parquet")))
	code, s := callIn("", "status", out)
	if code != cli.ExitOK || !strings.Contains(s, "1 incomplete") || !regexp.MustCompile(`2017-06-02 +incomplete`).MatchString(s) || !strings.Contains(s, "measurements/2017-06-02.parquet is not there") {
		t.Errorf("status: exit %d, want the bucket incomplete, its file named\n%s", code, s)
	}
	if code, s := callIn("", "verify", out); code != cli.ExitFailure || !strings.Contains(s, "is committed in its ledger, but") || strings.Contains(s, "openat") {
		t.Errorf("verify: exit %d, want 1 saying the file is absent\n%s", code, s)
	}
	if code, s := callIn("", "run", "-q", "--resume", "--no-withdraw", "--in", in, "--out", out); code != cli.ExitOK {
		t.Errorf("run --resume --no-withdraw: exit %d, want 0\n%s", code, s)
	}
	if got := readFile(t, filepath.Join(out, "measurements", "2017-06-02.parquet")); string(got) != string(want) {
		t.Error("the bucket written again differs from the one committed")
	}
}

// ranCorpus generates a corpus and runs it into an output: their folders.
func ranCorpus(t *testing.T) (in, out string) {
	t.Helper()
	dir := t.TempDir()
	in, out = filepath.Join(dir, "in"), filepath.Join(dir, "out")
	genCorpus(t, in)
	if code, s := callIn("", "run", "-q", "--in", in, "--out", out); code != cli.ExitOK {
		t.Fatalf("run: exit %d\n%s", code, s)
	}
	return in, out
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	testutil.Check(t, err)
	return data
}
