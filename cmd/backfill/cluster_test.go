package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/backfill-dev/backfill/internal/cli"
	"github.com/backfill-dev/backfill/internal/s3test"
	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/internal/store/location"
	"github.com/backfill-dev/backfill/internal/testutil"
	"github.com/backfill-dev/backfill/pipeline/scaleout"
	"github.com/backfill-dev/backfill/pipeline/stamped"
)

// A pod as a Kubernetes node runs it: the container's process is PID 1 in
// a PID namespace of its own, under the host name the Job gives it
// (backfill-map-I for index I), with the Job's environment.
type pod struct {
	job      string
	index    int
	cmd      *exec.Cmd
	log      lockedBuffer
	exited   chan int      // its exit status (-signal when killed)
	lost     chan struct{} // closed when the node is presumed dead
	loseOnce sync.Once
}

// startPod starts bin args as a pod of job at index.
func startPod(t *testing.T, job string, index, completions int, bin string, args ...string) *pod {
	t.Helper()
	p := &pod{job: job, index: index, exited: make(chan int, 1), lost: make(chan struct{})}
	host := fmt.Sprintf("%s-%d", job, index)
	p.cmd = exec.Command("sh", append([]string{"-c", `hostname "$0" && exec "$@"`, host, bin}, args...)...)
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID | syscall.CLONE_NEWUTS}
	p.cmd.Env = append(os.Environ(), fmt.Sprintf("JOB_COMPLETION_INDEX=%d", index), fmt.Sprintf("JOB_COMPLETION_COUNT=%d", completions))
	p.cmd.Stdout, p.cmd.Stderr = &p.log, &p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("pod %s: %v", host, err)
	}
	go func() { p.exited <- testutil.ExitCode(p.cmd.Wait()) }()
	return p
}

// lose makes the controller presume the pod dead (its node lost) while its
// process may still run.
func (p *pod) lose() { p.loseOnce.Do(func() { close(p.lost) }) }

// indexedJob runs an Indexed Job with the Job controller's documented
// semantics: every index at once (parallelism = completions); a pod that
// fails is replaced after 10 s, 20 s, 40 s… (backoff per index); an index
// that failed more than backoffLimitPerIndex times fails the Job
// (maxFailedIndexes: 0); exit 2 fails the Job at once (the manifests'
// podFailurePolicy).
type indexedJob struct {
	name                 string
	bin                  string
	args                 []string
	completions          int
	backoffLimitPerIndex int
	started              func(*pod) // called on every pod started, for faults

	mu   sync.Mutex
	pods map[int][]*pod
}

// run runs the Job to its end and returns an error when it failed.
func (j *indexedJob) run(t *testing.T) error {
	j.pods = map[int][]*pod{}
	ctx, failJob := context.WithCancelCause(context.Background())
	defer failJob(nil)
	var wg sync.WaitGroup
	for i := range j.completions {
		wg.Go(func() {
			failures := 0
			for ctx.Err() == nil {
				p := startPod(t, j.name, i, j.completions, j.bin, j.args...)
				j.mu.Lock()
				j.pods[i] = append(j.pods[i], p)
				j.mu.Unlock()
				if j.started != nil {
					j.started(p)
				}
				code := -1
				select {
				case code = <-p.exited:
				case <-p.lost:
				case <-ctx.Done():
					p.cmd.Process.Kill()
					return
				}
				switch {
				case code == 0:
					return
				case code == 2:
					failJob(fmt.Errorf("%s index %d exited 2 (podFailurePolicy: FailJob)\n%s", j.name, i, p.log.String()))
					return
				}
				failures++
				if failures > j.backoffLimitPerIndex {
					failJob(fmt.Errorf("%s index %d failed %d times (backoffLimitPerIndex %d)\n%s", j.name, i, failures, j.backoffLimitPerIndex, p.log.String()))
					return
				}
				select {
				case <-time.After(10 * time.Second << (failures - 1)):
				case <-ctx.Done():
				}
			}
		})
	}
	wg.Wait()
	return context.Cause(ctx)
}

// attempts returns the pods that ran index i, in order.
func (j *indexedJob) attempts(i int) []*pod {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.pods[i]
}

