package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/backfill-dev/backfill/internal/cli"
	"github.com/backfill-dev/backfill/internal/cumulustest"
	"github.com/backfill-dev/backfill/internal/pgtest"
	"github.com/backfill-dev/backfill/internal/s3test"
	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/internal/store/location"
	"github.com/backfill-dev/backfill/internal/testutil"
)

// granuleMsgs writes n completed messages of collection coll, one granule
// each (prefix + index), as JSON lines.
func granuleMsgs(t *testing.T, path, coll, prefix string, n int) {
	t.Helper()
	name, version, _ := strings.Cut(coll, "___")
	var b bytes.Buffer
	for i := range n {
		id := fmt.Sprintf("%s%04d", prefix, i)
		m := map[string]any{
			"cumulus_meta": map[string]any{"state_machine": "arn:aws:states:us-east-1:1:stateMachine:Ingest",
				"execution_name": "x-" + id, "workflow_start_time": 1700000000000.0 + float64(i)},
			"meta": map[string]any{"status": "completed", "workflow_name": "Ingest",
				"collection": map[string]any{"name": name, "version": version},
				"provider":   map[string]any{"id": "s3_provider", "protocol": "s3", "host": "h"}},
			"payload": map[string]any{"granules": []any{map[string]any{"granuleId": id,
				"files": []any{map[string]any{"bucket": "b", "key": id + ".hdf", "size": float64(i)}}}}},
		}
		body, _ := json.Marshal(m)
		rec, _ := json.Marshal(map[string]any{"messageId": id, "body": string(body)})
		b.Write(rec)
		b.WriteByte('\n')
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.Write(b.Bytes())
}

// granuleRows lists "id status volume files" of every granule.
func granuleRows(t *testing.T, url string) []string {
	t.Helper()
	return cumulustest.Lines(t, cumulustest.Pool(t, url), `SELECT g.granule_id || ' ' || g.status || ' ' || g.product_volume || ' ' ||
		(SELECT string_agg(key, ',') FROM files f WHERE f.granule_cumulus_id = g.cumulus_id) ||
		' ' || (SELECT count(*) FROM granules_executions j WHERE j.granule_cumulus_id = g.cumulus_id)
		FROM granules g ORDER BY 1`)
}

func countFiles(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			n++
		}
		return nil
	})
	return n
}

