package job_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/internal/store/storetest"
	"github.com/backfill-dev/backfill/internal/testutil"
	"github.com/backfill-dev/backfill/pipeline/job"
	"github.com/backfill-dev/backfill/pipeline/output"
	"github.com/backfill-dev/backfill/pipeline/sink"
	"github.com/backfill-dev/backfill/pipeline/sink/parquetfile"
)

// runDying runs cfg into the output out through a store that dies after
// budget changes (never when budget < 0), and returns what the run
// changed.
func runDying(t *testing.T, cfg job.Config, out string, budget int) (job.Summary, []string, error) {
	t.Helper()
	d := storetest.NewDying(store.Local(out), budget)
	s, err := parquetfile.Open(t.Context(), d)
	if err != nil {
		return job.Summary{}, d.Changes(), err
	}
	cfg.Scheme, cfg.MaxBlob, cfg.Version, cfg.Workers = narrow, maxBlob, "test", 2
	sum, err := job.Run(context.Background(), cfg, s)
	return sum, d.Changes(), errors.Join(err, s.Close())
}

// A run that withdraws published IDs, killed after each change it makes
// to the output, one kill point at a time: the next run with --no-withdraw
// refuses, whatever the point, and the next without ends as the
// uninterrupted run, naming exactly the withdrawals it names, once.
func TestRun_KilledAtEveryChange(t *testing.T) {
	skipUnderRace(t)
	in, buckets, want := lastLoses(t)
	last := buckets[len(buckets)-1]
	base := t.TempDir()
	if _, err := runNarrow(t, job.Config{In: store.Local(in), Buckets: []string{last}}, base); err != nil {
		t.Fatal(err)
	}
	fresh := func() string {
		dir := t.TempDir()
		if err := os.CopyFS(dir, os.DirFS(base)); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	others := job.Config{In: store.Local(in), Buckets: buckets[:len(buckets)-1]}
	clean := fresh()
	sum, changes, err := runDying(t, others, clean, -1)
	for i := range changes {
		changes[i] = strings.ReplaceAll(changes[i], clean+"/", "")
	}
	if err != nil {
		t.Fatal(err)
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
	if got := named(sum.Withdrawn); !maps.Equal(got, want) {
		t.Fatalf("the uninterrupted run withdrew %v, want %v", got, want)
	}
	wantFiles := filesOf(t, clean)
	for k := range len(changes) {
		killed := "killed before its first change"
		if k > 0 {
			killed = fmt.Sprintf("killed after change %d of %d (%s)", k, len(changes), changes[k-1])
		}
		out := fresh()
		if _, _, err := runDying(t, others, out, k); !errors.Is(err, storetest.ErrKilled) {
			t.Fatalf("%s: the run ended with %v, want it killed", killed, err)
		}
		// status names the settlement from its journal's first write on.
		rep, _, err := output.ReadState(t.Context(), output.Config{Folder: store.Local(out)})
		if err != nil {
			t.Fatal(err)
		}
		if journaled := k > slices.Index(changes, "commit "+parquetfile.SettlingName); journaled != strings.Contains(rep.Unsettled, "bucket "+last) {
			t.Errorf("%s: status says of the settlement %q", killed, rep.Unsettled)
		}
		_, _, err = runDying(t, job.Config{In: store.Local(in), Resume: true, NoWithdraw: true}, out, -1)
		var we *sink.WithdrawError
		if !errors.As(err, &we) {
			t.Errorf("%s: --resume --no-withdraw: %v, want a refusal", killed, err)
		} else {
			for _, w := range we.Withdrawals {
				if want[w.Textname] == "" {
					t.Errorf("%s: --resume --no-withdraw names %s, which the run does not withdraw", killed, w.Textname)
				}
			}
		}
		sum, _, err := runDying(t, job.Config{In: store.Local(in), Resume: true}, out, -1)
		if err != nil {
			t.Fatalf("%s: --resume: %v", killed, err)
		}
		if got := named(sum.Withdrawn); !maps.Equal(got, want) {
			t.Errorf("%s: --resume names %v withdrawn, want %v", killed, got, want)
		}
		sameFiles(t, killed+", then resumed", wantFiles, filesOf(t, out))
		if rep, _, err := output.ReadState(t.Context(), output.Config{Folder: store.Local(out)}); err != nil || rep.Unsettled != "" {
			t.Errorf("%s, then resumed: status says of the settlement %q (%v)", killed, rep.Unsettled, err)
		}
	}
}

// A zone edited in the catalogue (a cache) or in a ledger entry, to a day
// the bucket's reports do not fall on, is never trusted to leave the
// bucket out: after the catalogue edit the run of the buckets that take
// its IDs reads it and names the withdrawals as it would have; after the
// ledger edit it refuses, naming the entry that does not match its files.
func TestRun_EditedZoneIsChecked(t *testing.T) {
	skipUnderRace(t)
	in, buckets, want := lastLoses(t)
	last := buckets[len(buckets)-1]
	others := job.Config{In: store.Local(in), Buckets: buckets[:len(buckets)-1]}
	edit := func(out, file string, zone func(map[string]any) map[string]any) {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(out, file))
		testutil.Check(t, err)
		var doc map[string]any
		testutil.Check(t, json.Unmarshal(b, &doc))
		z := zone(doc)
		if z == nil {
			t.Fatalf("%s holds no zone of %s", file, last)
		}
		z["days"] = []int{1} // 2 January 1970
		b, err = json.Marshal(doc)
		testutil.Check(t, err)
		testutil.Check(t, os.WriteFile(filepath.Join(out, file), b, 0o644))
	}

	out := t.TempDir()
	if _, err := runNarrow(t, job.Config{In: store.Local(in), Buckets: []string{last}}, out); err != nil {
		t.Fatal(err)
	}
	edit(out, parquetfile.CatalogueName, func(doc map[string]any) map[string]any {
		for _, e := range doc["entries"].([]any) {
			l := e.(map[string]any)["ledger"].(map[string]any)
			if l["bucket"] == last {
				z, _ := l["zone"].(map[string]any)
				return z
			}
		}
		return nil
	})
	sum, err := runNarrow(t, others, out)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, w := range sum.Withdrawn {
		got[w.Textname] = w.Winner
	}
	if !maps.Equal(got, want) {
		t.Errorf("after the catalogue's zone of %s was edited: withdrawn %v, want %v", last, got, want)
	}

	out = t.TempDir()
	if _, err := runNarrow(t, job.Config{In: store.Local(in), Buckets: []string{last}}, out); err != nil {
		t.Fatal(err)
	}
	edit(out, "ledger/"+last+".json", func(doc map[string]any) map[string]any {
		z, _ := doc["zone"].(map[string]any)
		return z
	})
	var me *parquetfile.MismatchError
	if _, err := runNarrow(t, others, out); !errors.As(err, &me) || !strings.Contains(err.Error(), "days") {
		t.Errorf("after the ledger's zone of %s was edited: %v, want the entry named as not matching its reports", last, err)
	}
}