// The scale-out Jobs as a cluster runs them, pods in PID and UTS namespaces
// of their own, on the tests' S3 server, over a corpus with damage and
// collisions across shards. A map pod is SIGKILLed just after its first
// commit, and another SIGSTOPped there and presumed dead: each is replaced
// after the first backoff, and the replacement takes the lock over from
// its predecessor (same host name, PID 1) at once, instead of waiting out
// the lock's 2-minute time to live. The SIGSTOPped pod, continued once its
// replacement has finished, commits nothing and exits 1. Every Job
// completes, no bucket is committed twice, check exits 3 with the rejects
// of one run over the corpus, and the output is the one-machine run's.
func TestCluster_JobsWithFaults(t *testing.T) {
	skipUnderRace(t)
	testutil.NeedRoot(t, "pods in PID and UTS namespaces of their own")
	bin := buildBinary(t)
	srv := s3test.Start(t, "test")
	dir := t.TempDir()
	in := dir + "/c"
	if code, out := call("gen", "-q", "--out", in, "--buckets", "9", "--reports", "60", "--can-size", "256KiB",
		"--min-measurements", "400", "--max-measurements", "4000", "--time-slots", "3", "--seed", "21", "--corrupt", "all=0.02", "--max-template", "1KiB"); code != cli.ExitOK {
		t.Fatalf("gen: exit %d\n%s", code, out)
	}
	flags := []string{"--counter-bits", "20", "--max-blob", "1MiB"}
	code, single := runJSON(t, append([]string{"--in", in, "--out", dir + "/single"}, flags...)...)
	if code != cli.ExitRejects || single.RejectsByReason["collision"] == 0 || len(single.RejectsByReason) < 2 {
		t.Fatalf("one-machine run: exit %d, rejects %v: the corpus must have damage and collisions", code, single.RejectsByReason)
	}
	want := outputFiles(tree(t, dir+"/single"))
	dst, _ := location.Open(t.Context(), "s3://test/c")
	if err := store.Upload(t.Context(), dst, in); err != nil {
		t.Fatal(err)
	}
	const shards, out, planFile = 3, "s3://test/job", "s3://test/job/plan.json"
	if code, msg := callIn("", "plan", "--in", "s3://test/c", "--shards", fmt.Sprint(shards), "--out", planFile); code != cli.ExitOK {
		t.Fatalf("plan: exit %d\n%s", code, msg)
	}
	p := readPlanFile(t, planFile)
	killed, stopped := -1, -1
	for i := range shards {
		if len(p.Names(i)) < 2 {
			continue
		}
		if killed < 0 {
			killed = i
		} else if stopped < 0 {
			stopped = i
		}
	}
	if stopped < 0 {
		t.Fatalf("the plan has fewer than two shards of two buckets or more: %+v", p)
	}

	// Faults strike when the victim's first bucket is committed (its
	// measurements object, stored after the ledger entry, the last PUT of
	// a commit), before the pod has the answer.
	ledger := func(i int) string { return fmt.Sprintf("/test/job/shards/%d/measurements/", i) }
	var mu sync.Mutex
	var killedAt, stoppedAt time.Time
	var lockHolder string
	victims := map[int]*pod{}
	srv.OnPut(func(put s3test.Put) {
		mu.Lock()
		defer mu.Unlock()
		for i, v := range victims {
			if v == nil || !strings.HasPrefix(put.Path, ledger(i)) {
				continue
			}
			victims[i] = nil
			if i == killed {
				lockHolder = readObject(t, fmt.Sprintf("s3://test/job/shards/%d/.lock", i))
				v.cmd.Process.Signal(syscall.SIGKILL)
				killedAt = time.Now()
			} else {
				v.cmd.Process.Signal(syscall.SIGSTOP)
				stoppedAt = time.Now()
				v.lose()
			}
		}
	})
	mapJob := &indexedJob{name: "backfill-map", bin: bin, completions: shards, backoffLimitPerIndex: 3,
		args: append([]string{"run", "--plan", planFile, "--out", out, "--resume", "--workers", "2", "-q"}, flags...)}
	mapJob.started = func(p *pod) {
		if (p.index == killed || p.index == stopped) && len(mapJob.attempts(p.index)) == 1 {
			mu.Lock()
			victims[p.index] = p // its first pod only
			mu.Unlock()
		}
	}
	if err := mapJob.run(t); err != nil {
		t.Fatalf("the map Job failed: %v", err)
	}
	srv.OnPut(nil)

	// The killed pod was PID 1 on backfill-map-K; its replacement, the
	// same, took over at once: two pods in all, the second committing one
	// backoff after the kill.
	var holder store.Holder
	if err := json.Unmarshal([]byte(lockHolder), &holder); err != nil || holder.PID != 1 || holder.Host != fmt.Sprintf("backfill-map-%d", killed) {
		t.Errorf("the killed pod's lock object %q: want PID 1 on backfill-map-%d", lockHolder, killed)
	}
	for _, i := range []int{killed, stopped} {
		if n := len(mapJob.attempts(i)); n != 2 {
			t.Errorf("index %d ran %d pods, want 2 (the victim and its replacement)", i, n)
		}
	}
	firstAfter := func(i int, since time.Time) time.Duration { return srv.FirstPutAfter(ledger(i), since) }
	took := firstAfter(killed, killedAt)
	t.Logf("SIGKILL to the replacement's first commit: %.1f s (the first backoff is 10 s; the lock's time to live 2 min)", took.Seconds())
	// Not a speed: the claim is that a replacement takes the dead pod's
	// lock over at once instead of waiting out its 2-minute time to live,
	// so the bound is half of that, whatever the machine's speed.
	const sooner = time.Minute
	if took < 0 || took > sooner {
		t.Errorf("the killed pod's replacement committed %v after the kill, want sooner than the lock's time to live", took)
	}
	if took := firstAfter(stopped, stoppedAt); took < 0 || took > sooner {
		t.Errorf("the SIGSTOPped pod's replacement committed %v after the stop, want sooner than the lock's time to live", took)
	} else {
		t.Logf("SIGSTOP (the pod presumed dead) to the replacement's first commit: %.1f s", took.Seconds())
	}

	// The frozen pod wakes to a lock taken over: it commits nothing more.
	frozen := mapJob.attempts(stopped)[0]
	resumed := time.Now()
	frozen.cmd.Process.Signal(syscall.SIGCONT)
	if code := <-frozen.exited; code != cli.ExitFailure || !strings.Contains(frozen.log.String(), "taken over") {
		t.Errorf("the SIGSTOPped pod, continued: exit %d, want 1 naming the lock taken over\n%s", code, frozen.log.String())
	}
	if d := firstAfter(stopped, resumed); d >= 0 {
		t.Errorf("the SIGSTOPped pod committed after it was continued (%v)", d)
	}
	commits := srv.PutCounts("/test/job/shards/", "/measurements/")
	if len(commits) != len(p.Buckets) {
		t.Errorf("%d buckets committed, the plan has %d", len(commits), len(p.Buckets))
	}
	for k, n := range commits {
		if n != 1 {
			t.Errorf("%s committed %d times", k, n)
		}
	}

	// Check as its Job runs it completes; as the operator runs it, it
	// exits 3 with the corpus's rejects, one run's.
	checkJob := &indexedJob{name: "backfill-check", bin: bin, completions: 1, backoffLimitPerIndex: 3,
		args: []string{"check", "--plan", planFile, "--out", out, "--rejects-exit", "0"}}
	if err := checkJob.run(t); err != nil {
		t.Fatalf("the check Job failed: %v", err)
	}
	code, msg := call("check", "--json", "--plan", planFile, "--out", out)
	var sum scaleout.CheckSummary
	if err := json.Unmarshal([]byte(msg), &sum); code != cli.ExitRejects || err != nil {
		t.Fatalf("check: exit %d, %v\n%s", code, err, msg)
	}
	one := stamped.Tally{Reports: single.Reports, Measurements: single.Measurements, Rejects: single.Rejects, Notices: single.Notices,
		RejectsByReason: single.RejectsByReason, NoticesByReason: single.NoticesByReason}
	if !reflect.DeepEqual(sum.Totals, one) {
		t.Errorf("check's totals\n%+v\none run's\n%+v", sum.Totals, one)
	}
	loadJob := &indexedJob{name: "backfill-load", bin: bin, completions: shards, backoffLimitPerIndex: 3,
		args: []string{"load", "--plan", planFile, "--out", out}}
	if err := loadJob.run(t); err != nil {
		t.Fatalf("the load Job failed: %v", err)
	}
	sameOutput(t, want, outputFiles(tree(t, out)), true)
}

func readPlanFile(t *testing.T, loc string) scaleout.Plan {
	t.Helper()
	p, err := scaleout.ParsePlan([]byte(readObject(t, loc)))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// readObject reads a file through a store of its own.
func readObject(t *testing.T, loc string) string {
	t.Helper()
	parent, base := store.Split(loc)
	st, err := location.Open(context.Background(), parent)
	if err != nil {
		t.Fatal(err)
	}
	b, err := store.ReadFile(context.Background(), st, base)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return string(b)
}