// The command line end to end: granule-schema makes the tables, a write
// whose collection is missing archives every message (exit 3), and
// granule-recover, SIGKILLed at 20 random moments and run again, ends
// with every good record written once and deleted, and every bad one in
// failed-sqs: nothing lost. The rows equal a direct write's.
func TestGranuleRecover_Kill(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	dir := t.TempDir()
	url := pgtest.NewDatabase(t)
	run := func(args ...string) (int, string) { return testutil.Run(t, exec.Command(bin, args...)) }
	if code, out := run("granule-schema", "--dsn", url); code != 0 {
		t.Fatalf("granule-schema: %d %s", code, out)
	}
	cumulustest.Seed(t, url)
	in := filepath.Join(dir, "messages.jsonl")
	const good, bad = 600, 40
	granuleMsgs(t, in, "LATER___1", "g", good)
	granuleMsgs(t, in, "NEVER___1", "never", bad)
	arch := filepath.Join(dir, "archive")
	code, out := run("granule-write", "--dsn", url, "--archive", arch, in)
	if code != 3 || !strings.Contains(out, fmt.Sprintf("%d messages failed", good+bad)) {
		t.Fatalf("granule-write: exit %d\n%s", code, out)
	}
	// Each failure says what was missing, after Cumulus's own words.
	if !strings.Contains(out, "No records written to the database. Missing: collection NEVER___1 (meta.collection name___version) is not in collections.") {
		t.Errorf("granule-write does not say which collection was missing:\n%.2000s", out)
	}
	sqs := filepath.Join(arch, "dead-letter-archive", "sqs")
	if n := countFiles(t, sqs); n != good+bad {
		t.Fatalf("%d records archived, want %d", n, good+bad)
	}

	cumulustest.AddCollection(t, cumulustest.Pool(t, url), "LATER___1")

	rng := rand.New(rand.NewPCG(3, 4))
	midway := 0
	for i := range 20 {
		before := countFiles(t, sqs)
		cmd := exec.Command(bin, "granule-recover", "--dsn", url, "--archive", arch, "--batch", "5", "--concurrency", "2")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		// The kill comes a random while after the run's first recovered
		// record (or after 5 s without one): how long a start takes on a
		// loaded machine does not decide where the kills fall.
		for deadline := time.Now().Add(5 * time.Second); before > 0 && countFiles(t, sqs) == before && time.Now().Before(deadline); {
			select {
			case <-exited:
			case <-time.After(2 * time.Millisecond):
				continue
			}
			break
		}
		time.Sleep(time.Duration(rng.IntN(20)) * time.Millisecond)
		cmd.Process.Signal(syscall.SIGKILL)
		<-exited
		left := countFiles(t, sqs)
		if left > 0 && left < good+bad {
			midway++
		}
		t.Logf("kill %d: %d records left", i, left)
	}
	if midway < 5 {
		t.Errorf("only %d of 20 kills came in the middle of the recovery", midway)
	}
	// The last run finishes what the killed ones left; when they were
	// killed only after finishing it all, it finds nothing to do.
	code, out = run("granule-recover", "--dsn", url, "--archive", arch)
	if !(code == 3 && strings.Contains(out, "failed again")) && !(code == 0 && strings.Contains(out, " 0 messages")) {
		t.Fatalf("last granule-recover: exit %d\n%s", code, out)
	}
	if n := countFiles(t, sqs); n != 0 {
		t.Errorf("%d records left under sqs/", n)
	}
	var failed []string
	filepath.WalkDir(filepath.Join(arch, "dead-letter-archive", "failed-sqs"), func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		var r struct{ Granules []string }
		if err := json.Unmarshal(b, &r); err != nil {
			t.Errorf("%s: %v", p, err)
		}
		failed = append(failed, r.Granules...)
		return nil
	})
	sort.Strings(failed)
	if len(failed) != bad || failed[0] != "never0000" || failed[bad-1] != fmt.Sprintf("never%04d", bad-1) {
		t.Errorf("failed-sqs holds %d records (%v…), want %d", len(failed), failed[:min(3, len(failed))], bad)
	}
	for i := 1; i < len(failed); i++ {
		if failed[i] == failed[i-1] {
			t.Errorf("%s is twice in failed-sqs", failed[i])
		}
	}

	// The same messages written once, directly.
	direct := pgtest.NewDatabase(t)
	run("granule-schema", "--dsn", direct)
	cumulustest.Seed(t, direct, "LATER___1")
	if code, out := run("granule-write", "--dsn", direct, "--archive", filepath.Join(dir, "direct"), in); code != 3 {
		t.Fatalf("direct write: %d %s", code, out)
	}
	a, b := granuleRows(t, url), granuleRows(t, direct)
	if len(a) != good || strings.Join(a, "\n") != strings.Join(b, "\n") {
		t.Errorf("%d rows after recovery, %d written directly; first: %v / %v", len(a), len(b), a[:min(2, len(a))], b[:min(2, len(b))])
	}
}

