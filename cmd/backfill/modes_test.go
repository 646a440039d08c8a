package main

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/backfill-dev/backfill/internal/cli"
)

// Every file the commands write gets 0666 less the umask, as other tools'
// files do (0644 under 022): the Parquet, the ledgers, the dead letters,
// the input's records, gen's corpus, the plan, the shards, check's verdicts
// and load's copies. They are written as 0600 temporary files and renamed.
func TestFileModes_FollowTheUmask(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildBinary(t)
	for _, umask := range []os.FileMode{0o022, 0o027, 0o002} {
		t.Run(umask.String(), func(t *testing.T) {
			dir := t.TempDir()
			sh := func(args ...string) {
				t.Helper()
				cmd := exec.Command("sh", append([]string{"-c", "umask " + octal(umask) + ` && exec "$0" "$@"`, bin}, args...)...)
				cmd.Dir = dir
				out, err := cmd.CombinedOutput()
				if code := cmd.ProcessState.ExitCode(); code != cli.ExitOK && code != cli.ExitRejects {
					t.Fatalf("backfill %v: %v\n%s", args, err, out)
				}
			}
			sh("gen", "-q", "--out", "corpus", "--buckets", "2", "--reports", "10", "--max-measurements", "50")
			if err := os.MkdirAll(filepath.Join(dir, "corpus", "2017-6-9"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "corpus", "2017-6-9", "a.lz4"), nil, 0o666&^umask); err != nil {
				t.Fatal(err)
			}
			sh("run", "-q", "--in", "corpus", "--out", "out")
			sh("plan", "--in", "corpus", "--shards", "2", "--out", "plan.json")
			for _, i := range []string{"0", "1"} {
				sh("run", "-q", "--plan", "plan.json", "--shard", i, "--out", "job")
			}
			sh("check", "--plan", "plan.json", "--out", "job")
			for _, i := range []string{"0", "1"} {
				sh("load", "--plan", "plan.json", "--shard", i, "--out", "job")
			}
			want := 0o666 &^ umask
			n := 0
			err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() || path == filepath.Join(dir, "corpus", "2017-6-9", "a.lz4") {
					return err
				}
				n++
				info, err := d.Info()
				if err != nil {
					return err
				}
				if got := info.Mode().Perm(); got != want {
					rel, _ := filepath.Rel(dir, path)
					t.Errorf("%s: mode %v, want %v", rel, got, want)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range []string{"out/input-dead-letters.jsonl", "out/ledger/2017-06-01.json", "out/measurements/2017-06-01.parquet",
				"plan.json", "job/verdicts.jsonl", "job/shards/0/counts.json", "job/measurements/2017-06-02.parquet", "corpus/ground-truth.jsonl"} {
				if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
					t.Errorf("%s was not written: %v", f, err)
				}
			}
			if n < 30 {
				t.Errorf("only %d files checked", n)
			}
		})
	}
}

func octal(m os.FileMode) string { return "0" + strconv.FormatUint(uint64(m), 8) }
