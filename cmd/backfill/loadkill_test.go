package main

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/backfill-dev/backfill/internal/cli"
	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/internal/store/storetest"
	"github.com/backfill-dev/backfill/internal/testutil"
	"github.com/backfill-dev/backfill/pipeline/scaleout"
	"github.com/backfill-dev/backfill/pipeline/sink"
	"github.com/backfill-dev/backfill/pipeline/sink/parquetfile"
)

// loadDying loads shard 0 of the plan in planFile into the job's output
// through a store that dies after budget changes (never when budget < 0),
// and returns what the load changed.
func loadDying(t *testing.T, planFile, job string, budget int, noWithdraw bool) (scaleout.LoadSummary, []string, error) {
	t.Helper()
	p, err := scaleout.ParsePlan(readFile(t, planFile))
	testutil.Check(t, err)
	d := storetest.NewDying(store.Local(job), budget)
	s, err := parquetfile.Open(t.Context(), d)
	if err != nil {
		return scaleout.LoadSummary{}, d.Changes(), err
	}
	sum, err := scaleout.Load(t.Context(), p, 0, d, s, scaleout.LoadOptions{NoWithdraw: noWithdraw})
	return sum, d.Changes(), errors.Join(err, s.Close())
}

// A load whose reports take IDs the output published, killed after each
// change it makes to the output in turn: a retry with --no-withdraw
// refuses, whatever the point, and a retry without ends as the
// uninterrupted load, naming exactly the withdrawals it names, once.
func TestLoad_KilledAtEveryChange(t *testing.T) {
	t.Parallel()
	skipUnderRace(t)
	dir := t.TempDir()
	_, rest, first := splitColliding(t, dir)
	only := dir + "/first"
	testutil.Check(t, os.CopyFS(filepath.Join(only, first), os.DirFS(filepath.Join(dir, "c", first))))
	base, plan := dir+"/base", dir+"/first.json"
	for _, args := range [][]string{
		{"run", "-q", "--in", rest, "--out", base, "--counter-bits", "20"},
		{"plan", "--in", only, "--shards", "1", "--out", plan},
		{"run", "-q", "--plan", plan, "--shard", "0", "--out", base, "--counter-bits", "20"},
		{"check", "--rejects-exit", "0", "--plan", plan, "--out", base},
	} {
		if code, out := callIn("", args...); code != cli.ExitOK && code != cli.ExitRejects {
			t.Fatalf("%s: exit %d\n%s", args[0], code, out)
		}
	}
	fresh := func() string {
		d, err := os.MkdirTemp(dir, "kill")
		testutil.Check(t, err)
		testutil.Check(t, os.CopyFS(d, os.DirFS(base)))
		return d
	}
	named := func(ws []sink.Withdrawal) map[string]string {
		got := map[string]string{}
		for _, w := range ws {
			if _, twice := got[w.Textname]; twice {
				t.Errorf("%s is named twice", w.Textname)
			}
			got[w.Textname] = w.Winner
		}
		return got
	}
	clean := fresh()
	sum, changes, err := loadDying(t, plan, clean, -1, false)
	testutil.Check(t, err)
	want := named(sum.Withdrawn)
	if len(want) == 0 {
		t.Fatal("the load withdraws nothing: the corpus proves nothing")
	}
	wantFiles := outputFiles(tree(t, clean))
	for k := range len(changes) {
		killed := "killed before its first change"
		if k > 0 {
			killed = fmt.Sprintf("killed after change %d of %d (%s)", k, len(changes), strings.ReplaceAll(changes[k-1], clean+"/", ""))
		}
		out := fresh()
		if _, _, err := loadDying(t, plan, out, k, false); !errors.Is(err, storetest.ErrKilled) {
			t.Fatalf("%s: the load ended with %v, want it killed", killed, err)
		}
		var we *sink.WithdrawError
		if _, _, err := loadDying(t, plan, out, -1, true); !errors.As(err, &we) {
			t.Errorf("%s: a retry with --no-withdraw: %v, want a refusal", killed, err)
		}
		sum, _, err := loadDying(t, plan, out, -1, false)
		if err != nil {
			t.Fatalf("%s: the retry: %v", killed, err)
		}
		if got := named(sum.Withdrawn); !maps.Equal(got, want) {
			t.Errorf("%s: the retry names %v withdrawn, want %v", killed, got, want)
		}
		sameOutput(t, wantFiles, outputFiles(tree(t, out)), false)
	}
}