// The Dead Letter Archive under an s3:// prefix: granule-write archives
// there, granule-recover (SIGKILLed a few times and run again) empties
// sqs/ into the database and failed-sqs/; the rows equal a direct write's.
func TestGranuleRecover_S3Archive(t *testing.T) {
	srv := s3test.Start(t, "system")
	bin := buildBinary(t)
	dir := t.TempDir()
	url := pgtest.NewDatabase(t)
	run := func(args ...string) (int, string) {
		return testutil.Run(t, exec.Command(bin, args...))
	}
	count := func(sub string) []string {
		st, err := location.Open(context.Background(), "s3://system/arch/dead-letter-archive/"+sub)
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		fs.WalkDir(store.FS(t.Context(), st), ".", func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				keys = append(keys, p)
			}
			return nil
		})
		return keys
	}
	if code, out := run("granule-schema", "--dsn", url); code != 0 {
		t.Fatalf("granule-schema: %d %s", code, out)
	}
	cumulustest.Seed(t, url)
	in := filepath.Join(dir, "messages.jsonl")
	const good, bad = 200, 20
	granuleMsgs(t, in, "LATER___1", "g", good)
	granuleMsgs(t, in, "NEVER___1", "never", bad)
	if code, out := run("granule-write", "--dsn", url, "--archive", "s3://system/arch", in); code != 3 {
		t.Fatalf("granule-write: exit %d\n%s", code, out)
	}
	if n := len(count("sqs")); n != good+bad {
		t.Fatalf("%d records archived in s3://system/arch, want %d", n, good+bad)
	}
	cumulustest.AddCollection(t, cumulustest.Pool(t, url), "LATER___1")
	// Three recovers killed mid-way: each at its k-th record deleted from
	// the archive, the object gone and the answer not yet sent.
	for _, k := range []int32{10, 25, 40} {
		var deletes atomic.Int32
		reached, killed := make(chan struct{}), make(chan struct{})
		srv.OnDelete(func(string) {
			if deletes.Add(1) == k {
				reached <- struct{}{}
				<-killed
			}
		})
		cmd := exec.Command(bin, "granule-recover", "--dsn", url, "--archive", "s3://system/arch", "--batch", "5", "--concurrency", "2")
		cmd.Env = os.Environ()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		select {
		case <-reached:
			_ = cmd.Process.Signal(syscall.SIGKILL)
			close(killed)
			<-exited
		case err := <-exited:
			t.Fatalf("granule-recover ended (%v) after %d records deleted, before its kill at %d", err, deletes.Load(), k)
		}
		srv.OnDelete(nil)
	}
	code, out := run("granule-recover", "--dsn", url, "--archive", "s3://system/arch")
	if !(code == 3 && strings.Contains(out, "failed again")) && !(code == 0 && strings.Contains(out, " 0 messages")) {
		t.Fatalf("last granule-recover: exit %d\n%s", code, out)
	}
	if n := len(count("sqs")); n != 0 {
		t.Errorf("%d records left under sqs/", n)
	}
	if n := len(count("failed-sqs")); n != bad {
		t.Errorf("%d records in failed-sqs/, want %d", n, bad)
	}
	direct := pgtest.NewDatabase(t)
	run("granule-schema", "--dsn", direct)
	cumulustest.Seed(t, direct, "LATER___1")
	if code, out := run("granule-write", "--dsn", direct, "--archive", filepath.Join(dir, "direct"), in); code != 3 {
		t.Fatalf("direct write: %d %s", code, out)
	}
	a, b := granuleRows(t, url), granuleRows(t, direct)
	if len(a) != good || strings.Join(a, "\n") != strings.Join(b, "\n") {
		t.Errorf("%d rows after recovery, %d written directly", len(a), len(b))
	}
}

// granule-write makes its archive even when no message fails, so that
// granule-recover finds it, empty (exit 0), and a mistyped --archive
// stays a usage error, nothing replayed; a dangling link named as the
// archive fails, and nothing is made where it points.
func TestGranuleWrite_MakesTheArchive(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	url := pgtest.NewDatabase(t)
	if code, out := callIn("", "granule-schema", "--dsn", url); code != cli.ExitOK {
		t.Fatalf("granule-schema: exit %d\n%s", code, out)
	}
	cumulustest.Seed(t, url)
	cumulustest.AddCollection(t, cumulustest.Pool(t, url), "OK___1")
	in := filepath.Join(dir, "messages.jsonl")
	granuleMsgs(t, in, "OK___1", "g", 3)
	arch := filepath.Join(dir, "archive")
	if code, out := callIn("", "granule-write", "--dsn", url, "--archive", arch, in); code != cli.ExitOK {
		t.Fatalf("granule-write: exit %d\n%s", code, out)
	}
	if code, out := callIn("", "granule-recover", "--dsn", url, "--archive", arch); code != cli.ExitOK || !strings.Contains(out, "0 messages") {
		t.Errorf("granule-recover of the archive of a write without failures: exit %d\n%s", code, out)
	}
	if code, out := callIn("", "granule-recover", "--dsn", url, "--archive", arch+"x"); code != cli.ExitUsage || !strings.Contains(out, "not a folder") {
		t.Errorf("granule-recover of a mistyped archive: exit %d\n%s", code, out)
	}
	// A link where the archive would be is not made a folder through.
	link, target := filepath.Join(dir, "link"), filepath.Join(dir, "elsewhere")
	testutil.Check(t, os.Symlink(target, link))
	if code, out := callIn("", "granule-write", "--dsn", url, "--archive", link, in); code != cli.ExitFailure || !strings.Contains(out, "cannot be made one") {
		t.Errorf("granule-write into a dangling link: exit %d\n%s", code, out)
	}
	if _, err := os.Lstat(target); err == nil {
		t.Errorf("%s was made through the link", target)
	}
}
